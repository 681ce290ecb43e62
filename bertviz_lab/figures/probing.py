"""Figures of careful probing (the Syntax page's "Probing, carefully" tab, `nb.probe`): accuracy by hidden state
against the majority baseline, each task's expected layer and centre of gravity on one 0..L axis (Tenney et al.'s
order at a glance), the scalar mix's weights, a task against its control task for the linear and the MLP probe
with their selectivity (Hewitt & Liang), the online codelength (Voita & Titov), and amnesic probing's two results:
what a fresh probe finds after the removal, and what the model's masked-word guesses and agreement do (Elazar et al.).

Hidden states are counted as the Syntax page counts them: 0 is the embeddings' output, l the output of encoder
layer l. A task is told apart by colour and by line or marker, never by colour alone; the removal's own result is
blue, random projections grey, and the baseline a dashed dark line. Legends sit under the plot (above, they cover
the title). Names arrive as plain text and are HTML-escaped here.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import SEQUENTIAL, house

# Okabe-Ito colours, told apart by colour-blind eyes; each task also has a marker of its own
TASK_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "star")
REMOVED, RANDOM, BASE, BEFORE = "#2166ac", "#9e9e9e", "#333333", "#7a7a7a"
LEGEND = dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0)  # under the plot and its axis title
KINDS = {"linear": "linear probe", "mlp": "MLP probe"}
# a bar's value written inside it, at its foot: above it, the baseline's dashed line would cross it
INSIDE = dict(textposition="inside", insidetextanchor="start", textangle=0, textfont=dict(color="#ffffff", size=14))


def _text(value: str) -> str:
    return html.escape(str(value), quote=False)


def _layer_axis(states: int, title: str = "hidden state (0: the embeddings' output)") -> dict:
    return dict(title=dict(text=title), tickvals=list(range(states)), ticktext=["0 (emb.)", *map(str, range(1, states))],
                range=[-0.4, states - 0.6])


def _legend_height(height: int, items: int, per_row: int = 3) -> int:
    """The figure's height with room under the plot for a legend of `items` entries."""
    return height + 26 * max(0, -(-items // per_row) - 1)


def accuracy_by_layer(curves: dict[str, np.ndarray], majority: dict[str, float], title: str) -> go.Figure:
    """Each task's linear-probe test accuracy (name -> (L + 1,)) by hidden state, a solid line with a marker of its
    own, and its majority baseline as a thin dotted line of the same colour."""
    traces = []
    states = len(next(iter(curves.values()))) if curves else 1
    x = np.arange(states)
    for k, (name, values) in enumerate(curves.items()):
        color, marker, shown = TASK_COLORS[k % 6], MARKERS[k % 6], _text(name)
        traces.append(go.Scatter(x=x, y=np.asarray(values, dtype=np.float64), mode="lines+markers", name=shown,
                                 legendgroup=shown, line=dict(color=color, width=3),
                                 marker=dict(symbol=marker, size=9),
                                 hovertemplate=f"{shown} at %{{x}}: %{{y:.1%}}<extra></extra>"))
        traces.append(go.Scatter(x=x, y=np.full(states, float(majority[name])), mode="lines",
                                 name=f"{shown}: majority baseline", legendgroup=shown, showlegend=False,
                                 line=dict(color=color, width=1.5, dash="dot"), opacity=0.8,
                                 hovertemplate=f"{shown}: always the commonest label, %{{y:.1%}}<extra></extra>"))
    layout = dict(xaxis=_layer_axis(states), yaxis=dict(range=[0, 1.02], tickformat=".0%",
                                                       title=dict(text="test accuracy")),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(data=traces, layout=house(layout, _text(title), _legend_height(430, len(curves), 4)))


def task_depths(names: list[str], expected: np.ndarray, centre: np.ndarray, states: int, title: str) -> go.Figure:
    """One row per task on one 0..L axis: its expected layer (a filled diamond; none where it has none) and its mix's
    centre of gravity (an open circle), joined by a thin line, the first task on top."""
    shown = [_text(n) for n in names]
    expected = np.array([np.nan if e is None else e for e in expected], dtype=np.float64)
    centre = np.asarray(centre, dtype=np.float64)
    traces = [go.Scatter(x=[e, c], y=[n, n], mode="lines", showlegend=False, name=f"{n}: span",
                         line=dict(color=RANDOM, width=2), hoverinfo="skip")
              for n, e, c in zip(shown, expected, centre) if np.isfinite(e)]
    traces.append(go.Scatter(x=expected, y=shown, mode="markers+text", name="expected layer",
                             text=["" if not np.isfinite(e) else f"{e:.2f}" for e in expected], textposition="top center",
                             marker=dict(symbol="diamond", size=16, color=REMOVED),
                             hovertemplate="%{y}: expected layer %{x:.2f}<extra></extra>"))
    traces.append(go.Scatter(x=centre, y=shown, mode="markers+text", name="centre of gravity (the mix's weights)",
                             text=[f"{c:.2f}" for c in centre], textposition="bottom center",
                             marker=dict(symbol="circle-open", size=15, color="#D55E00", line=dict(width=3)),
                             hovertemplate="%{y}: centre of gravity %{x:.2f}<extra></extra>"))
    layout = dict(xaxis=_layer_axis(states, "hidden state (0: the embeddings' output; deeper to the right)"),
                  yaxis=dict(type="category", categoryorder="array", categoryarray=shown, autorange="reversed",
                             tickfont=dict(size=14)),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(data=traces, layout=house(layout, _text(title), 220 + 52 * len(names)))


def mix_heatmap(weights: np.ndarray, names: list[str], title: str) -> go.Figure:
    """(T, L + 1) each task's scalar-mix weights over the hidden states (a row sums to 1)."""
    weights = np.asarray(weights, dtype=np.float64)
    states = weights.shape[1] if weights.ndim == 2 else 0
    heatmap = go.Heatmap(z=weights, x=["0 (emb.)", *map(str, range(1, states))], y=[_text(n) for n in names],
                         zmin=0.0, zmax=max(float(weights.max(initial=0.0)), 1e-9), colorscale=SEQUENTIAL, xgap=1,
                         ygap=1, texttemplate="%{z:.2f}", textfont=dict(size=13),
                         colorbar=dict(title=dict(text="weight"), thickness=14),
                         hovertemplate="%{y}, hidden state %{x}: weight %{z:.3f}<extra></extra>")
    layout = dict(xaxis=dict(type="category", title=dict(text="hidden state")),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14)))
    return go.Figure(data=[heatmap], layout=house(layout, _text(title), 150 + 40 * len(names)))


def control_curves(accuracy: dict[str, np.ndarray], control: dict[str, np.ndarray], majority: float, title: str,
                   random_weights: np.ndarray | None = None) -> go.Figure:
    """Per probe kind (linear, mlp: each (L + 1,)), its accuracy on the task (solid) and on the control task (dotted,
    the same colour); the random-weights model's linear accuracy (grey, dash-dot) where given; the majority (dashed)."""
    traces = []
    states = len(next(iter(accuracy.values())))
    x = np.arange(states)
    for k, kind in enumerate(accuracy):
        name, color = KINDS.get(kind, _text(kind)), TASK_COLORS[k % 6]
        for values, what, dash, marker in ((accuracy[kind], "task", "solid", "circle"),
                                           (control[kind], "control task", "dot", "circle-open")):
            traces.append(go.Scatter(x=x, y=np.asarray(values, dtype=np.float64), mode="lines+markers",
                                     name=f"{name}, {what}", line=dict(color=color, width=3, dash=dash),
                                     marker=dict(symbol=marker, size=9),
                                     hovertemplate=f"{name} on the {what} at %{{x}}: %{{y:.1%}}<extra></extra>"))
    if random_weights is not None:
        traces.append(go.Scatter(x=x, y=np.asarray(random_weights, dtype=np.float64), mode="lines+markers",
                                 name="linear probe, random-weights model", line=dict(color=RANDOM, width=2,
                                                                                      dash="dashdot"),
                                 hovertemplate="random weights at %{x}: %{y:.1%}<extra></extra>"))
    traces.append(go.Scatter(x=x, y=np.full(states, float(majority)), mode="lines", name="majority baseline",
                             line=dict(color=BASE, width=2, dash="dash"),
                             hovertemplate="always the commonest label: %{y:.1%}<extra></extra>"))
    layout = dict(xaxis=_layer_axis(states), yaxis=dict(range=[0, 1.02], tickformat=".0%",
                                                       title=dict(text="test accuracy")),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(data=traces, layout=house(layout, _text(title), _legend_height(440, len(traces), 2)))


def selectivity_bars(selectivity: dict[str, np.ndarray], title: str) -> go.Figure:
    """Per probe kind, task accuracy minus control accuracy at each hidden state, in percentage points."""
    bars = []
    for k, (kind, values) in enumerate(selectivity.items()):
        points = 100 * np.asarray(values, dtype=np.float64)
        states = len(points)
        bars.append(go.Bar(x=np.arange(states), y=points, name=KINDS.get(kind, _text(kind)),
                           marker=dict(color=TASK_COLORS[k % 6], pattern_shape=("", "/")[k % 2]),
                           text=[f"{p:.0f}" for p in points], textposition="outside", cliponaxis=False,
                           hovertemplate=f"{KINDS.get(kind, _text(kind))} at %{{x}}: %{{y:.1f}} points<extra></extra>"))
    states = len(bars[0].x) if bars else 1
    top = max([float(np.max(b.y, initial=0.0)) for b in bars] + [1.0])
    low = min([float(np.min(b.y, initial=0.0)) for b in bars] + [0.0])
    layout = dict(barmode="group", bargap=0.25, xaxis=_layer_axis(states),
                  yaxis=dict(title=dict(text="selectivity (points)"), range=[low * 1.2 - 1, top * 1.18 + 1],
                             zeroline=True, zerolinecolor=BASE),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(data=bars, layout=house(layout, _text(title), _legend_height(440, 6, 2)))


def codelength_curves(online: np.ndarray, control: np.ndarray, random_weights: np.ndarray | None, uniform: float,
                      title: str) -> go.Figure:
    """The online codelength in kbits by hidden state: the task on this model (solid), its control task (dotted),
    the task on the random-weights model (grey, dash-dot), and the uniform code's (no vector at all, dashed)."""
    online = np.asarray(online, dtype=np.float64) / 1000
    states = len(online)
    x = np.arange(states)
    lines = [(online, "the task", TASK_COLORS[0], "solid"),
             (np.asarray(control, dtype=np.float64) / 1000, "its control task", TASK_COLORS[1], "dot")]
    if random_weights is not None:
        lines.append((np.asarray(random_weights, dtype=np.float64) / 1000, "the task, random-weights model", RANDOM,
                      "dashdot"))
    traces = [go.Scatter(x=x, y=values, mode="lines+markers", name=name, line=dict(color=color, width=3, dash=dash),
                         hovertemplate=f"{name} at %{{x}}: %{{y:.2f}} kbits<extra></extra>")
              for values, name, color, dash in lines]
    traces.append(go.Scatter(x=x, y=np.full(states, uniform / 1000), mode="lines", name="no vector (uniform code)",
                             line=dict(color=BASE, width=2, dash="dash"),
                             hovertemplate="the labels sent with no vector: %{y:.2f} kbits<extra></extra>"))
    layout = dict(xaxis=_layer_axis(states), legend=LEGEND, hovermode="closest",
                  yaxis=dict(rangemode="tozero", title=dict(text="codelength (kbits; shorter: easier to read)")))
    return go.Figure(data=traces, layout=house(layout, _text(title), _legend_height(420, len(traces), 3)))


def probe_removal(before: float, after: float, random: float, majority: float, title: str) -> go.Figure:
    """A fresh linear probe's test accuracy at the layer: before the removal, after it and after a random
    projection of the same rank (the draws' mean), with the majority baseline dashed."""
    names = ["before", "task removed", "random removed"]
    values = [float(before), float(after), float(random)]
    bar = go.Bar(x=names, y=values, marker_color=[BEFORE, REMOVED, RANDOM], name="probe accuracy",
                 text=[f"{v:.1%}" for v in values], showlegend=False, **INSIDE,
                 hovertemplate="%{x}: %{y:.1%}<extra></extra>")
    base = go.Scatter(x=names, y=[float(majority)] * 3, mode="lines", name=f"majority baseline ({majority:.0%})",
                      line=dict(color=BASE, width=2, dash="dash"),
                      hovertemplate="always the commonest label: %{y:.1%}<extra></extra>")
    layout = dict(xaxis=dict(type="category", tickfont=dict(size=14)), legend=LEGEND,
                  yaxis=dict(range=[0, 1.1], tickformat=".0%", title=dict(text="probe test accuracy")))
    return go.Figure(data=[bar, base], layout=house(layout, _text(title), 400))


def lm_effect(before: float, after: float, random: np.ndarray, y_title: str, title: str) -> go.Figure:
    """A masked-LM measure (loss or accuracy) with nothing removed, with the task removed, and after each random
    projection of the same rank (a dot a draw) with the draws' mean (a bar mark)."""
    random = np.asarray(random, dtype=np.float64)
    names = ["before", "task removed", "random removed"]
    traces = [
        go.Scatter(x=names[:1], y=[float(before)], mode="markers", name="nothing removed",
                   marker=dict(color=BEFORE, size=16, symbol="square"), hovertemplate="%{x}: %{y:.4f}<extra></extra>"),
        go.Scatter(x=names[1:2], y=[float(after)], mode="markers", name="the task's directions removed",
                   marker=dict(color=REMOVED, size=18, symbol="diamond"), hovertemplate="%{x}: %{y:.4f}<extra></extra>"),
        go.Scatter(x=[names[2]] * len(random), y=random, mode="markers", name="random directions: each draw",
                   marker=dict(color=RANDOM, size=10, opacity=0.8), customdata=np.arange(1, len(random) + 1),
                   hovertemplate="draw %{customdata}: %{y:.4f}<extra></extra>"),
        go.Scatter(x=names[2:], y=[float(random.mean()) if len(random) else np.nan], mode="markers",
                   name="random directions: mean", marker=dict(color=BASE, size=24, symbol="line-ew-open",
                                                               line=dict(width=4)),
                   hovertemplate="mean of the draws: %{y:.4f}<extra></extra>")]
    layout = dict(xaxis=dict(type="category", categoryorder="array", categoryarray=names, tickfont=dict(size=14)),
                  yaxis=dict(title=dict(text=_text(y_title))), legend=LEGEND, hovermode="closest",
                  scattermode="overlay")
    return go.Figure(data=traces, layout=house(layout, _text(title), _legend_height(400, 4, 2)))


def agreement_removal(attractors: list[int], before: np.ndarray, after: np.ndarray, random: np.ndarray,
                      pairs: list[int], title: str) -> go.Figure:
    """Agreement accuracy by number of attractors (NaN: no pairs): nothing removed, number removed, and random
    directions removed (the draws' mean), with chance (50%) dashed."""
    x = [f"{k} attractor{'' if k == 1 else 's'}" for k in attractors]
    bars = [go.Bar(x=x, y=np.asarray(values, dtype=np.float64), name=name, marker_color=color,
                   marker_pattern_shape=shape, customdata=pairs,
                   text=["" if not np.isfinite(v) else f"{v:.0%}" for v in np.asarray(values, dtype=np.float64)],
                   **INSIDE,
                   hovertemplate=f"{name}, %{{x}}: %{{y:.1%}}<br>pairs %{{customdata}}<extra></extra>")
            for values, name, color, shape in ((before, "nothing removed", BEFORE, ""),
                                               (after, "number removed", REMOVED, ""),
                                               (random, "random directions removed (mean)", RANDOM, "/"))]
    chance = go.Scatter(x=x, y=[0.5] * len(x), mode="lines", name="chance (50%)",
                        line=dict(color=BASE, width=2, dash="dash"), hoverinfo="skip")
    layout = dict(barmode="group", bargap=0.25, xaxis=dict(type="category"), legend=LEGEND,
                  yaxis=dict(range=[0, 1.12], tickformat=".0%", title=dict(text="right form scored higher")))
    return go.Figure(data=[*bars, chance], layout=house(layout, _text(title), _legend_height(420, 4, 3)))
