"""Time-lapse (issue 33): the learner's own sentence as a probe on a run's kept checkpoints (or one sentence saying
why not), one probability scale for the guesses over every frame, a word map that writes few labels, and a diff
table whose first columns are the guesses themselves."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import SAFETENSORS, load_checkpoint
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.timelapse import player as ui_timelapse
from bertviz_lab.ui.kit.yours import Typed
from bertviz_lab.views.timelapse import history as vt
from tests.helpers.figure_data import array
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT
from tests.helpers.timelapse import tiny_run

PAGE = str(ROOT / "pages" / "timelapse.py")
K = state.TimeLapse
MINE = "the cat sat on the [MASK] ."


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished 100-step run with its snapshots and its kept checkpoints (0 1 2 5 10 20 50 100)."""
    return tiny_run(tmp_path_factory.mktemp("runs"))


def lapse_page(runs_root: Path, monkeypatch, **session) -> AppTest:
    monkeypatch.setenv("BERTVIZ_RUNS", str(runs_root))
    at = app_test(PAGE)
    at.session_state[K.SOURCE.name] = "run lapse"
    for key, value in session.items():
        at.session_state[key] = value
    return at.run()


def titled(at: AppTest, start: str) -> dict:
    (spec,) = [s for s in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
               if s["layout"]["title"]["text"].startswith(start)]
    return spec


