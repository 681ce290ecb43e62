"""tests/ mirrors the package: every module bertviz_lab/<path>/<name>.py has its own test,
tests/<path>/test_<name>.py (a page's, pages/<name>.py: tests/pages/test_<name>.py; app.py's: tests/test_app.py),
or is listed here. In TESTED_THROUGH with the test that covers it: a test that imports it, names it in a string
(`-m bertviz_lab...`, a monkeypatch target, its file), imports its package whose __init__ imports it, or runs a
page that imports it. Or, covered by no test that way, in UNTESTED with the reason. So a new module without a test
fails here, and so does a list gone stale: an entry that now has its own test, a module that is gone, an untested
module that a test now imports. Every tests folder is a package (pytest imports tests/x/test_y.py as
tests.x.test_y, so two folders may hold a test of the same name) and mirrors a folder of the package, or is one of
EXTRA_FOLDERS."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import ROOT

EXTRA_FOLDERS = {"browser", "pages", "helpers", "gpu", "bench"}

# A module without a test of its own -> the test that covers it (the one that imports it most directly).
TESTED_THROUGH = {
    "bertviz_lab/atomic.py": "tests/pages/test_finetune.py",
    "bertviz_lab/bert/activations.py": "tests/bert/test_model.py",
    "bertviz_lab/bert/attention.py": "tests/bert/test_fast.py",
    "bertviz_lab/bert/card.py": "tests/bert/test_checkpoint_hostile.py",
    "bertviz_lab/bert/device.py": "tests/bert/test_model.py",
    "bertviz_lab/bert/in_memory.py": "tests/bert/test_vocab_mismatch.py",
    "bertviz_lab/bert/precision.py": "tests/bert/test_dropout_precision.py",
    "bertviz_lab/bert/rng.py": "tests/gpu/test_gpu_paths.py",
    "bertviz_lab/bert/tokenizer_json.py": "tests/bert/test_tokenizer.py",
    "bertviz_lab/cli/app.py": "tests/test_classroom.py",
    "bertviz_lab/cli/common.py": "tests/cli/test_cli.py",
    "bertviz_lab/cli/training.py": "tests/cli/test_cli.py",
    "bertviz_lab/corpus/agreement.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/generator.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/grammar.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/lexicon.py": "tests/test_shipped_model.py",
    "bertviz_lab/corpus/morph.py": "tests/corpus/test_corpus.py",
    "bertviz_lab/corpus/phrases.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/probes.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/senses.py": "tests/views/representations/test_representations.py",
    "bertviz_lab/corpus/tables.py": "tests/corpus/test_corpus.py",
    "bertviz_lab/corpus/tree.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/tree_parts.py": "tests/corpus/test_trees.py",
    "bertviz_lab/corpus/user_text.py": "tests/test_classroom.py",
    "bertviz_lab/errors.py": "tests/test_settings.py",
    "bertviz_lab/explain/checks.py": "tests/explain/test_explain.py",
    "bertviz_lab/explain/methods.py": "tests/explain/test_explain.py",
    "bertviz_lab/explain/rank.py": "tests/explain/test_words.py",
    "bertviz_lab/explain/report.py": "tests/explain/test_words.py",
    "bertviz_lab/explain/score.py": "tests/explain/test_explain.py",
    "bertviz_lab/figures/attention.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/finetune.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/handout.py": "tests/finetune/test_upload_hostile.py",
    "bertviz_lab/figures/lesson.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/losses.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/predictions.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/representations.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/shapes.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/syntax.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/timelapse.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/timelapse_syntax.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/training.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/why.py": "tests/figures/test_export.py",
    "bertviz_lab/figures/worked.py": "tests/figures/test_export.py",
    "bertviz_lab/files.py": "tests/test_package.py",
    "bertviz_lab/finetune/config.py": "tests/finetune/test_loop.py",
    "bertviz_lab/finetune/data.py": "tests/finetune/test_tasks.py",
    "bertviz_lab/finetune/runs.py": "tests/finetune/test_loop.py",
    "bertviz_lab/notebook/attention_calls.py": "tests/notebook/test_notebook.py",
    "bertviz_lab/notebook/explanations.py": "tests/notebook/test_notebook.py",
    "bertviz_lab/notebook/grammar.py": "tests/notebook/test_notebook.py",
    "bertviz_lab/notebook/lab.py": "tests/notebook/test_notebook.py",
    "bertviz_lab/notebook/words.py": "tests/notebook/test_notebook.py",
    "bertviz_lab/pretrain/checkpoints.py": "tests/pretrain/test_snapshots.py",
    "bertviz_lab/pretrain/corpus_setup.py": "tests/pretrain/test_config.py",
    "bertviz_lab/pretrain/data.py": "tests/pretrain/test_loop.py",
    "bertviz_lab/pretrain/distributed.py": "tests/pretrain/test_runs.py",
    "bertviz_lab/pretrain/process.py": "tests/pretrain/test_snapshots.py",
    "bertviz_lab/pretrain/publish.py": "tests/pretrain/test_snapshots.py",
    "bertviz_lab/pretrain/resources.py": "tests/pretrain/test_config.py",
    "bertviz_lab/pretrain/totals.py": "tests/pretrain/test_loop.py",
    "bertviz_lab/syntax/agreement.py": "tests/syntax/test_findings.py",
    "bertviz_lab/syntax/encode.py": "tests/syntax/test_search.py",
    "bertviz_lab/syntax/probe_fit.py": "tests/syntax/test_findings.py",
    "bertviz_lab/syntax/words.py": "tests/syntax/test_relations.py",
    "bertviz_lab/ui/attention/cached.py": "tests/pages/test_attention.py",
    "bertviz_lab/ui/finetune/live.py": "tests/pages/test_finetune.py",
    "bertviz_lab/ui/finetune/results.py": "tests/pages/test_finetune.py",
    "bertviz_lab/ui/kit/forms.py": "tests/views/test_forms.py",
    "bertviz_lab/ui/kit/tables.py": "tests/pages/test_losses.py",
    "bertviz_lab/ui/kit/widgets.py": "tests/views/why/test_feature.py",
    "bertviz_lab/ui/lesson/stepper.py": "tests/ui/shell/test_once.py",
    "bertviz_lab/ui/lesson/steps.py": "tests/views/lesson/test_steps.py",
    "bertviz_lab/ui/losses/walkthrough.py": "tests/pages/test_losses.py",
    "bertviz_lab/ui/predict/reading.py": "tests/pages/test_predict.py",
    "bertviz_lab/ui/predict/replaced.py": "tests/pages/test_predict.py",
    "bertviz_lab/ui/pretrain/live.py": "tests/views/pretrain/test_live.py",
    "bertviz_lab/ui/representations/neighbours.py": "tests/pages/test_representations.py",
    "bertviz_lab/ui/representations/shapes.py": "tests/views/representations/test_shapes.py",
    "bertviz_lab/ui/representations/vectors.py": "tests/pages/test_representations.py",
    "bertviz_lab/ui/shell/classroom.py": "tests/ui/shell/test_links.py",
    "bertviz_lab/ui/shell/handout.py": "tests/figures/test_export.py",
    "bertviz_lab/ui/shell/models.py": "tests/ui/shell/test_serve.py",
    "bertviz_lab/ui/shell/projector.py": "tests/ui/shell/test_links.py",
    "bertviz_lab/ui/shell/router.py": "tests/pages/test_home.py",
    "bertviz_lab/ui/shell/share.py": "tests/ui/shell/test_links.py",
    "bertviz_lab/ui/shell/state.py": "tests/ui/shell/test_serve.py",
    "bertviz_lab/ui/syntax/analysis.py": "tests/pages/test_syntax.py",
    "bertviz_lab/ui/syntax/probe_and_agreement.py": "tests/pages/test_syntax.py",
    "bertviz_lab/ui/syntax/probing.py": "tests/pages/test_syntax_probing.py",
    "bertviz_lab/ui/timelapse/player.py": "tests/views/timelapse/test_history.py",
    "bertviz_lab/ui/timelapse/syntax.py": "tests/views/timelapse/test_syntax.py",
    "bertviz_lab/ui/why/sections.py": "tests/pages/test_why.py",
    "bertviz_lab/ui/worked/calculators.py": "tests/pages/test_worked.py",
    "bertviz_lab/views/finetune/classifier.py": "tests/views/finetune/test_notes.py",
    "bertviz_lab/views/finetune/dev.py": "tests/views/finetune/test_notes.py",
    "bertviz_lab/views/lesson/runs.py": "tests/views/lesson/test_questions.py",
    "bertviz_lab/views/lesson/vector_steps.py": "tests/views/lesson/test_questions.py",
    "bertviz_lab/views/lesson/why_step.py": "tests/views/lesson/test_families.py",
    "bertviz_lab/views/losses/masking_stats.py": "tests/views/losses/test_walkthrough.py",
    "bertviz_lab/views/representations/neighbours.py": "tests/views/representations/test_representations.py",
    "bertviz_lab/views/representations/vectors.py": "tests/views/representations/test_representations.py",
    "bertviz_lab/views/syntax/analysis.py": "tests/pages/test_syntax.py",
    "bertviz_lab/views/timelapse/frames.py": "tests/views/timelapse/test_history.py",
    "bertviz_lab/views/timelapse/syntax_file.py": "tests/views/timelapse/test_syntax.py",
    "bertviz_lab/views/why/ask.py": "tests/views/why/test_feature.py",
    "bertviz_lab/views/why/explanation.py": "tests/explain/test_explain.py",
    "bertviz_lab/views/why/found.py": "tests/views/why/test_examples.py",
    "bertviz_lab/views/worked/onehot.py": "tests/views/worked/test_forward_pass.py",
}

# Modules no test imports, each with the reason it has no test.
UNTESTED = {
    "bertviz_lab/bert/albert.py",  # read by bert/family.py: tests/bert/test_family.py loads an ALBERT checkpoint and compares it with transformers
    "bertviz_lab/bert/distilbert.py",  # read by bert/family.py: tests/bert/test_family.py loads a DistilBERT checkpoint and compares it with transformers
    "bertviz_lab/bert/electra.py",  # read by bert/family.py: tests/bert/test_family.py loads both ELECTRAs and compares them with transformers
    "bertviz_lab/bert/heads.py",  # bert/model.py's MLM, NSP and RTD heads: tests/bert/test_model.py and the parity tests in tests/bert/test_checkpoint.py run them
    "bertviz_lab/bert/roberta.py",  # read by bert/family.py: tests/bert/test_family.py loads RoBERTa and XLM-R and compares them with transformers
    "bertviz_lab/corpus/stories_animals.py",  # story data read by corpus/generator.py: tests/corpus/test_corpus.py
    "bertviz_lab/corpus/stories_outdoor.py",  # story data read by corpus/generator.py: tests/corpus/test_corpus.py
    "bertviz_lab/corpus/stories_town.py",  # story data read by corpus/generator.py: tests/corpus/test_corpus.py
    "bertviz_lab/explain/flow.py",  # attention flow's solver, run by explain/methods.py: tests/explain/test_progress.py checks it against networkx
    "bertviz_lab/pretrain/ship_batches.py",  # a maintainer's command that writes checkpoints/batches anew: tests/pretrain/test_batch_cache.py checks the file it writes
    "bertviz_lab/pretrain/supply.py",  # the training batches, run by pretrain/loop.py: tests/pretrain/test_loop.py and tests/pretrain/test_batch_cache.py
    "bertviz_lab/ui/kit/runs.py",  # the run pages' library, drawn by ui/pretrain/live.py and ui/finetune/live.py: tests/pages/test_pretrain.py and tests/pages/test_finetune.py
    "bertviz_lab/ui/shell/link_readers.py",  # a link's values read for ui/shell/links.py: tests/ui/shell/test_links.py
    "bertviz_lab/ui/shell/state_checks.py",  # the session keys' checks, run by ui/shell/state.py: every page test
    "bertviz_lab/views/predict/reading.py",  # how the model read the sentence, drawn by ui/predict/reading.py: tests/pages/test_predict.py
}


def modules(root: Path) -> list[str]:
    """Every module of the package (no __init__.py, no __main__.py), every page, and app.py, as paths."""
    found = [p for p in (root / "bertviz_lab").rglob("*.py")
             if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts]
    found += sorted((root / "pages").glob("*.py")) + [p for p in [root / "app.py"] if p.exists()]
    return sorted(p.relative_to(root).as_posix() for p in found)


def own_test(module: str) -> str:
    """bertviz_lab/views/attention/explorer.py -> tests/views/attention/test_explorer.py; pages/why.py ->
    tests/pages/test_why.py."""
    parts = Path(module).parts
    folder = ("tests", *parts[1:-1]) if parts[0] == "bertviz_lab" else ("tests", *parts[:-1])
    return "/".join([*folder, f"test_{Path(module).stem}.py"])


def without_a_test(root: Path) -> list[str]:
    return [m for m in modules(root) if not (root / own_test(m)).exists()]


def dotted(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def imported(path: Path) -> tuple[set[str], set[str]]:
    """The dotted names a file imports (`import a.b`: a.b; `from a.b import c`: a.b and a.b.c) and its strings."""
    names, strings = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
    return names, strings


def scripts(strings: set[str], root: Path) -> list[Path]:
    """The app's scripts a test runs in AppTest: app.py, and each page whose file its strings name."""
    named = [root / "app.py"] if "app.py" in strings else []
    for page in sorted((root / "pages").glob("*.py")):
        if (page.name in strings and "pages" in strings) or any(s.endswith(f"pages/{page.name}") for s in strings):
            named.append(page)
    return named


