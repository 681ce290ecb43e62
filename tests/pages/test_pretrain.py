"""The Pretrain live page in AppTest: the form refuses every invalid value by name and starts
nothing; a valid form starts a background run that the page follows to "finished"; a run
started from the page equals one started from the CLI with the same settings."""

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import records, runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.views.pretrain.live import AUTOCAST_WORDS, LABELS
from bertviz_lab.ui.shell.text import plain
from tests.helpers.lab import app_test, no_gpu_env
from tests.helpers.paths import ROOT
from tests.helpers.pretrain_page import CHOICES, PAGE, TINY, fill, page, submit, wait_done
SENTENCE = "The cat sat on the mat and looked at the rain over the quiet city."


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    yield tmp_path
    for run in runs.list_runs(tmp_path):  # never leave a training process behind
        runs.stop(run.path, timeout=30)


def run_folders(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.is_dir() and p.name != "uploads"]


def array(value) -> np.ndarray:
    if isinstance(value, dict) and "bdata" in value:
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value, dtype=float)


def charts(at: AppTest, title: str) -> list[dict]:
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [f for f in figures if f["layout"].get("title", {}).get("text") == title]


def chart(at: AppTest, title: str) -> dict:
    return charts(at, title)[0]


def test_renders_with_no_runs(runs_dir):
    at = page()
    assert not at.exception and not at.error
    assert "No runs yet" in at.info[0].value
    assert at.button(key="pretrain.start").label == "Start training"
    assert run_folders(runs_dir) == []


@pytest.mark.parametrize("values, field", [
    (dict(steps=0), "steps"), (dict(lr=0.0), "lr"), (dict(batch_size=0), "batch_size"),
    (dict(mask_rate=1.5), "mask_rate"), (dict(heads=3), "heads"), (dict(seq_len=4), "seq_len"),
    (dict(weight_decay=1.0), "weight_decay"), (dict(warmup=-1), "warmup"),
])
def test_an_invalid_value_is_refused_by_name_and_starts_nothing(runs_dir, values, field):
    at = submit(fill(page(), **values))
    assert not at.exception
    (error,) = at.error
    assert error.value.startswith(f"**{LABELS[field]}**: {plain(field)} ")  # the form's label, then the field
    assert run_folders(runs_dir) == [] and not (runs_dir / "uploads").exists()


@pytest.mark.parametrize("data, words", [
    ("café au lait. ".encode("latin-1") * 50, "not UTF-8"),
    (b"\x00\x01\x02binary\x00" * 40, "binary"),
    ("\ufefftoo short. only two sentences.".encode("utf-8-sig"), "at least 20 sentences"),
])
def test_a_bad_upload_is_refused_and_starts_nothing(runs_dir, data, words):
    at = page()
    at.radio(key="pretrain.corpus_kind").set_value("upload").run()
    at.file_uploader(key="pretrain.upload").set_value(("class.txt", data, "text/plain"))
    at = submit(at)
    (error,) = at.error
    assert "corpus" in error.value and plain(words) in error.value  # as plain text
    assert run_folders(runs_dir) == [] and not (runs_dir / "uploads").exists()


def test_too_little_pasted_text_is_refused(runs_dir):
    at = page()
    at.radio(key="pretrain.corpus_kind").set_value("paste").run()
    at.text_area(key="pretrain.paste").input(SENTENCE * 3)
    at = submit(at)
    (error,) = at.error
    assert "corpus" in error.value and "at least 20 sentences" in error.value
    assert run_folders(runs_dir) == []


def test_pasted_text_is_saved_under_the_runs_folder_and_trained_on(runs_dir):
    at = page()
    at.radio(key="pretrain.corpus_kind").set_value("paste").run()
    at.text_area(key="pretrain.paste").input(" ".join([SENTENCE] * 30))
    at = submit(fill(at, **{**TINY, "steps": 3}))
    assert not at.error and not at.exception
    (run,) = runs.list_runs(runs_dir)
    info = wait_done(run.path)
    assert info.status == "finished", info.message
    corpus = Path(info.config["corpus"])  # the text the run trained on, kept under the runs folder
    assert corpus.parent == runs_dir / "uploads" and corpus.read_text(encoding="utf-8").startswith(SENTENCE)


