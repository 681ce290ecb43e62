"""figures/probing.py: each chart draws the numbers it is given on the axis it says (hidden states 0..L, the first
"0 (emb.)"), keeps its legend under the plot, tells a task's baseline by its line and escapes the names it is given
(their CSV rows: tests/figures/test_export.py)."""

from __future__ import annotations

import numpy as np

from bertviz_lab.figures.probing import (accuracy_by_layer, agreement_removal, codelength_curves, control_curves,
                                         lm_effect, mix_heatmap, probe_removal, selectivity_bars, task_depths)


def test_accuracy_by_layer_draws_each_task_and_its_majority_as_one_legend_entry():
    fig = accuracy_by_layer({"part of speech": np.array([0.5, 0.9, 0.8]), "a<b": np.array([0.6, 0.7, 0.75])},
                            {"part of speech": 0.25, "a<b": 0.5}, "t")
    lines = {t.name: t for t in fig.data}
    assert list(lines["part of speech"].y) == [0.5, 0.9, 0.8]
    assert list(lines["part of speech: majority baseline"].y) == [0.25] * 3
    assert not lines["part of speech: majority baseline"].showlegend  # drawn dotted, in the task's colour
    assert lines["part of speech"].line.color == lines["part of speech: majority baseline"].line.color
    assert "a&lt;b" in lines and lines["a&lt;b"].marker.symbol != lines["part of speech"].marker.symbol
    assert lines["part of speech: majority baseline"].line.dash == "dot" and lines["a&lt;b"].line.dash is None
    assert list(fig.layout.xaxis.ticktext) == ["0 (emb.)", "1", "2"] and fig.layout.legend.y < 0


def test_task_depths_puts_both_marks_of_each_task_on_one_row_of_one_axis():
    fig = task_depths(["part of speech", "noun number"], [1.25, None], np.array([1.5, 2.75]), 5, "o")
    expected = next(t for t in fig.data if t.name == "expected layer")
    centre = next(t for t in fig.data if t.name.startswith("centre of gravity"))
    assert expected.x[0] == 1.25 and np.isnan(expected.x[1]) and list(expected.text) == ["1.25", ""]
    assert list(centre.x) == [1.5, 2.75] and list(centre.y) == ["part of speech", "noun number"]
    spans = [t for t in fig.data if t.name.endswith(": span")]
    assert [list(t.x) for t in spans] == [[1.25, 1.5]]  # no span for a task without an expected layer
    assert list(fig.layout.xaxis.range) == [-0.4, 4.4] and len(fig.layout.xaxis.tickvals) == 5


def test_the_mix_heatmap_and_the_control_charts_draw_their_numbers():
    heat = mix_heatmap(np.array([[0.1, 0.9], [0.5, 0.5]]), ["pos", "dep"], "m")
    assert np.asarray(heat.data[0].z).tolist() == [[0.1, 0.9], [0.5, 0.5]] and list(heat.data[0].x) == ["0 (emb.)", "1"]
    control = control_curves({"linear": np.array([0.8, 0.9]), "mlp": np.array([0.85, 0.95])},
                             {"linear": np.array([0.4, 0.5]), "mlp": np.array([0.7, 0.8])}, 0.3, "c",
                             random_weights=np.array([0.5, 0.55]))
    lines = {t.name: t for t in control.data}
    assert list(lines["MLP probe, control task"].y) == [0.7, 0.8] and lines["MLP probe, control task"].line.dash == "dot"
    assert list(lines["linear probe, random-weights model"].y) == [0.5, 0.55]
    assert list(lines["majority baseline"].y) == [0.3, 0.3]
    bars = selectivity_bars({"linear": np.array([0.4, 0.4]), "mlp": np.array([0.15, -0.05])}, "s")
    assert list(bars.data[1].y) == [15.0, -5.0] and bars.layout.yaxis.range[0] < -5  # a negative bar shows whole


def test_the_codelength_is_drawn_in_kbits_beside_the_uniform_code():
    fig = codelength_curves(np.array([900.0, 300.0]), np.array([1200.0, 1000.0]), None, 2000.0, "c")
    lines = {t.name: t for t in fig.data}
    assert list(lines["the task"].y) == [0.9, 0.3] and list(lines["its control task"].y) == [1.2, 1.0]
    assert list(lines["no vector (uniform code)"].y) == [2.0, 2.0]
    assert "the task, random-weights model" not in lines  # not drawn when not measured


def test_the_amnesic_charts_draw_before_after_and_random():
    probe = probe_removal(0.9, 0.7, 0.88, 0.69, "p")
    assert list(probe.data[0].y) == [0.9, 0.7, 0.88] and list(probe.data[1].y) == [0.69] * 3
    assert list(probe.data[0].x) == ["before", "task removed", "random removed"]
    loss = lm_effect(1.7, 1.9, np.array([1.70, 1.72, 1.74]), "loss", "l")
    lines = {t.name: t for t in loss.data}
    assert list(lines["random directions: each draw"].y) == [1.70, 1.72, 1.74]
    assert lines["random directions: mean"].y[0] == np.mean([1.70, 1.72, 1.74])
    assert lines["the task's directions removed"].y[0] == 1.9
    bars = agreement_removal([0, 1], np.array([0.9, np.nan]), np.array([0.8, np.nan]), np.array([0.85, np.nan]),
                             [10, 0], "a")
    assert list(bars.data[1].y)[0] == 0.8 and list(bars.data[1].text) == ["80%", ""]
    assert list(bars.data[0].x) == ["0 attractors", "1 attractor"] and list(bars.data[3].y) == [0.5, 0.5]