def covers(test: Path, module: str, root: Path = ROOT) -> bool:
    """Whether the test imports the module, names it in a string (`-m bertviz_lab.x`, "bertviz_lab.x.name" for a
    monkeypatch, its file for a test that reads the source), imports its package whose __init__.py imports it, or
    runs a page (or app.py) that imports it. A page or app.py: whether the test runs it."""
    names, strings = imported(test)
    name = dotted(module)
    if module.startswith("pages/") or module == "app.py":
        return root / module in scripts(strings, root)
    if name in names or any(s == name or s.startswith(name + ".") or s.endswith(module) for s in strings):
        return True
    package = name.rpartition(".")[0]
    init = root / package.replace(".", "/") / "__init__.py"
    if package in names and init.exists() and name in imported(init)[0]:
        return True
    return any(name in imported(script)[0] for script in scripts(strings, root))


def test_every_module_has_its_own_test_or_is_listed():
    unlisted = [m for m in without_a_test(ROOT) if m not in TESTED_THROUGH and m not in UNTESTED]
    assert unlisted == [], ("write tests/<path>/test_<name>.py for each of these modules, or name the test that "
                            "covers it in TESTED_THROUGH (tests/test_test_layout.py)")


def test_the_lists_hold_only_modules_without_a_test_of_their_own():
    real, lacking = set(modules(ROOT)), set(without_a_test(ROOT))
    listed = [*TESTED_THROUGH, *UNTESTED]
    assert sorted(m for m in listed if m not in real) == [], "gone from the tree: take them off the lists"
    assert sorted(m for m in listed if m in real and m not in lacking) == [], "these have their own test now"
    assert set(TESTED_THROUGH) & UNTESTED == set()