def test_a_tiny_run_from_the_page_finishes_shows_its_curves_and_equals_the_cli(runs_dir):
    at = fill(page(), **TINY)
    assert at.selectbox(key="pretrain.random_tokens").value == "vocabulary"  # as BERT, by default
    at.selectbox(key="pretrain.random_tokens").set_value("wordpieces")  # the other choice reaches the CLI too
    at = submit(at)
    assert not at.error and not at.exception
    (folder,) = run_folders(runs_dir)
    assert at.selectbox(key="pretrain.run").value == folder.name  # the page follows the run it started
    info = wait_done(folder)
    assert info.status == "finished", info.message

    at.run()
    assert "finished" in at.markdown[0].value or any("finished" in m.value for m in at.markdown)
    loss = {t["name"]: t for t in chart(at, "MLM loss")["data"]}
    np.testing.assert_array_equal(array(loss["train"]["x"]), np.arange(1, 21))
    np.testing.assert_array_equal(array(loss["held-out"]["x"]), [0, 5, 10, 15, 20])
    autocast = load_checkpoint(info.checkpoint).card["autocast"]  # what "auto" took on this machine
    assert any(c.value.startswith(f"Trained on cpu in {AUTOCAST_WORDS[autocast]}; precision setting: auto")
               for c in at.caption)
    assert "Use this model" in [b.label for b in at.button]
    at.button(key="pretrain.use").click().run()
    assert at.session_state["model.path"] == str(info.checkpoint)
    assert any("now the active model" in s.value for s in at.success)

    cli = runs_dir / "from-cli"
    flags = runs.cli_args(TrainConfig(**TINY, random_tokens="wordpieces"))
    assert flags[flags.index("--random-tokens") + 1] == "wordpieces"
    subprocess.run([sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(cli), *flags],
                   cwd=ROOT, env=no_gpu_env(), check=True, capture_output=True, timeout=120)
    assert info.config["random_tokens"] == runs.read(cli).config["random_tokens"] == "wordpieces"
    for kind in (TRAIN, EVAL):
        ours, theirs = ([{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed")}
                         for r in records.read_metrics(d, kind)] for d in (folder, cli))
        assert ours == theirs and len(ours) == (20 if kind == TRAIN else 5)


def test_a_new_session_follows_the_newest_active_run_and_stop_stops_it(runs_dir):
    done = runs.start(TrainConfig(**{**TINY, "steps": 2}), name="old")
    wait_done(done.path)
    live = runs.start(TrainConfig(**{**TINY, "steps": 100_000}), name="live")
    deadline = time.time() + 60
    while runs.read(live.path).step < 1 and time.time() < deadline:  # training, with its first checkpoint
        time.sleep(0.1)
    at = page()  # a fresh session, as after a page refresh
    assert at.selectbox(key="pretrain.run").value == "live"
    at.button(key="pretrain.stop").click().run()
    assert wait_done(live.path, timeout=60).status == "stopped"
    at.run()
    assert any("stopped" in m.value for m in at.markdown)
    assert {"Resume", "Use this model"} <= {b.label for b in at.button}


def test_overlaying_runs_draws_each_runs_held_out_curve(runs_dir):
    for name, nsp in (("with-nsp", True), ("no-nsp", False)):
        wait_done(runs.start(TrainConfig(**{**TINY, "steps": 10, "nsp": nsp}), name=name).path)
    at = page()
    table = at.dataframe[0].value
    assert sorted(table["run"]) == ["no-nsp", "with-nsp"]
    assert dict(zip(table["run"], table["NSP"])) == {"with-nsp": "on", "no-nsp": "off"}
    assert table["held-out MLM loss"].notna().all()
    at.multiselect(key="pretrain.compare").set_value(["with-nsp", "no-nsp"]).run()
    overlay = charts(at, "MLM loss")[-1]  # after the live panel's own chart
    assert [t["name"] for t in overlay["data"]] == ["with-nsp · held-out", "no-nsp · held-out"]
    held = {r: records.read_metrics(runs_dir / r, EVAL) for r in ("with-nsp", "no-nsp")}
    for trace, run in zip(overlay["data"], held):
        np.testing.assert_allclose(array(trace["y"]), [r["loss"] for r in held[run]])
    assert [t["name"] for t in charts(at, "NSP loss")[-1]["data"]] == ["with-nsp · held-out"]


def made_run(root: Path, name: str, status: str, checkpoint: bool) -> Path:
    """A run folder as a trainer leaves it (no process), with or without a checkpoint folder."""
    folder = root / name
    (folder / "checkpoints" / "step-000002").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"config": TrainConfig(**TINY).to_dict(), "command": []}))
    (folder / "status.json").write_text(json.dumps({"status": status, "message": "", "step": 3, "total_steps": 20,
                                                    "created": time.time()}))
    if checkpoint:
        (folder / "checkpoint.json").write_text(json.dumps({"step": 2, "path": "checkpoints/step-000002"}))
    return folder