def test_a_sentence_typed_here_plays_on_the_runs_checkpoints(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    at.text_input(key=K.OWN.name).input(MINE).run()
    assert not at.exception and not at.warning
    box = at.selectbox(key=K.PROBE.name)
    assert box.value == MINE and box.options[-1] == f"yours: {MINE}"
    kept = dict(checkpoints.kept(run_dir))
    assert at.select_slider(key=K.STEP.name).options == [str(s) for s in kept]  # every frame has its checkpoint
    at.select_slider(key=K.STEP.name).set_value(20).run()
    expected = vt.own_probe(load_checkpoint(kept[20]), MINE)
    grid = titled(at, "Every head at step 20")
    drawn = np.concatenate([array(t["z"]).ravel() for t in grid["data"] if t["type"] == "heatmap"])
    assert np.allclose(drawn, expected.attention.ravel(), atol=1e-6)
    bars = titled(at, "Guesses for [MASK]")
    assert bars["layout"]["title"]["text"] == "Guesses for [MASK]"  # no true word to claim
    assert list(bars["data"][0]["y"]) == [t for t, _ in expected.top]
    assert np.allclose(array(bars["data"][0]["x"]), [p for _, p in expected.top])


def test_a_new_sentence_reads_no_checkpoint_from_disk_again(run_dir, monkeypatch):
    loads = []
    monkeypatch.setattr(ui_timelapse, "load_checkpoint", lambda folder: loads.append(folder) or load_checkpoint(folder))
    ui_timelapse.kept_checkpoint.clear()
    at = lapse_page(run_dir.parent, monkeypatch)
    at.text_input(key=K.OWN.name).input("the dog sat on the [MASK] .").run()
    assert not at.exception and len(loads) == len(checkpoints.kept(run_dir))  # each kept checkpoint, once
    at.text_input(key=K.OWN.name).input("a bird ate the [MASK] .").run()
    assert not at.exception and at.selectbox(key=K.PROBE.name).value == "a bird ate the [MASK] ."
    assert len(loads) == len(checkpoints.kept(run_dir))


def test_a_broken_checkpoint_is_skipped_and_a_bug_is_not_hidden(run_dir, tmp_path, monkeypatch):
    copy = tmp_path / "lapse"
    shutil.copytree(run_dir, copy)
    lapse = vt.from_run(copy)
    kept = dict(lapse.checkpoints)
    (kept[20] / SAFETENSORS).write_bytes(b"not weights")
    found, why = ui_timelapse.own_frames(lapse, MINE)
    assert sorted(found) == [s for s in kept if s != 20] and not why
    def bug(ckpt, text):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")  # what torch raises for a bug of ours

    monkeypatch.setattr(vt, "own_probe", bug)
    with pytest.raises(RuntimeError, match="shapes"):  # not "None of this run's checkpoints can be read"
        ui_timelapse.own_frames(lapse, "the cat sat .")


def test_the_sentence_typed_last_on_another_page_is_offered(run_dir, monkeypatch):
    typed = Typed("the dog ate the [MASK] .", None, 3)
    at = lapse_page(run_dir.parent, monkeypatch, **{state.Yours.SENTENCE.name: typed})
    assert f"yours: {typed.text_a}" in at.selectbox(key=K.PROBE.name).options
    at.selectbox(key=K.PROBE.name).set_value(typed.text_a).run()
    assert not at.exception and titled(at, "Guesses for [MASK]")


def test_a_sentence_the_model_cannot_read_is_a_message(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    at.text_input(key=K.OWN.name).input("the cat " * 40).run()
    assert not at.exception
    assert any("Your sentence cannot be run" in w.value and "reads at most" in w.value for w in at.warning)


def test_a_history_without_checkpoints_says_so_in_one_sentence(run_dir, tmp_path, monkeypatch):
    copy = tmp_path / "lapse"
    copy.mkdir()
    for name in ("run.json", "status.json", "metrics.jsonl", "snapshots.jsonl"):
        if (run_dir / name).is_file():
            (copy / name).write_bytes((run_dir / name).read_bytes())
    at = lapse_page(tmp_path, monkeypatch, **{state.Yours.SENTENCE.name: Typed(MINE, None, 1)})
    assert not at.exception
    assert not [t for t in at.text_input if t.key == K.OWN.name]  # no box that cannot work
    assert MINE not in at.selectbox(key=K.PROBE.name).options
    assert any("no checkpoint at their steps, so it cannot run a sentence of yours" in c.value for c in at.caption)


def test_the_guesses_keep_one_scale_over_every_frame_while_playing(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    lapse = vt.from_run(run_dir)
    probe = at.selectbox(key=K.PROBE.name).value
    highest = max(p for f in lapse.frames for _, p in vt.probe(f, probe).top)
    ranges = set()
    at = at.button(key=K.PLAY.name).click().run()  # playing from the start: step 0, the untrained model
    assert at.select_slider(key=K.STEP.name).value == 0
    ranges.add(tuple(titled(at, "Guesses for [MASK]")["layout"]["xaxis"]["range"]))
    at = at.button(key=K.PLAY.name).click().run()
    for step in (5, 100):
        at.select_slider(key=K.STEP.name).set_value(step).run()
        ranges.add(tuple(titled(at, "Guesses for [MASK]")["layout"]["xaxis"]["range"]))
    step0 = max(p for _, p in vt.probe(lapse.frames[0], probe).top)
    assert len(ranges) == 1 and highest <= ranges.pop()[1] < 1.2 * highest  # one scale, from the whole history
    assert step0 < 0.5 * highest  # so step 0's short bars stay short


def test_the_word_map_writes_the_probe_words_only(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    spec = titled(at, "Word embeddings at step")
    labels = [t for trace in spec["data"] for t in trace["text"] if t]
    hovers = [w for trace in spec["data"] for w in trace["customdata"]]
    probe = at.selectbox(key=K.PROBE.name).value
    assert len(hovers) == 25 and 3 <= len(labels) <= ui_timelapse.MAP_LABELS
    assert probe == "the cat sat on the mat ." and sorted(labels) == ["cat", "sat", "the"]  # its words on the map
    at.selectbox(key=K.PROBE.name).set_value("the boy wore a coat because he was cold .").run()
    spec = titled(at, "Word embeddings at step")
    labels = [t for trace in spec["data"] for t in trace["text"] if t]
    assert {"the", "a"} <= set(labels) and len(labels) == 2 + len(spec["data"]) - 1  # + one per other group
    note = next(c.value for c in at.caption if c.value.startswith("The token embeddings"))
    assert "Written out: the probe sentence's words on the map (the, a) and the first word of each group" in note


def test_the_word_map_reads_a_typed_sentence_as_its_tokens_do(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    at.text_input(key=K.OWN.name).input("The dog ate.").run()  # split on spaces: "The", "dog", "ate."
    spec = titled(at, "Word embeddings at step")
    assert sorted(t for trace in spec["data"] for t in trace["text"] if t) == ["ate", "dog", "the"]
    assert any("Written out: the probe sentence's words on the map (dog, ate, the). Point" in c.value
               for c in at.caption)


def test_the_diff_table_shows_the_guesses_first(run_dir, monkeypatch):
    at = lapse_page(run_dir.parent, monkeypatch)
    guesses = at.dataframe[1].value
    assert list(guesses.columns[:5]) == ["#", "true word", "guess at 0", "guess at 100", "changed"]
    assert "sentence" not in guesses.columns and len(guesses) == 6
    assert any(e.label.startswith("The probe sentences") for e in at.expander)
