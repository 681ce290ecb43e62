"""Figures of "Inside the feed-forward layer": a sentence's activations (tokens x neurons), the most active neurons at
a token, the NMF factors as token strips, the attribution of a guess to neurons, the causal test against random
neurons, and the LayerNorms' outlier dimensions with the loss test.

Activations after GELU run from about -0.17 to large positive values: the heatmap's scale is diverging, white at 0,
blue above it, red below, so the few neurons that fire stand out from the many that stay near 0. With thousands of
neurons a layer, the heatmap shows the M that fire most in the sentence, and its title says so.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import house, token_labels

TOP_COLUMNS = 40  # neurons drawn in the activations heatmap (the most active in the sentence)
DIVERGING = ((0.0, "#b2182b"), (0.5, "#ffffff"), (1.0, "#2166ac"))  # red below 0, white at 0, blue above
UP, DOWN = "#2166ac", "#b2182b"
RANDOM = "#777777"
LEGEND = dict(orientation="h", yanchor="top", y=-0.16, xanchor="left", x=0)  # under the plot: above, it covers the title


def neuron_label(neuron: int, layer: int | None = None) -> str:
    """"n 17", or "L2 n 17" where the layer varies (layers and neurons counted from 0, as the page says them)."""
    return f"n {neuron}" if layer is None else f"L{layer} n {neuron}"


def most_active(activations: np.ndarray, top: int = TOP_COLUMNS, keep: tuple[int, ...] = ()) -> np.ndarray:
    """The `top` neurons (columns of (T, N)) of largest activation anywhere in the sentence, in neuron order, with
    the `keep` neurons always among them (the one the page is about)."""
    peak = np.asarray(activations, dtype=np.float64).max(0)  # (N,)
    order = [int(i) for i in np.argsort(-peak, kind="stable")]
    chosen = list(dict.fromkeys([k for k in keep if 0 <= k < len(peak)] + order))[: max(top, 1)]
    return np.array(sorted(chosen), dtype=int)


def activation_heatmap(activations: np.ndarray, tokens: list[str], layer: int, top: int = TOP_COLUMNS,
                       keep: tuple[int, ...] = ()) -> go.Figure:
    """One layer's activations (T, N), tokens down, neurons across: the `top` neurons most active in the sentence
    (`most_active`), the whole layer when it has no more."""
    a = np.asarray(activations, dtype=np.float64)
    width = a.shape[1]
    columns = most_active(a, top, keep) if width > top else np.arange(width)
    z = a[:, columns]
    bound = float(max(np.abs(z).max(), 1e-6))
    shown = (f"the {len(columns)} of its {width:,} neurons most active in this sentence" if width > len(columns)
             else f"all {width} neurons")
    heatmap = go.Heatmap(
        z=z, x=[neuron_label(int(n)) for n in columns], y=token_labels(tokens), zmin=-bound, zmax=bound,
        colorscale=DIVERGING, xgap=1, ygap=1,
        colorbar=dict(title=dict(text="activation", side="right"), thickness=16, len=0.8),
        hovertemplate="%{y}, %{x}<br>activation: %{z:.6g}<extra></extra>")
    layout = dict(xaxis=dict(type="category", tickangle=-60, tickfont=dict(size=11 if len(columns) > 24 else 13)),
                  yaxis=dict(type="category", autorange="reversed", dtick=1, tickfont=dict(size=14)))
    height = int(np.clip(170 + 26 * len(tokens), 320, 820))
    return go.Figure(data=[heatmap], layout=house(layout, f"Layer {layer}: activations of {shown}", height))


def top_neurons_bar(neurons: list[int], activations: list[float], promoted: list[str], token: str,
                    layer: int) -> go.Figure:
    """The most active neurons of `layer` at one token, most active on top; `promoted`: what each one's value
    promotes most, in words ("" : no vocabulary reading), on its label and in the hover."""
    labels = [neuron_label(n) + (f" → {html.escape(p)}" if p else "") for n, p in zip(neurons, promoted)]
    bar = go.Bar(x=list(map(float, activations)), y=labels, orientation="h",
                 marker_color=[UP if a >= 0 else DOWN for a in activations],
                 hovertemplate="%{y}<br>activation: %{x:.6g}<extra></extra>")
    layout = dict(xaxis=dict(title=dict(text="activation"), zeroline=True),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14)), showlegend=False)
    title = f"The most active neurons of layer {layer} at '{html.escape(token)}'"
    return go.Figure(data=[bar], layout=house(layout, title, int(np.clip(120 + 30 * len(neurons), 260, 700))))


def factor_strips(strengths: np.ndarray, tokens: list[str], labels: list[str], title: str) -> go.Figure:
    """One strip per factor (`strengths` (T, k)), each token a cell coloured by the factor's strength there as a
    share of the factor's peak in the sentence (so a weak factor's strip is as readable as a strong one's); the raw
    strength is in the hover and the CSV. `labels`: one per factor (its top neurons)."""
    s = np.asarray(strengths, dtype=np.float64).T  # (k, T)
    peak = s.max(1, keepdims=True)
    share = np.divide(s, peak, out=np.zeros_like(s), where=peak > 0)
    heatmap = go.Heatmap(
        z=share, x=token_labels(tokens), y=[html.escape(label) for label in labels], customdata=s, zmin=0.0, zmax=1.0,
        colorscale="Blues", xgap=2, ygap=6,
        colorbar=dict(title=dict(text="share of the factor's peak", side="right"), thickness=16, len=0.8),
        hovertemplate="%{y}, %{x}<br>share of peak: %{z:.4f}<br>strength %{customdata:.6g}<extra></extra>")
    layout = dict(xaxis=dict(type="category", tickangle=-50, dtick=1, tickfont=dict(size=14)),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=13)))
    return go.Figure(data=[heatmap], layout=house(layout, title, int(np.clip(150 + 60 * s.shape[0], 260, 700))))


def attribution_bar(labels: list[str], scores: np.ndarray, metric: str, title: str) -> go.Figure:
    """The neurons of largest attribution, largest on top: each bar how much of F (`metric`, in words) the
    attribution gives its activation, blue when it raises F, red when it lowers it."""
    scores = np.asarray(scores, dtype=np.float64)
    bar = go.Bar(x=scores, y=[html.escape(label) for label in labels], orientation="h",
                 marker_color=[UP if s >= 0 else DOWN for s in scores],
                 hovertemplate="%{y}<br>attribution: %{x:.6g}<extra></extra>")
    layout = dict(xaxis=dict(title=dict(text=f"attribution to {html.escape(metric)}"), zeroline=True),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14)), showlegend=False)
    return go.Figure(data=[bar], layout=house(layout, title, int(np.clip(120 + 30 * len(labels), 260, 700))))


def _versus(chosen: str, value: float, random: np.ndarray, random_name: str, y_title: str, title: str,
            base: tuple[str, float] | None = None) -> go.Figure:
    """One chosen value beside seeded random draws (dots in one column) and their mean; `base`: a reference value
    drawn first (the unedited run)."""
    random = np.asarray(random, dtype=np.float64)
    traces = []
    if base is not None:
        traces.append(go.Scatter(x=[base[0]], y=[float(base[1])], mode="markers", name=base[0],
                                 marker=dict(color="#222222", size=14, symbol="line-ew-open", line=dict(width=3)),
                                 hovertemplate="%{x}: %{y:.6g}<extra></extra>"))
    traces += [
        go.Scatter(x=[chosen], y=[float(value)], mode="markers", name=chosen,
                   marker=dict(color=UP, size=18, symbol="diamond"), hovertemplate="%{x}: %{y:.6g}<extra></extra>"),
        go.Scatter(x=[random_name] * len(random), y=random, mode="markers", name=f"{random_name}: each draw",
                   marker=dict(color=RANDOM, size=9, opacity=0.7), customdata=np.arange(1, len(random) + 1),
                   hovertemplate="draw %{customdata}: %{y:.6g}<extra></extra>"),
        go.Scatter(x=[random_name], y=[float(random.mean()) if len(random) else np.nan], mode="markers",
                   name=f"{random_name}: mean", marker=dict(color="#222222", size=22, symbol="line-ew-open",
                                                            line=dict(width=4)),
                   hovertemplate="mean of the draws: %{y:.6g}<extra></extra>"),
    ]
    order = [*([base[0]] if base else []), chosen, random_name]
    fig = go.Figure(data=traces, layout=house(dict(
        xaxis=dict(type="category", categoryorder="array", categoryarray=order, tickfont=dict(size=14)), yaxis=dict(title=dict(text=y_title), zeroline=True),
        legend=LEGEND, hovermode="closest", scattermode="overlay"), title, 440))
    return fig


def causal_test(drop_top: float, drops_random: np.ndarray, k: int, metric: str, title: str) -> go.Figure:
    """How far switching off the top k neurons lowers F (`metric`, in words), beside each seeded draw of k random
    neurons from the same layers and the draws' mean."""
    return _versus(f"top {k} neurons", drop_top, drops_random, f"{k} random neurons",
                   f"drop in {html.escape(metric)}" if len(metric) <= 28 else "drop in F", title)