@pytest.mark.parametrize("status, checkpoint, resume", [
    ("stopped", True, True), ("failed", True, True), ("diverged", True, True),
    ("failed", False, False), ("finished", True, False), ("unreadable", True, False),
])
def test_resume_is_offered_for_stopped_failed_and_diverged_runs_with_a_checkpoint(runs_dir, status, checkpoint,
                                                                                   resume):
    folder = made_run(runs_dir, "r", "failed" if status == "unreadable" else status, checkpoint)
    if status == "unreadable":
        (folder / "status.json").write_text("[]")
    at = page()
    assert not at.exception
    assert ("pretrain.resume" in [b.key for b in at.button]) is resume
    assert "pretrain.delete" in [b.key for b in at.button]  # nothing trains: it can be deleted


def test_a_refused_resume_is_one_line_on_the_page(runs_dir):
    from bertviz_lab.pretrain import process

    folder = made_run(runs_dir, "busy", "failed", checkpoint=True)
    at = page()
    lock = process.hold(folder, "training, started by owner")  # as if a trainer had just taken it
    try:
        at.button(key="pretrain.resume").click().run()
    finally:
        lock.release()
    assert not at.exception
    assert any(w.value.startswith(plain("run 'busy' is in use: process ")) for w in at.warning)  # as plain text
    assert runs.read(folder).status == "failed"  # nothing started


def test_a_warmup_as_long_as_the_run_is_said_and_a_longer_run_says_nothing(runs_dir):
    at = submit(fill(page(), **{**TINY, "steps": 6, "warmup": 10}))
    assert not at.error and not at.exception
    (folder,) = run_folders(runs_dir)
    notes = [w.value for w in at.warning if "the whole run is warmup" in w.value]
    assert len(notes) == 1 and "Warmup (10 steps)" in notes[0] and "(6 steps)" in notes[0]
    assert "climbs from 16.7% of its peak and reaches 100% of it only at the last step" in notes[0]  # 1/6, 6/6
    wait_done(folder)
    at = submit(fill(page(), **{**TINY, "steps": 6, "warmup": 2}))
    assert not any("warmup" in w.value for w in at.warning)  # the newest run outlasts its warmup


OTHER_PAGE = "import streamlit as st\nst.write('another page')\n"
TWO_PAGES = ("import streamlit as st\n"
             "st.navigation([st.Page({pretrain!r}, title='Pretrain live'), st.Page({other!r}, title='Other')]).run()\n")


def test_the_form_keeps_what_was_entered_after_start_and_after_another_page(runs_dir, tmp_path):
    other = tmp_path / "other.py"
    other.write_text(OTHER_PAGE)
    script = tmp_path / "app.py"
    script.write_text(TWO_PAGES.format(pretrain=PAGE, other=str(other)))
    at = app_test(str(script)).run()
    entered = {**TINY, "steps": 7, "warmup": 3}
    at = submit(fill(at, **entered))
    assert not at.error and not at.exception and len(run_folders(runs_dir)) == 1
    at.switch_page(str(other)).run()
    assert at.markdown[0].value == "another page"
    at.switch_page(PAGE).run()
    assert not at.exception
    for name, value in entered.items():
        widget = at.selectbox(key=f"pretrain.{name}") if name in CHOICES else at.number_input(key=f"pretrain.{name}")
        assert widget.value == value, name
    assert at.number_input(key="pretrain.steps").value != TrainConfig().steps  # not the preset's 600
