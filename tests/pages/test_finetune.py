"""The Fine-tune page in AppTest: the form refuses bad input with one message and starts nothing; a tiny run
started from the page finishes and shows its curves; its confusion matrix, its wrong dev examples and
"Try it" equal what the checkpoint computes one example at a time; the overlay draws one trace per run;
the before/after picture has one point per dev example (or word, up to the cap)."""

import base64
import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab import atomic
from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.finetune import data as ft_data
from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import TASK_FILE, builtin_tokenizer
from bertviz_lab.metrics import EVAL
from bertviz_lab.pretrain import runs
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT
from bertviz_lab.views.finetune import classifier as vf
from bertviz_lab.views.finetune import dev as fd
from bertviz_lab.views.finetune.dev import MAX_WORDS
from bertviz_lab.ui.shell.text import plain
from tests.helpers.lab import app_test, without_a_gpu
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "finetune.py")
FAST = dict(steps=4, batch_size=8, threads=1)
SCRATCH = dict(scratch="tiny", layers=2, heads=2, hidden=32, seq_len=32, device="cpu", **FAST)


def page(tab: str | None = None, run: str | None = None) -> AppTest:
    """The page, on this tab of the results and this run (default: the first tab, the newest run)."""
    at = app_test(PAGE)
    if tab:
        at.session_state["finetune.tab"] = tab
    if run:
        at.session_state["finetune.run"] = run
    return at.run()


def pretrain_run(root: Path, name: str, nsp: bool = True) -> Path:
    """A finished pretraining run whose checkpoint is a tiny random BERT (what a starting point needs)."""
    run, tokenizer = root / name, builtin_tokenizer()
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    save_checkpoint(BertForPreTraining(cfg, nsp_head=nsp, pooler=nsp), tokenizer, run / "checkpoints" / "step-000010",
                    card={"train_config": {"nsp": nsp}})
    atomic.write_json(run / "checkpoint.json", {"step": 10, "path": "checkpoints/step-000010"})
    atomic.write_json(run / "run.json", {"kind": "pretrain", "config": {"nsp": nsp, "steps": 10}})
    atomic.write_json(run / "status.json", {"status": "finished", "step": 10, "total_steps": 10,
                                            "created": time.time()})
    return run


def wait_done(run_dir: Path, timeout: float = 120) -> runs.RunInfo:
    deadline = time.time() + timeout
    while runs.read(run_dir).active and time.time() < deadline:
        time.sleep(0.2)
    return runs.read(run_dir)