def outlier_weights(gamma: np.ndarray, dims: np.ndarray, title: str, what: str = "LayerNorm gain γ") -> go.Figure:
    """Each layer's LayerNorm weights (`gamma` (L, d)) against the dimension, one row of dots per layer, the
    outlying dimensions (`dims` (L, m), per layer) circled and named."""
    gamma = np.asarray(gamma, dtype=np.float64)
    traces = []
    for layer, row in enumerate(gamma):
        traces.append(go.Scatter(x=np.arange(len(row)), y=row, mode="markers", name=f"layer {layer}",
                                 marker=dict(size=4, opacity=0.6),
                                 hovertemplate=f"layer {layer}, dimension %{{x}}: %{{y:.6g}}<extra></extra>"))
    xs = [int(d) for layer in range(len(gamma)) for d in dims[layer]]
    ys = [float(gamma[layer, int(d)]) for layer in range(len(gamma)) for d in dims[layer]]
    layers = [layer for layer in range(len(gamma)) for _ in dims[layer]]
    named = [f"dim {x}" if x not in xs[:i] else "" for i, x in enumerate(xs)]  # a dimension outlying twice: named once
    traces.append(go.Scatter(x=xs, y=ys, mode="markers+text", name="outliers", text=named,
                             textposition="top center", customdata=layers,
                             marker=dict(size=14, color="rgba(0,0,0,0)", line=dict(color=DOWN, width=2.5)),
                             hovertemplate="outlier: dimension %{x}, %{y:.6g}<br>layer %{customdata}<extra></extra>"))
    layout = dict(xaxis=dict(title=dict(text="dimension")), yaxis=dict(title=dict(text=html.escape(what))),
                  legend={**LEGEND, "y": -0.24}, hovermode="closest")
    return go.Figure(data=traces, layout=house(layout, title, 460))


def outlier_loss(loss: float, loss_off: float, random_loss: np.ndarray, dims: tuple[int, ...],
                 title: str) -> go.Figure:
    """The held-out masked-LM loss of the model as it is, with the outlier `dims` zeroed in every LayerNorm, and
    with as many random dimensions zeroed (each seeded draw, and their mean)."""
    named = ", ".join(str(d) for d in dims)
    return _versus(f"dims {named} zeroed", loss_off, random_loss, f"{len(dims)} random dims zeroed",
                   "held-out masked-LM loss (nats)", title, base=("nothing zeroed", loss))
