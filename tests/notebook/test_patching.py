"""`nb.patch`: the grid is views.patching's, its figure has the grid's shape and exact values, the residual grid
carries its checks, another grid of the same pair reuses the recorded runs, and a mistake is one InputError."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from bertviz_lab import notebook as nb
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.patch_grids import F_ATOL, assert_same_grid

CLEAN = "the children in the park [MASK] happy ."
CORRUPT = "the child in the park [MASK] happy ."


@pytest.fixture(scope="module")
def lab():
    return nb.load("bertviz-mini", device="cpu")


@pytest.fixture(scope="module")
def patching(lab):
    return vpa.prepare(lab.model, lab.tokenizer, PatchAsk(CLEAN, CORRUPT, answer="were", foil="was"))


def test_the_resid_grid_is_the_views_grid_with_its_checks_and_figure(lab, patching):
    got = nb.patch(lab, CLEAN, CORRUPT, answer="were", foil="was")
    expected = vpa.grid(patching, "resid", "denoise")
    seen = assert_same_grid(patching, expected, got.values)
    assert got.rows == expected.rows and got.columns == patching.tokens
    assert got.sentences == vpa_read.sentences(patching, seen)
    assert [c.name for c in got.checks] == [c.name for c in vpa_read.checks(patching, expected)]
    assert len(got.checks) == 4 and all(c.passed for c in got.checks)
    fig = got.figure()
    assert isinstance(fig, go.Figure) and np.asarray(fig.data[0].z).shape == expected.values.shape == (5, 10)
    np.testing.assert_allclose(np.asarray(fig.data[0].customdata), expected.f, atol=F_ATOL)
    assert "logit(were) - logit(was)" in fig.layout.title.text
    shown = got._repr_html_()
    assert "PASS" in shown and "The answer moves from" in shown and "plotly" in shown.lower()


def test_other_grids_and_directions_reuse_the_runs(lab, patching):
    noise = nb.patch(lab, CLEAN, CORRUPT, answer="were", foil="was", direction="noise")
    assert_same_grid(patching, vpa.grid(patching, "resid", "noise"), noise.values)
    assert noise.patching is nb.patch(lab, CLEAN, CORRUPT, answer="were", foil="was").patching  # recorded once
    heads = nb.patch(lab, CLEAN, CORRUPT, answer="were", foil="was", what="heads")
    assert heads.columns == ["head 1", "head 2", "head 3", "head 4"] and heads.checks == []
    assert np.asarray(heads.figure().data[0].z).shape == (4, 4)
    qkv = nb.patch(lab, CLEAN, CORRUPT, answer="were", foil="was", what="qkv", head=(1, 2))
    assert_same_grid(patching, vpa.grid(patching, "qkv", "denoise", head=(1, 2)), qkv.values)
    assert qkv.rows == ["query", "key", "value"] and "head 2.3" in qkv.title


def test_noise_corrupts_the_tokens_named(lab):
    got = nb.patch(lab, CLEAN, answer="were", foil="was", noise=True, noised=2, draws=3, seed=1)
    expected = vpa.prepare(lab.model, lab.tokenizer, PatchAsk(CLEAN, answer="were", foil="was", noise=True,
                                                              noised=(2,), draws=3, seed=1))
    assert got.patching.noised == (2,) and got.patching.f_corrupt == pytest.approx(expected.f_corrupt, abs=F_ATOL)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(corrupt="the children in the big park [MASK] happy ."), "same length"),
    (dict(corrupt=CLEAN), "the two sentences are the same"),
    (dict(corrupt=CORRUPT, answer="xyzzyq"), "not a single token"),
    (dict(corrupt=CORRUPT, what="neurons"), "what must be one of"),
    (dict(corrupt=CORRUPT, direction="both"), "direction must be one of"),
    (dict(corrupt=CORRUPT, what="qkv"), "head=\\(layer, head\\)"),
    (dict(corrupt=CORRUPT, what="qkv", head=(4, 0)), "layer 4 does not exist"),
    (dict(corrupt=CORRUPT, head=(0, 0)), "head is for what='qkv'"),
    (dict(), "corrupted sentence is empty"),
    (dict(noise="yes"), "noise must be True or False"),
])
def test_each_mistake_is_one_input_error(lab, kwargs, message):
    with pytest.raises(InputError, match=message):
        nb.patch(lab, CLEAN, **kwargs)