def array(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return flat.reshape([int(n) for n in value["shape"].split(",")]) if "shape" in value else flat
    return np.asarray(value)


def charts(at: AppTest, title: str) -> list[dict]:
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [f for f in figures if f["layout"].get("title", {}).get("text") == title]


def table(at: AppTest, column: str):
    """The first table with this column (AppTest does not report a dataframe's key)."""
    return next(d.value for d in [*at.dataframe, *at.table] if column in d.value.columns)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread


@pytest.fixture
def empty(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    without_a_gpu(monkeypatch)  # the page starts its runs on "auto", which must be the CPU, as the numbers here
    return tmp_path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three finished runs: coherence from a tiny 'pretrained' run (started from the page), the same from
    random weights of its size, and entities (a token task) from scratch."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERTVIZ_RUNS", str(root))
        without_a_gpu(mp)  # the page starts its run on "auto", which must be the CPU, as the checks below
        pretrain_run(root, "tiny-pre")
        pretrain_run(root, "tiny-nonsp", nsp=False)
        at = page()
        start = "run tiny-pre step 10"
        assert start in at.selectbox(key="finetune.start").options
        assert "run tiny-nonsp step 10 (no NSP)" in at.selectbox(key="finetune.start").options
        at.selectbox(key="finetune.start").set_value(start)
        for name, value in (("steps", 4), ("batch_size", 8)):
            at.number_input(key=f"finetune.{name}").set_value(value)
        at.text_input(key="finetune.name").set_value("from-page")
        at.button(key="finetune.go").click().run()
        assert not at.exception and not at.error
        assert at.selectbox(key="finetune.run").value == "from-page"  # the page follows the run it started
        others = [ft_runs.start(FinetuneConfig(task="coherence", **SCRATCH), name="scratch"),
                  ft_runs.start(FinetuneConfig(task="entities", **SCRATCH), name="tags")]
        done = {run.name: wait_done(run.path) for run in [runs.read(root / "from-page"), *others]}
        assert {r.status for r in done.values()} == {"finished"}, [r.message for r in done.values()]
        yield root, done


@torch.no_grad()
def dev_truth(run: runs.RunInfo) -> tuple[list[str], list[tuple[str, str]], set[int]]:
    """The latest checkpoint on the dev examples the run scores, one example at a time, truncated to the run's
    seq_len as in training: (labels, a (true, predicted) pair per example or word, the wrong examples' numbers)."""
    cfg = FinetuneConfig.from_dict(run.config)
    task = ft_data.load_task(run.path / TASK_FILE)
    ckpt = load_checkpoint(run.checkpoint)
    model, labels = ckpt.model.eval(), list(task.labels)
    pairs, wrong = [], set()
    for n, e in enumerate(task.dev[:cfg.eval_examples], 1):
        encoding = ckpt.tokenizer.encode(e.text, e.text_b, max_length=cfg.seq_len)
        logits = model.classify(torch.tensor([encoding.ids]), torch.tensor([encoding.segment_ids]))[0]
        if e.tags is None:
            mine = [(e.label, labels[int(logits.argmax())])]
        else:  # each word of text.split(" ") at its first piece
            starts = np.cumsum([0] + [len(w) + 1 for w in e.text.split(" ")])[:-1].tolist()
            first = {}
            for position, (begin, _) in enumerate(encoding.offsets):
                if encoding.sequence_ids[position] == 0 and begin in starts and begin not in first:
                    first[begin] = position
            mine = [(e.tags[starts.index(b)], labels[int(logits[p].argmax())]) for b, p in first.items()]
        pairs += mine
        if any(t != p for t, p in mine):
            wrong.add(n)
    return labels, pairs, wrong


# --- The form ---------------------------------------------------------------------------------------
def test_renders_with_no_runs_and_offers_the_shipped_model(empty):
    at = page()
    assert not at.exception and not at.error
    assert "No fine-tuning runs yet" in at.info[0].value
    assert at.selectbox(key="finetune.start").options == ["bertviz-mini (shipped)"]
    assert at.table[0].value.columns.tolist() == ["text", "text_b", "label"]  # coherence's example rows, wrapped


@pytest.mark.parametrize("family", ["bert", "distilbert", "albert"])
def test_a_model_opened_from_its_folder_is_offered_first_as_the_start(empty, tmp_path_factory, family):
    from tests.helpers.family_models import build

    folder = tmp_path_factory.mktemp(f"opened-{family}")
    build(family, folder)  # a DistilBERT's or ALBERT's config.json keys are not BERT's: its shape is the lab's reading
    at = app_test(PAGE)
    at.session_state["model.path"] = str(folder)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    picker = at.selectbox(key="finetune.start")
    assert picker.options == [f"{folder.name} (the active model)", "bertviz-mini (shipped)"]
    assert picker.value == f"{folder.name} (the active model)"  # what the form starts from unless changed
    cfg = load_checkpoint(folder).config
    start = next(s for s in vf.starting_points(DEFAULT_CHECKPOINT.parent, active=(folder, cfg))
                 if s.checkpoint == str(folder))
    assert (start.heads, start.hidden) == (4, 32) and start.layers == cfg.num_hidden_layers  # ALBERT's as the lab reads it
    config = vf.form_config({"steps": 10, "lr": 1e-4, "batch_size": 8, "seed": 0}, start, task="coherence")
    assert config.checkpoint == str(folder)


def test_the_shipped_model_active_is_offered_once(empty):
    at = page()
    assert [o for o in at.selectbox(key="finetune.start").options if "bertviz-mini" in o] == ["bertviz-mini (shipped)"]


@pytest.mark.parametrize("raw, words", [
    (b"text,label\n" + b"".join(b"sentence %d,ok\n" % i for i in range(20)), "at least two classes"),
    (b"sentence,answer\nthe cat,ok\n", "needs a header row"),
    (b"\x00\x01binary\x00" * 20, "binary"),
    (b"text,label\nthe cat,ok\nthe dog,no\n", "at least 8"),
    (b"tokens,tags\nali ate a pie,PERSON O O\n" * 12, "3 tags"),
])
def test_a_bad_csv_is_one_message_and_nothing_is_saved(empty, raw, words):
    at = page()
    at.radio(key="finetune.task").set_value("csv").run()
    at.file_uploader(key="finetune.upload").set_value(("class.csv", raw, "text/csv")).run()
    (error,) = at.error  # shown at once, before Start
    assert error.value.startswith("**CSV file**: ") and words in error.value
    at.button(key="finetune.go").click().run()
    assert not at.exception and [e.value for e in at.error] == [error.value]  # still the one message
    assert list(empty.iterdir()) == []  # no run, no saved upload


def test_start_without_a_csv_or_with_a_bad_number_is_refused(empty):
    at = page()
    at.radio(key="finetune.task").set_value("csv").run()
    at.button(key="finetune.go").click().run()
    assert [e.value for e in at.error] == ["**CSV file**: choose a CSV file to upload first"]
    at.radio(key="finetune.task").set_value("acceptability").run()
    at.number_input(key="finetune.steps").set_value(0)
    at.button(key="finetune.go").click().run()
    (error,) = at.error
    assert error.value.startswith("**Steps**: steps must be")
    assert list(empty.iterdir()) == []


def test_class_demo_settings_are_the_defaults_with_fewer_steps_and_start_that_run(empty):
    pretrain_run(empty, "tiny-pre")  # a second starting point: the demo goes back to the shipped model it was timed on
    at = page()
    at.selectbox(key="finetune.start").set_value("run tiny-pre step 10")
    at.radio(key="finetune.task").set_value("acceptability")
    at.radio(key="finetune.weights").set_value("random")
    at.number_input(key="finetune.steps").set_value(500).run()
    assert at.button(key="finetune.demo").label == "Class demo settings (60 steps)"
    at.button(key="finetune.demo").click().run()
    assert not at.exception and not at.error
    assert at.radio(key="finetune.task").value == "coherence" and at.radio(key="finetune.weights").value == "pretrained"
    assert at.selectbox(key="finetune.start").value == "bertviz-mini (shipped)"
    numbers = [field.name for field in vf.FORM.numbers]
    shown = {name: at.number_input(key=f"finetune.{name}").value for name in numbers}
    assert shown == vf.CLASS_DEMO and shown["steps"] < vf.DEFAULTS["steps"]
    assert {n: v for n, v in shown.items() if n != "steps"} == {n: vf.DEFAULTS[n] for n in numbers if n != "steps"}
    at.button(key="finetune.go").click().run()
    (run,) = [r for r in runs.list_runs(empty) if r.name != "tiny-pre"]
    runs.stop(run.path, timeout=30)
    assert (run.config["steps"], run.config["task"], run.config["freeze_encoder"]) == (60, "coherence", False)
    assert Path(run.config["checkpoint"]).resolve() == DEFAULT_CHECKPOINT.resolve()


def test_a_good_csv_is_saved_under_uploads_when_the_run_starts(empty):
    rows = "".join(f"the {w} sat on the mat .,{'ok' if i % 2 else 'broken'}\n" for i, w in enumerate("abcdefghijkl"))
    raw = ("text,label\n" + rows).encode()
    at = page()
    at.radio(key="finetune.task").set_value("csv").run()
    at.file_uploader(key="finetune.upload").set_value(("mine.csv", raw, "text/csv")).run()
    assert not at.error and "mine\\.csv: one sentence, 2 labels" in at.success[0].value  # the name as typed
    at.selectbox(key="finetune.start").set_value("bertviz-mini (shipped)")
    at.number_input(key="finetune.steps").set_value(1)
    at.button(key="finetune.go").click().run()
    assert not at.exception and not at.error
    (run,) = ft_runs.list_runs(empty)
    saved = Path(run.config["data"])
    assert saved.parent == empty / "uploads" and saved.read_bytes() == raw and saved.name.startswith("mine-")
    assert vf.describe(run.config).startswith(f"{saved.name} · from bertviz-mini · ")
    runs.stop(run.path, timeout=30)


# --- A finished run -----------------------------------------------------------------------------------
def test_the_run_started_from_the_page_shows_its_curves(trained):
    root, done = trained
    at = page()
    at.selectbox(key="finetune.run").set_value("from-page").run()
    assert not at.exception and not at.error
    curves = {t["name"]: t for t in charts(at, "Loss")[0]["data"]}
    np.testing.assert_array_equal(array(curves["train"]["x"]), [1, 2, 3, 4])
    np.testing.assert_array_equal(array(curves["held-out"]["x"]), [0, 4])
    held = runs.read_metrics(root / "from-page", EVAL)
    accuracy = {t["name"]: t for t in charts(at, "Accuracy")[0]["data"]}
    np.testing.assert_allclose(array(accuracy["held-out"]["y"]), [r["acc"] for r in held])
    assert any("coherence · from tiny-pre step 10 · full fine-tuning" in c.value for c in at.caption)
    chance = fd.chance(ft_data.load_task(root / "from-page" / TASK_FILE), 1000)  # the run's own dev set, not 1 / labels
    assert any(f"always answering \u201c{chance.label}\u201d gets {chance.share:.1%}" in c.value for c in at.caption)


@pytest.mark.parametrize("name", ["from-page", "tags"])
def test_the_confusion_matrix_and_the_wrong_examples_match_the_checkpoint(trained, name):
    root, done = trained
    at = page(run=name)
    assert not at.exception
    labels, pairs, wrong = dev_truth(done[name])
    counts = np.zeros((len(labels), len(labels)), dtype=int)
    for t, p in pairs:
        counts[labels.index(t), labels.index(p)] += 1
    heatmap = charts(at, "Confusion matrix")[0]["data"][0]
    np.testing.assert_array_equal(array(heatmap["customdata"]), counts)
    last = runs.read_metrics(root / name, EVAL)[-1]["acc"]
    assert np.trace(counts) / counts.sum() == pytest.approx(last)  # the curve's last point
    wrong_table = table(at, "confidence")
    assert set(wrong_table["#"]) == wrong and len(wrong_table) == len(wrong)


def test_try_it_equals_classify(trained):
    root, done = trained
    at = page("Try it", "from-page")
    text_a, text_b = at.text_input(key="finetune.text"), at.text_input(key="finetune.text_b")
    task = ft_data.load_task(root / "from-page" / TASK_FILE)
    first = vf.first_fitting(task.dev, builtin_tokenizer(), 32)
    assert (text_a.value, text_b.value) == (first.text, first.text_b)  # the first dev example it reads whole
    at.text_input(key="finetune.text").input("the cat sat on the mat .")
    at.text_input(key="finetune.text_b").input("it was a warm afternoon .").run()
    ckpt = load_checkpoint(done["from-page"].checkpoint)
    expected = vf.classify(ckpt.model, ckpt.tokenizer, "the cat sat on the mat .", "it was a warm afternoon .")
    probs = table(at, "logit")
    assert probs["label"].tolist() == list(expected.labels)
    np.testing.assert_allclose(probs["probability"], expected.probs, rtol=1e-5)
    at.text_input(key="finetune.text").input("   ").run()
    assert not at.exception and "the text is empty" in at.warning[0].value
    at.text_input(key="finetune.text").input("rain " * 200).run()
    assert not at.exception and "tokens long" in at.warning[0].value


def test_try_it_tags_each_word(trained):
    root, done = trained
    at = page("Try it", "tags")
    at.text_input(key="finetune.text").input("ali ate an apple in paris .").run()
    tags = table(at, "word")
    assert tags["word"].tolist() == ["ali", "ate", "an", "apple", "in", "paris", "."]
    ckpt = load_checkpoint(done["tags"].checkpoint)
    expected = vf.classify(ckpt.model, ckpt.tokenizer, "ali ate an apple in paris .")
    np.testing.assert_allclose(tags["probability"], expected.probs.max(-1)[:7], rtol=1e-5)  # one piece a word
    for i, label in enumerate(expected.labels):
        np.testing.assert_allclose(tags[f"p({label})"], expected.probs[:7, i], rtol=1e-5)


def test_the_overlay_draws_one_trace_per_chosen_run(trained):
    root, done = trained
    at = page()
    at.multiselect(key="finetune.compare").set_value(["from-page", "scratch"]).run()
    (overlay,) = charts(at, "Dev accuracy")
    names = [t["name"] for t in overlay["data"]]
    assert names == ["coherence · from tiny-pre step 10 · full fine-tuning",
                     "coherence · from scratch (2×32) · full fine-tuning"]  # legends: the runs' descriptions
    assert len(charts(at, "Training loss")[0]["data"]) == 2
    notes = [m.value.replace("\\", "") for m in at.markdown if "always answering" in m.value][0]  # what these two runs show
    last = {name: runs.read_metrics(root / name, EVAL)[-1]["acc"] for name in ("from-page", "scratch")}
    assert f"pretrained with NSP against random weights: {last['from-page']:.1%} vs {last['scratch']:.1%}" in notes
    assert fd.COHERENCE_NOTE in notes and "climbs slowly, if at all" not in notes


@pytest.mark.parametrize("name, points", [("from-page", 400), ("tags", MAX_WORDS)])
def test_the_before_after_picture_has_a_point_per_dev_item(trained, name, points):
    root, done = trained
    at = page("Before and after", name)
    assert not at.exception and not at.warning
    (fig,) = charts(at, "The dev set as the classifier sees it")
    per_side = [sum(len(array(t["x"])) for t in fig["data"] if t["xaxis"] == axis) for axis in ("x", "x2")]
    assert per_side == [points, points]
    caption = next(c.value for c in at.caption if c.value.startswith("Each point is one of"))
    if name == "from-page":  # coherence from a start pretrained with NSP: NSP's own task
        assert "NSP trained its pooler" in caption and fd.COHERENCE_NOTE in caption
    else:  # tags from random weights
        assert "owes nothing to pretraining" in caption and "NSP" not in caption


def test_a_visitor_may_use_but_not_delete_the_owners_run(trained, monkeypatch):
    from bertviz_lab.ui.shell import classroom as ui_classroom

    monkeypatch.setenv("BERTVIZ_CLASSROOM", "1")
    monkeypatch.setattr(ui_classroom, "client_ip", lambda: "192.168.1.23")
    at = page(run="scratch")
    assert not at.exception
    labels = {b.label for b in at.button}
    assert "Use this model" in labels and not {"Delete run", "Resume"} & labels
    assert any("only the owner can stop, resume or delete it" in c.value for c in at.caption)


def test_a_checkpoint_that_is_not_a_classifier_is_a_message(trained, tmp_path, monkeypatch):
    """A run folder whose newest checkpoint is a pretrained BERT (tampered with) shows a sentence, not a traceback."""
    import shutil

    root, done = trained
    shutil.copytree(root / "scratch", tmp_path / "broken")
    shutil.copytree(root / "tiny-pre" / "checkpoints" / "step-000010", tmp_path / "broken" / "checkpoints" / "step-000099")
    atomic.write_json(tmp_path / "broken" / "checkpoint.json", {"step": 99, "path": "checkpoints/step-000099"})
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    for tab in ("On the dev set", "Try it", "Before and after"):
        at = page(tab)
        assert not at.exception
        assert plain("not a fine-tuned classifier") in at.warning[0].value, tab


# --- Run controls (the run pages' shared library, ui/kit/runs.py, with this page's keys) --------------------------
def test_a_refused_resume_is_one_line_and_delete_asks_first(empty):
    from bertviz_lab.pretrain import process

    folder = empty / "busy"
    (folder / "checkpoints" / "step-000002").mkdir(parents=True)
    atomic.write_json(folder / "run.json", {"kind": "finetune", "command": [],
                                            "config": FinetuneConfig(task="coherence", **SCRATCH).to_dict()})
    atomic.write_json(folder / "status.json", {"status": "failed", "message": "boom", "step": 2, "total_steps": 4,
                                               "created": time.time()})
    atomic.write_json(folder / "checkpoint.json", {"step": 2, "path": "checkpoints/step-000002"})
    at = page()
    assert at.selectbox(key="finetune.run").value == "busy"
    lock = process.hold(folder, "training, started by owner")  # as if a trainer had just taken it
    try:
        at.button(key="finetune.resume").click().run()
    finally:
        lock.release()
    assert not at.exception and runs.read(folder).status == "failed"  # nothing started
    (refusal,) = [w.value for w in at.warning if w.value.startswith(plain("run 'busy' is in use: process "))]
    assert "stop it first" not in refusal  # Resume's refusal, not Delete's
    at.button(key="finetune.delete").click().run()
    assert any(w.value.startswith("Delete run busy?") for w in at.warning) and folder.exists()
    at.button(key="finetune.delete_no").click().run()
    assert "finetune.delete_yes" not in [b.key for b in at.button] and folder.exists()
    at.button(key="finetune.delete").click().run()
    at.button(key="finetune.delete_yes").click().run()
    assert not at.exception and not folder.exists()
    assert "No fine-tuning runs yet" in at.info[0].value
