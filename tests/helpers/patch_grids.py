"""Comparing a patching grid a page, the notebook or the command drew with one a test computed again.

Two computations of one grid agree to float32 rounding, not bit for bit: the kernels a forward takes depend on the
thread count and on whether the model's packed weights (bert/ops.py) were made yet, which differ between a model a
page has used and one a test loads fresh. The bound is views/patching/runs.py's `tolerance` (1e-5 of the logits'
size, over the difference the grid is normalised by), and F_ATOL on the raw logit differences. A sentence is checked
against the sentences written from the *drawn* grid: a cell within rounding of a tie may rank either way.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bertviz_lab.explain.patch_grids import Grid
from bertviz_lab.views.patching.runs import Patching, tolerance

F_ATOL = 1e-4  # logits: float32 rounding of logits up to ~15 after 4 to 12 layers


def assert_same_grid(patching: Patching, expected: Grid, values, f=None) -> Grid:
    """`values` (and `f`) are `expected`'s to float32 rounding; returns the grid as drawn, for its sentences."""
    values = np.asarray(values, float)
    np.testing.assert_allclose(values, expected.values, atol=tolerance(patching), rtol=0)
    if f is not None:
        np.testing.assert_allclose(np.asarray(f, float), expected.f, atol=F_ATOL, rtol=0)
    return replace(expected, values=values, f=expected.f if f is None else np.asarray(f, float))
