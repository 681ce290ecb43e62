"""Why this guess? written once (issue 53): no function of the feature takes more than MAX_PARAMETERS parameters
(the request travels as one `Ask`, views/why/ask.py), the Ask checks what it can on its own, and the word-start
marks are one table that the page, the lesson and the typed words share."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.views.why.ask import Ask
from tests.helpers.paths import ROOT

MAX_PARAMETERS = 6  # self and cls not counted; keyword-only, *args and **kwargs counted
FEATURE = ("bertviz_lab/views/why", "bertviz_lab/ui/why", "bertviz_lab/notebook/explanations.py",
           "bertviz_lab/cli/explain.py", "bertviz_lab/figures/why.py", "bertviz_lab/explain/report.py")


def feature_files() -> list[Path]:
    return sorted(path for name in FEATURE for path in
                  ((ROOT / name).rglob("*.py") if (ROOT / name).is_dir() else [ROOT / name]))


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    """Every parameter's name, `self` and `cls` aside."""
    a = function.args
    every = [*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg]
    return [p.arg for p in every if p is not None and p.arg not in ("self", "cls")]


def too_many(source: str) -> dict[str, int]:
    """Each function (or lambda, by line) of `source` with more than MAX_PARAMETERS parameters -> how many."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            count = len(parameters(node))
            if count > MAX_PARAMETERS:
                found[getattr(node, "name", f"lambda at line {node.lineno}")] = count
    return found


def test_no_function_of_the_feature_takes_more_than_six_parameters():
    files = feature_files()
    assert len(files) >= 8 and all(path.exists() for path in files)
    found = {f"{path.relative_to(ROOT)}: {name}": count for path in files
             for name, count in too_many(path.read_text(encoding="utf-8")).items()}
    assert found == {}, "bundle them into a record (the Ask, the result) instead"


def test_the_walk_counts_keyword_only_and_star_parameters_and_not_self():
    assert too_many("def f(a, b, c, d, e, f): pass\nclass C:\n    def m(self, a, b, c, d, e, f): pass\n") == {}
    assert too_many("def f(a, b, *, c, d, e, f, g): pass") == {"f": 7}
    assert too_many("def f(a, b, c, d, e, *args, **kwargs): pass") == {"f": 7}
    assert too_many("g = lambda a, b, c, d, e, f, g: 0") == {"lambda at line 1": 7}


def test_an_ask_is_checked_when_built_and_reads_none_as_no_word():
    assert Ask(target=None, contrast=None) == Ask() and Ask().target == "" and hash(Ask(mask=1)) == hash(Ask(mask=1))
    for wrong, said in (({"mask": "1"}, "mask must be a whole number"), ({"layer": True}, "layer must be a whole"),
                        ({"head": 1.5}, "head must be a whole number or None"), ({"target": 3}, "target must be a word"),
                        ({"mask": -1}, "there is no [MASK] #0"), ({"ig_steps": 0}, "ig_steps must be at least 1")):
        with pytest.raises(InputError, match=said.replace("[", r"\[")):
            Ask(**wrong)
    asked = Ask(mask=1, target="mat", contrast="rug", layer=2, head=3, top_k=7, ig_steps=9)
    assert asked.explained == Ask(mask=1, target="mat", contrast="rug", top_k=7, ig_steps=9)


def test_the_command_line_builds_the_ask_its_options_describe():
    from argparse import Namespace

    from bertviz_lab.cli.explain import asked

    options = Namespace(mask=2, target="mat", contrast=None, position=None, layer=-2, head=1, top_k=3)
    assert asked(options) == Ask(mask=1, target="mat", layer=-2, head=1, top_k=3)
    assert asked(Namespace(mask=None, target=None, contrast=None, position=4, layer=-1, head=None, top_k=5)) == \
        Ask(position=4)


def test_the_word_start_marks_are_one_table():
    from bertviz_lab.bert.tokenizer_json import KINDS, WORD_MARKERS, WORD_START
    from bertviz_lab.ui.kit import widgets
    from bertviz_lab.views.lesson.vector_steps import shown

    assert widgets.WORD_START is WORD_START and set(WORD_START) < set(KINDS.values())
    assert WORD_MARKERS == ("Ġ", "▁") and [shown(m + "mat") for m in WORD_MARKERS] == ["mat", "mat"]
