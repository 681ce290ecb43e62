"""The Time-lapse page's "Where the answer is made, as it learned" (AppTest on a tiny run that keeps its checkpoints):
under the player, each kept checkpoint's step shows the pair's residual grid with the sentences written from it (or,
where the pair cannot be patched there, the sentence saying why), each grid computed once; a history without
checkpoints says so in one sentence."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.timelapse.answer import HEADER, _answer
from bertviz_lab.explain.patch_grids import Grid
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.timelapse.answer import PAIR, answer_at
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT
from tests.helpers.patch_grids import F_ATOL
from tests.helpers.timelapse import tiny_run

PAGE = str(ROOT / "pages" / "timelapse.py")
K = state.TimeLapse
UI = "bertviz_lab.ui.timelapse.answer"  # the section's module: what the tests below replace in it


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tiny_run(tmp_path_factory.mktemp("runs"))


def lapse_page(runs_root: Path, monkeypatch, source: str = "run lapse"):
    monkeypatch.setenv("BERTVIZ_RUNS", str(runs_root))
    at = app_test(PAGE)
    at.session_state[K.SOURCE.name] = source
    return at.run()


def drawn_grid(drawn: dict, expected) -> list[str]:
    """The drawn grid is `expected`'s to float32 rounding (two loads of one checkpoint may take other kernels:
    tests/helpers/patch_grids.py): the raw F within F_ATOL, the shares within F_ATOL over the runs' gap (the [MASK]'s
    last-layer cell is the clean run's F, [CLS]'s at the embeddings the corrupted run's). Returns the sentences
    written from the drawn grid, for the page's to equal."""
    f, values = array(drawn["data"][0]["customdata"]), array(drawn["data"][0]["z"])
    position = expected.tokens.index("[MASK]")
    gap = expected.f[-1, position] - expected.f[0, 0]
    np.testing.assert_allclose(f, expected.f, atol=F_ATOL, rtol=0)
    np.testing.assert_allclose(values, expected.values, atol=F_ATOL / abs(gap), rtol=0)
    grid = Grid("resid", "denoise", values, f, expected.rows)
    return vpa_read.sentences(SimpleNamespace(tokens=expected.tokens, position=position), grid)


def grid_of(at, step: int) -> dict | None:
    title = f"The residual stream at step {step:,}, clean into corrupted"
    return next((f for f in figures(at) if f["layout"]["title"]["text"] == title), None)


def test_each_kept_checkpoint_shows_its_grid_and_sentences_or_why_not(run_dir, monkeypatch):
    _answer.clear()
    at = lapse_page(run_dir.parent, monkeypatch)
    assert not at.exception and HEADER in [h.value for h in at.header]
    pair = minimal_pairs.by_key(PAIR)
    kinds = set()
    for step, folder in checkpoints.kept(run_dir):
        at.select_slider(key=K.STEP.name).set_value(step).run()
        assert not at.exception, at.exception
        ckpt = load_checkpoint(folder)
        expected = answer_at(ckpt.model, ckpt.tokenizer, pair)
        drawn, notes = grid_of(at, step), [shown(i.value) for i in at.info]
        if expected.note:
            assert drawn is None and f"At step {step}: {expected.note}" in notes
        else:
            seen = drawn_grid(drawn, expected)
            lines = shown(next(m.value for m in at.markdown if m.value.startswith("- ")))
            assert lines == "\n".join(f"- {s}" for s in seen)
        kinds.add(bool(expected.note))
    assert kinds == {True, False}  # on this seeded run: grids at the first steps, rounding alone at the last


def test_each_checkpoints_grid_is_computed_once(run_dir, monkeypatch):
    calls = []
    monkeypatch.setattr(f"{UI}.answer_at", lambda *a: calls.append(a) or answer_at(*a))
    _answer.clear()
    at = lapse_page(run_dir.parent, monkeypatch)
    for step in (0, 5, 0, 5, 100):
        at.select_slider(key=K.STEP.name).set_value(step).run()
    assert not at.exception and len(calls) == 3  # steps 100 (the page opens there), 0 and 5


def test_a_pair_no_checkpoint_can_patch_is_a_sentence_at_every_step(run_dir, monkeypatch):
    same = replace(minimal_pairs.by_key(PAIR), corrupt=minimal_pairs.by_key(PAIR).clean)
    monkeypatch.setattr(f"{UI}.by_key", lambda key: same)
    _answer.clear()
    at = lapse_page(run_dir.parent, monkeypatch)
    for step in (0, 20):
        at.select_slider(key=K.STEP.name).set_value(step).run()
        assert not at.exception and grid_of(at, step) is None
        assert any(f"At step {step}: The two sentences are the same" in shown(i.value) for i in at.info)
    _answer.clear()


def test_a_history_without_checkpoints_says_so(monkeypatch, tmp_path):
    at = lapse_page(tmp_path, monkeypatch, source="bertviz-mini")
    assert not at.exception and HEADER in [h.value for h in at.header]
    assert any(c.value.startswith("This history keeps no checkpoint, so there is no model to patch") for c in at.caption)
