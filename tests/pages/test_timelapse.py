"""The Time-lapse page in AppTest: a short run started from the Pretrain page gives at least 8 frames to scrub
and play; the shipped model's history shows its heads forming; two steps compare; a broken history is refused."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.pretrain import head_roles, runs, snapshots
from bertviz_lab.ui.shell import state
from bertviz_lab.views.timelapse import history as vt
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT
from tests.helpers.pretrain_page import TINY, fill, page, submit, wait_done

PAGE = str(ROOT / "pages" / "timelapse.py")
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    yield tmp_path / "runs"
    for run in runs.list_runs(tmp_path / "runs"):
        runs.stop(run.path, timeout=30)


def lapse_page() -> AppTest:
    return app_test(PAGE).run()


def errors(at: AppTest) -> list:
    return [e.value for e in at.exception] + [e.value for e in at.error]


@pytest.fixture
def short_run(runs_dir) -> Path:
    """100 steps started from the Pretrain live page, as a learner would."""
    at = fill(page(), **{**{k: v for k, v in TINY.items() if k != "threads"}, "steps": 100, "checkpoint_every": 50})
    submit(at)
    (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir() and p.name != "uploads"]
    assert wait_done(run_dir).status == "finished"
    return run_dir


def choose(at: AppTest, source: str) -> AppTest:
    return at.selectbox(key=state.TimeLapse.SOURCE.name).set_value(source).run()


def test_a_short_run_from_the_page_gives_eight_frames_to_scrub_and_play(short_run):
    at = choose(lapse_page(), f"run {short_run.name}")
    assert not errors(at)
    slider = at.select_slider(key=state.TimeLapse.STEP.name)
    assert slider.options == ["0", "1", "2", "5", "10", "20", "50", "100"]  # the series and the last step
    assert slider.value == 100 and "Frame 8 of 8 · step 100 of 100" in at.caption[1].value
    at = slider.set_value(5).run()
    assert "Frame 4 of 8 · step 5 of 100" in " ".join(c.value for c in at.caption)
    # Play from the last frame starts again at step 0 and moves one frame per tick
    at = at.select_slider(key=state.TimeLapse.STEP.name).set_value(100).run()
    at = at.button(key=state.TimeLapse.PLAY.name).click().run()
    assert at.session_state[state.TimeLapse.PLAYING.name] is True
    assert at.select_slider(key=state.TimeLapse.STEP.name).value == 0
    assert at.button(key=state.TimeLapse.PLAY.name).label == "Pause"
    at = at.button(key=state.TimeLapse.PLAY.name).click().run()
    assert at.session_state[state.TimeLapse.PLAYING.name] is False
    # one head instead of the grid, another role; the diff compares the first and last steps
    at.segmented_control(key=state.TimeLapse.VIEW.name).set_value("One head").run()
    at = at.selectbox(key=state.TimeLapse.ROLE.name).set_value("det_noun").run()
    assert not errors(at)
    heads_table, guesses = at.dataframe[0].value, at.dataframe[1].value
    assert len(heads_table) == 4 and list(heads_table["distance"]) == sorted(heads_table["distance"], reverse=True)
    assert list(guesses.columns[:4]) == ["#", "true word", "guess at 0", "guess at 100"] and len(guesses) == 6


def test_the_shipped_history_shows_the_previous_token_head_forming():
    if not (SHIPPED / vt.HISTORY / snapshots.FILE).is_file():
        pytest.skip("the shipped model's history is not in this checkout")
    at = lapse_page()
    box = at.selectbox(key=state.TimeLapse.SOURCE.name)
    assert box.value == "bertviz-mini" and box.options[0] == "bertviz-mini (shipped: how it learned)"
    assert not errors(at)
    lines = " ".join(m.value for m in at.markdown)
    assert "**layer 0 head 2** becomes a *previous token* head around step" in lines
    heads_table = at.dataframe[0].value  # step 0 against the last: at step 0 every head is near uniform
    assert heads_table["before"].str.startswith("no clear role").all(), heads_table["before"]
    after = dict(zip(heads_table["head"], heads_table["after"]))
    # on the probe set every verb's subject is the word before it: the previous-token head reads as one first
    assert after["layer 0 head 2"] == "previous token 0.88 (= verb → subject 0.98)"  # whole in a laptop's cell
    assert after["layer 1 head 2"].startswith("next token 0.92 (= determiner → noun 0.97")
    assert after["layer 0 head 3"].startswith("no clear role")  # its best, verb → subject 0.09, is uniform's
    captions = " ".join(c.value for c in at.caption)
    assert "hold 26% of the variance" in captions and "the steps are not to scale" in captions
    note = head_roles.twins_note()
    assert note.startswith("In these probe sentences every verb's subject is the word just before it")
    assert at.caption[0].value.endswith(note)  # the page's introduction
    at = at.selectbox(key=state.TimeLapse.ROLE.name).set_value("verb_subject").run()
    lines = " ".join(m.value for m in at.markdown)
    assert "becomes a *verb → subject* head" not in lines
    assert "**layer 0 head 2** scores 50% or more on *verb → subject*" in lines
    assert "every such link goes to the previous token (its *previous token* score over all words: 88%)" in lines
    assert sum(note in c.value for c in at.caption) >= 2  # under the role chart and under the list
    steps = at.select_slider(key=state.TimeLapse.STEP.name).options
    assert steps[0] == "0" and steps[-1] == "5,000" and len(steps) >= 13
    assert sum(f.stat().st_size for f in (SHIPPED / vt.HISTORY).iterdir()) < 4 * 2**20  # a few MB, not checkpoints


def test_a_run_without_snapshots_is_read_from_its_checkpoints(short_run):
    (short_run / snapshots.FILE).unlink()
    at = choose(lapse_page(), f"run {short_run.name}")
    assert not errors(at)
    assert "no snapshots; its 8 kept checkpoints were read instead" in " ".join(c.value for c in at.caption)
    assert at.select_slider(key=state.TimeLapse.STEP.name).options == ["0", "1", "2", "5", "10", "20", "50", "100"]


def test_a_garbled_history_is_skipped_frame_by_frame(short_run):
    path = short_run / snapshots.FILE
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[2]["probes"][0]["attention"] = [[1.0]]  # wrong shape
    records[3]["roles"]["previous"] = "many"
    records[4]["layers"] = None
    path.write_text("\n".join(map(json.dumps, records)) + "\nnot json\n")
    at = choose(lapse_page(), f"run {short_run.name}")
    assert not errors(at)
    assert at.select_slider(key=state.TimeLapse.STEP.name).options == ["0", "1", "20", "50", "100"]


def test_a_run_that_has_not_started_says_so(runs_dir):
    folder = runs_dir / "empty"
    folder.mkdir()
    (folder / "status.json").write_text(json.dumps({"status": "running", "step": 0, "total_steps": 10}))
    (folder / "run.json").write_text(json.dumps({"kind": "pretrain", "config": {}}))
    at = choose(lapse_page(), "run empty")
    assert not errors(at)
    assert any("no snapshot yet" in i.value for i in at.info)
