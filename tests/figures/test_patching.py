"""The patching heatmap (figures/patching.py): cells hold the normalised scores on a fixed 0..1 scale, the hover the
exact value and the raw score, row names and tokens escaped, cell text only on narrow grids; the column labels."""

from __future__ import annotations

import numpy as np

from bertviz_lab.figures import patching as fpa


def test_the_heatmap_keeps_the_exact_values_and_the_raw_scores_for_the_hover():
    rng = np.random.default_rng(0)
    values, f = rng.normal(0.5, 0.6, (3, 4)), rng.normal(0, 2, (3, 4))
    fig = fpa.grid_heatmap(values, f, ["embeddings", "layer 1", "layer <2>"], ["0 a", "1 b", "2 c", "3 d"],
                           "title", metric="F = logit(were) - logit(was)")
    (heat,) = fig.data
    np.testing.assert_array_equal(np.asarray(heat.z), values)  # overshoots (< 0, > 1) kept, not clipped
    np.testing.assert_array_equal(np.asarray(heat.customdata), f)
    assert (heat.zmin, heat.zmax) == (-1.0, 1.0)  # one scale for every grid: 0 (white) corrupted, 1 clean
    assert list(heat.y) == ["embeddings", "layer 1", "layer &lt;2&gt;"]
    assert "%{z:.6g}" in heat.hovertemplate and "F = logit(were) - logit(was): %{customdata:.6g}" in heat.hovertemplate
    assert heat.texttemplate == "%{z:.2f}"
    assert fig.layout.yaxis.autorange == "reversed"  # the embeddings on top, the last layer at the bottom


def test_a_wide_grid_has_no_text_in_its_cells_and_a_taller_grid_a_taller_figure():
    wide = fpa.grid_heatmap(np.zeros((2, fpa.CELL_TEXT_MAX + 1)), np.zeros((2, fpa.CELL_TEXT_MAX + 1)), ["a", "b"],
                            [str(i) for i in range(fpa.CELL_TEXT_MAX + 1)], "wide")
    assert wide.data[0].texttemplate is None
    short = fpa.grid_heatmap(np.zeros((3, 3)), np.zeros((3, 3)), list("abc"), list("xyz"), "t")
    tall = fpa.grid_heatmap(np.zeros((13, 3)), np.zeros((13, 3)), list("abcdefghijklm"), list("xyz"), "t")
    assert tall.layout.height > short.layout.height


def test_columns_name_tokens_by_position_and_heads_from_one():
    assert fpa.columns("resid", ["[CLS]", "<b>", "[SEP]"], 4) == ["0 [CLS]", "1 &lt;b&gt;", "2 [SEP]"]
    assert fpa.columns("heads", ["[CLS]", "a"], 3) == ["head 1", "head 2", "head 3"]
