"""figures/neurons.py: the heatmap shows the most active neurons and says how many of how many; the bars, strips and
dot charts draw the numbers given (their CSV rows: tests/figures/test_export.py)."""

from __future__ import annotations

import numpy as np

from bertviz_lab.figures.neurons import (activation_heatmap, attribution_bar, causal_test, factor_strips, most_active,
                                         outlier_loss, outlier_weights, top_neurons_bar)

TOKENS = ["[CLS]", "a<b", "c", "[SEP]"]


def test_most_active_keeps_the_peaks_and_the_chosen_neuron():
    a = np.zeros((4, 10))
    a[1, 7], a[2, 3], a[0, 5] = 3.0, 2.0, 1.0
    assert most_active(a, 2).tolist() == [3, 7]
    assert most_active(a, 2, keep=(9,)).tolist() == [7, 9]


def test_the_heatmap_shows_the_top_neurons_and_says_so():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 100))
    a[2, 42] = 9.0
    fig = activation_heatmap(a, TOKENS, layer=3, top=10)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (4, 10) and "n 42" in fig.data[0].x and z.max() == 9.0
    assert "the 10 of its 100 neurons most active" in fig.layout.title.text and "Layer 3" in fig.layout.title.text
    assert fig.data[0].zmin == -9.0 and fig.data[0].zmax == 9.0  # white at 0
    small = activation_heatmap(a[:, :8], TOKENS, layer=0, top=10)
    assert "all 8 neurons" in small.layout.title.text and len(small.data[0].x) == 8


def test_bars_and_strips_draw_what_they_are_given():
    bar = top_neurons_bar([4, 9], [2.5, -0.1], ["fish", ""], "[MASK]", 2)
    assert list(bar.data[0].x) == [2.5, -0.1] and list(bar.data[0].y) == ["n 4 → fish", "n 9"]
    strips = factor_strips(np.array([[0.0, 2.0], [4.0, 1.0], [2.0, 0.0], [0.0, 0.0]]), TOKENS, ["f1", "f2"], "t")
    assert np.asarray(strips.data[0].z).tolist() == [[0.0, 1.0, 0.5, 0.0], [1.0, 0.5, 0.0, 0.0]]
    attribution = attribution_bar(["L1 n 3", "L0 n 2"], np.array([0.5, -0.25]), "logit(fish)", "a")
    assert list(attribution.data[0].x) == [0.5, -0.25] and attribution.data[0].marker.color[1] != \
        attribution.data[0].marker.color[0]


def test_the_causal_and_outlier_charts_draw_every_draw_and_the_mean():
    fig = causal_test(1.5, np.array([0.1, -0.2, 0.4]), 10, "logit(fish)", "c")
    names = [t.name for t in fig.data]
    assert names == ["top 10 neurons", "10 random neurons: each draw", "10 random neurons: mean"]
    assert list(fig.data[1].y) == [0.1, -0.2, 0.4] and fig.data[2].y[0] == np.mean([0.1, -0.2, 0.4])
    loss = outlier_loss(2.0, 5.0, np.array([2.1, 2.2]), (7, 9), "l")
    assert [t.name for t in loss.data][:2] == ["nothing zeroed", "dims 7, 9 zeroed"]
    weights = outlier_weights(np.array([[1.0, 5.0, 1.1], [0.9, 1.0, -3.0]]), np.array([[1], [2]]), "w")
    assert list(weights.data[-1].x) == [1, 2] and list(weights.data[-1].y) == [5.0, -3.0]
