"""What a grid says in words is read from its numbers (change a cell, the sentence changes); the page's checks pass on
the real runs and fail when the machinery is broken; the CSV rows hold every cell."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.explain import patching
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

CLEAN, CORRUPT = "the children in the park [MASK] happy .", "the child in the park [MASK] happy ."


@pytest.fixture(scope="module")
def pair():
    ckpt = load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")
    return vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(CLEAN, CORRUPT, answer="were", foil="was"))


@pytest.fixture(scope="module")
def grids(pair):
    return {(kind, d): vpa.grid(pair, kind, d, head=(1, 2)) for kind in ("resid", "attn", "mlp", "heads", "qkv")
            for d in ("denoise", "noise")}


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d\d", text)]


def test_resid_sentences_name_tokens_and_cells(pair, grids):
    grid = grids[("resid", "denoise")]
    said = " ".join(vpa_read.sentences(pair, grid))
    best = int(grid.values[0].argmax())
    assert f"'{pair.tokens[best]}' (token {best})" in said
    assert f"{grid.values[0, best]:.2f}" in said
    assert all(any(abs(n - v) < 0.006 for v in grid.values.ravel()) for n in numbers(said))


@pytest.mark.parametrize("kind", ["resid", "attn", "mlp", "heads", "qkv"])
@pytest.mark.parametrize("direction", ["denoise", "noise"])
def test_changing_the_grid_changes_the_sentence(pair, grids, kind, direction):
    grid = grids[(kind, direction)]
    values = grid.values.copy()
    row, col = (0, 3) if kind != "heads" else (1, 2)
    values[row, col] = 1.5 if direction == "denoise" else -0.5  # a new strongest cell (noising: the weakest)
    changed = replace(grid, values=values)
    before, after = " ".join(vpa_read.sentences(pair, grid)), " ".join(vpa_read.sentences(pair, changed))
    shown = "-0.50" if (kind, direction) == ("resid", "noise") else "1.50"  # resid says the cell, others the share
    assert before != after and shown in after
    if kind == "resid":
        assert f"patching '{pair.tokens[col]}' (token {col}) {'restores' if direction == 'denoise' else 'leaves'}" \
               f" {shown}" in after
    if kind in ("attn", "mlp"):
        assert f"{grid.rows[row]}'s at '{pair.tokens[col]}' (token {col})" in after
    if kind == "heads":
        assert f"Head {row + 1}.{col + 1} matters most" in after


def test_the_answer_moves_to_the_mask_sentence(pair, grids):
    grid = grids[("resid", "denoise")]
    values = np.zeros_like(grid.values)
    values[:2, 2] = 0.9  # the subject carries it at the embeddings and layer 1
    values[2:, 6] = 0.8  # the [MASK] from layer 2 on
    said = vpa_read.sentences(pair, replace(grid, values=values))[1]
    assert said.startswith("The answer moves from 'children' (token 2) to '[MASK]' (token 6) between layer 1 and "
                           "layer 2"), said


def test_checks_pass_on_the_real_runs(pair, grids):
    for direction in ("denoise", "noise"):
        checks = vpa_read.checks(pair, grids[("resid", direction)])
        assert len(checks) == 4 and all(c.passed for c in checks), checks
        assert all(c.detail for c in checks)


def test_checks_fail_when_the_source_is_wrong(pair, monkeypatch):
    traced = pair.traced
    real = patching._stack
    monkeypatch.setattr(patching, "_stack", lambda patches, source, key, draws: real(patches, traced.corrupt, key,
                                                                                       draws))
    checks = vpa_read.checks(pair, vpa.grid(pair, "resid", "denoise"))
    assert [c.passed for c in checks] == [False, True, True, True]
    assert "off by" in checks[0].detail


def test_checks_fail_when_nothing_moves_or_the_guess_differs(pair, grids):
    grid = grids[("resid", "noise")]
    assert not vpa_read.checks(pair, replace(grid, nothing=0.5))[1].passed
    wrong = replace(pair, tops=("is", pair.tops[1]))
    wrong.traced.clean.top[0], saved = 933, int(wrong.traced.clean.top[0])  # "is": not Mask & predict's top guess
    try:
        assert not vpa_read.checks(wrong, grid)[2].passed
    finally:
        wrong.traced.clean.top[0] = saved


def test_rows_hold_every_cell(pair, grids):
    for (kind, direction), grid in grids.items():
        rows = vpa_read.rows(pair, grid)
        assert len(rows) == grid.values.size
        assert set(rows[0]) == {"grid", "direction", "row", "column", "column_index", "score", "F"}
        last = rows[-1]
        assert (last["grid"], last["direction"], last["row"]) == (kind, direction, grid.rows[-1])
        assert last["score"] == grid.values[-1, -1] and last["F"] == grid.f[-1, -1]
        assert last["column"] == (pair.tokens[-1] if kind != "heads" else f"head {pair.heads}")


def test_words_for_every_grid_and_direction():
    assert set(vpa_read.KIND_WORDS) == {"resid", "attn", "mlp", "heads", "qkv"}
    assert set(vpa_read.DIRECTION_WORDS) == {"denoise", "noise"} and "does not show" in vpa_read.LIMITS



def test_a_small_gap_is_warned_with_its_size():
    from types import SimpleNamespace

    assert "only 0.05 logits" in vpa_read.small_gap(SimpleNamespace(f_clean=1.0, f_corrupt=0.95))
    assert "only 0.05 logits" in vpa_read.small_gap(SimpleNamespace(f_clean=-2.0, f_corrupt=-1.95))
    assert vpa_read.small_gap(SimpleNamespace(f_clean=1.0, f_corrupt=0.85)) is None