def test_each_test_named_covers_its_module():
    assert {m: t for m, t in TESTED_THROUGH.items() if not (ROOT / t).is_file()} == {}
    assert {m: t for m, t in TESTED_THROUGH.items() if not covers(ROOT / t, m)} == {}


def test_no_test_imports_a_module_listed_as_untested():
    tests = sorted(t for t in (ROOT / "tests").rglob("test_*.py") if t.resolve() != Path(__file__).resolve())
    found = {m: [t.relative_to(ROOT).as_posix() for t in tests if covers(t, m)] for m in sorted(UNTESTED)}
    assert {m: t for m, t in found.items() if t} == {}, "move these to TESTED_THROUGH, naming one of the tests"


def test_every_tests_folder_is_a_package_that_mirrors_the_tree():
    folders = [p for p in (ROOT / "tests").rglob("*") if p.is_dir() and "__pycache__" not in p.parts
               and any(p.glob("*.py"))]  # a folder of data files is neither
    assert [p.relative_to(ROOT).as_posix() for p in [ROOT / "tests", *folders]
            if not (p / "__init__.py").exists()] == []
    mirrored = [p for p in folders if p.relative_to(ROOT / "tests").parts[0] not in EXTRA_FOLDERS]
    assert [p.relative_to(ROOT).as_posix() for p in mirrored
            if not (ROOT / "bertviz_lab" / p.relative_to(ROOT / "tests") / "__init__.py").exists()] == []


def test_a_new_module_without_a_test_is_found(tmp_path):
    for path in ("bertviz_lab/views/why/new.py", "bertviz_lab/views/why/old.py", "tests/views/why/test_old.py",
                 "pages/new.py", "app.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert without_a_test(tmp_path) == ["app.py", "bertviz_lab/views/why/new.py", "pages/new.py"]
    assert own_test("app.py") == "tests/test_app.py" and own_test("bertviz_lab/seeds.py") == "tests/test_seeds.py"
