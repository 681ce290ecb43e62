"""Syntax over a run's steps: the structural probe's UUAS beside the held-out loss, each relation's best head against
its fixed-offset baseline, and agreement across attractors.

Input is plain data (numpy arrays from views/timelapse/syntax.py). Like the role chart (figures/timelapse.py) the
x axis is one point per measured checkpoint, evenly spaced and labelled by step: the 1-2-5 series crowds the first
hundred steps into the left edge of a step axis. The held-out loss, measured at its own steps, is drawn on that
axis where its steps fall between the checkpoints' (step 250 halfway from 200 to 300), each point hovering its
true step. Baselines are dashed.
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import house
from bertviz_lab.figures.syntax import CHANCE
from bertviz_lab.figures.timelapse import CHANCE_COLOR
from bertviz_lab.figures.training import LEGEND, RUN_COLORS

BEST_COLOR, LOSS_COLOR, LAYER_COLOR = "#1f5fa8", "#e0791b", "#b9c7d8"
PANEL_COLUMNS = 4


SHORT_AXIS = "checkpoint step (evenly spaced)"  # these charts sit in half a page: the Time-lapse's own is longer


def frame_axis(steps: list[int]) -> dict:
    """An x axis with one tick per measured step, evenly spaced."""
    return dict(title=dict(text=SHORT_AXIS), tickmode="array", tickvals=list(range(len(steps))),
                ticktext=[f"{s:,}" for s in steps], range=[-0.3, len(steps) - 0.7])


def frame_positions(steps: list[int], at: np.ndarray) -> np.ndarray:
    """Where steps `at` fall on the frame axis (linear between two measured steps); NaN outside them."""
    at = np.asarray(at, dtype=np.float64)
    if len(steps) < 2:
        return np.where(at == steps[0], 0.0, np.nan) if steps else np.full(at.shape, np.nan)
    x = np.interp(at, steps, np.arange(len(steps), dtype=np.float64))
    return np.where((at >= steps[0]) & (at <= steps[-1]), x, np.nan)


def _dashed(n: int, value: float, name: str, color: str = CHANCE_COLOR, **extra) -> go.Scatter:
    return go.Scatter(x=list(range(n)), y=[value] * n, mode="lines", name=name,
                      line=dict(color=color, width=1.5, dash="dash"), hovertemplate=f"{name}: %{{y:.3f}}<extra></extra>",
                      **extra)


def uuas_lines(steps: list[int], uuas: np.ndarray, linear: float, title: str,
               loss_steps: np.ndarray | None = None, loss: np.ndarray | None = None) -> go.Figure:
    """uuas (S, L+1): the structural probe's UUAS at each step and layer (0: the embeddings); the best layer's bold,
    the others thin; `linear` (the baseline linking each word to the next) dashed; the held-out MLM loss at
    `loss_steps` on a second axis, at the right."""
    S, layers = uuas.shape
    best = uuas.argmax(1)
    traces = [go.Scatter(x=list(range(S)), y=uuas[:, layer], mode="lines", name=f"layer {layer}" if layer else
                         "layer 0 (embeddings)", line=dict(color=LAYER_COLOR, width=1), legendgroup="layers",
                         showlegend=layer == 0, customdata=steps,
                         hovertemplate=f"layer {layer}, step %{{customdata:,}}: %{{y:.3f}}<extra></extra>")
              for layer in range(layers)]
    traces.append(go.Scatter(x=list(range(S)), y=uuas[np.arange(S), best], mode="lines+markers",
                             name="best layer", line=dict(color=BEST_COLOR, width=3), marker=dict(size=8),
                             customdata=best, hovertemplate="best layer %{y:.3f}, layer %{customdata}<extra></extra>"))
    traces.append(_dashed(S, linear, "linear baseline"))
    layout = dict(xaxis=frame_axis(steps), yaxis=dict(title=dict(text="UUAS (share of gold edges found)"),
                                                      range=[0, 1.02]), legend=LEGEND, hovermode="closest")
    if loss_steps is not None and loss is not None and len(loss):
        x = frame_positions(steps, loss_steps)
        shown = ~np.isnan(x)
        traces.append(go.Scatter(x=x[shown], y=np.asarray(loss, dtype=np.float64)[shown], yaxis="y2",
                                 mode="lines+markers", name="held-out MLM loss (right)", marker=dict(size=5),
                                 line=dict(color=LOSS_COLOR, width=2), customdata=np.asarray(loss_steps)[shown],
                                 hovertemplate="held-out MLM loss %{y:.3f}, step %{customdata:,}<extra></extra>"))
        layout["yaxis2"] = dict(title=dict(text="held-out MLM loss (nats)", font=dict(color=LOSS_COLOR)),
                                overlaying="y", side="right", rangemode="tozero", showgrid=False,
                                tickfont=dict(color=LOSS_COLOR), tickformat=".1f")
    return go.Figure(traces, layout=house(layout, title, 400))


def _grid(count: int, cols: int, height: int) -> list[tuple[list[float], list[float]]]:
    """(x domain, y domain) of `count` panels, `cols` a row, from the top left (make_subplots' layout, without its
    cost: 100 ms a figure of eight panels, on every redraw of the page)."""
    rows = math.ceil(count / cols)
    gap_x, gap_y = 0.05, min(0.25, 90 / height)
    width, tall = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    out = []
    for i in range(count):
        left, top = (i % cols) * (width + gap_x), 1 - (i // cols) * (tall + gap_y)
        out.append(([left, left + width], [max(0.0, top - tall), top]))
    return out


def relation_lines(steps: list[int], relations: list[str], accuracy: np.ndarray, heads: np.ndarray,
                   baseline: np.ndarray, title: str) -> go.Figure:
    """One panel per relation: the accuracy (S, R) of its best head at each step (which head: `heads` (S, R), on
    hover), dependent → head, and its fixed-offset baseline (R,) dashed."""
    S, R = accuracy.shape
    cols = max(1, min(PANEL_COLUMNS, R))
    height = 90 + 230 * max(1, math.ceil(R / cols))
    traces, layout, notes = [], {}, []
    ticks = dict(tickmode="array", tickvals=list(range(S)), ticktext=[f"{s:,}" for s in steps], range=[-0.3, S - 0.7],
                 tickangle=-60, tickfont=dict(size=10))
    for r, (name, (x, y)) in enumerate(zip(relations, _grid(R, cols, height))):
        n = "" if r == 0 else str(r + 1)
        axes = dict(xaxis=f"x{n}", yaxis=f"y{n}")
        traces.append(go.Scatter(x=list(range(S)), y=accuracy[:, r], mode="lines+markers", name="best head",
                                 legendgroup="best", showlegend=r == 0, line=dict(color=BEST_COLOR, width=2.5),
                                 customdata=heads[:, r], **axes,
                                 hovertemplate=f"{html.escape(name)}: %{{y:.3f}}, head %{{customdata}}<extra></extra>"))
        traces.append(_dashed(S, float(baseline[r]), "fixed-offset baseline", legendgroup="baseline",
                              showlegend=r == 0, **axes))
        layout[f"xaxis{n}"] = dict(ticks, domain=x, anchor=f"y{n}")
        layout[f"yaxis{n}"] = dict(domain=y, anchor=f"x{n}", range=[0, 1.02], showticklabels=r % cols == 0)
        notes.append(dict(text=html.escape(name), x=sum(x) / 2, y=y[1], xref="paper", yref="paper", xanchor="center",
                          yanchor="bottom", showarrow=False, font=dict(size=16)))
    layout.update(annotations=notes, legend=dict(LEGEND, y=1.0 + 40 / height), hovermode="closest")
    return go.Figure(traces, layout=house(layout, title, height))


def agreement_lines(steps: list[int], accuracy: np.ndarray, title: str) -> go.Figure:
    """accuracy (S, A): the share of agreement pairs the model gets right with 0..A-1 attractors (NaN: no pair),
    and chance, 50% (half the subjects are plural: a model that ignores the subject gets half right), dashed and
    named in the legend below the chart (a label on the line itself lay over the lines near 50%)."""
    S, A = accuracy.shape
    traces = [go.Scatter(x=list(range(S)), y=accuracy[:, k], mode="lines+markers",
                         name=f"{k} attractor{'s' * (k != 1)}", line=dict(color=RUN_COLORS[k % len(RUN_COLORS)],
                                                                          width=2.5), customdata=steps,
                         hovertemplate=f"{k} attractor{'s' * (k != 1)}, step %{{customdata:,}}: %{{y:.0%}}"
                                       "<extra></extra>") for k in range(A)]
    traces.append(_dashed(S, 0.5, CHANCE))
    layout = dict(xaxis=frame_axis(steps), yaxis=dict(title=dict(text="pairs agreed on"), range=[0, 1.02],
                                                      tickformat=".0%"),
                  legend=dict(LEGEND, y=-0.42, yanchor="top", x=0, xanchor="left"),  # below: a narrow column
                  hovermode="closest")
    return go.Figure(traces, layout=house(layout, title, 420))


# --- Probing over training (views/timelapse/findings.py) ---------------------------------------------------------
def expected_layer_lines(steps: list[int], tasks: list[str], expected: np.ndarray, centre: np.ndarray,
                         layers: int, title: str) -> go.Figure:
    """expected (S, T): Tenney et al.'s expected layer of each task (named by `tasks`) at each step, one line a task
    (NaN: not probed there, or no hidden state added accuracy); its centre of gravity (S, T) on hover; the y axis
    the hidden states 0..`layers`."""
    S, T = expected.shape
    traces = [go.Scatter(x=list(range(S)), y=expected[:, t], mode="lines+markers", name=tasks[t],
                         line=dict(color=RUN_COLORS[t % len(RUN_COLORS)], width=2.5), customdata=centre[:, t],
                         hovertemplate=f"{html.escape(tasks[t])}: expected layer %{{y:.2f}}, centre of gravity "
                                       "%{customdata:.2f}<extra></extra>") for t in range(T)]
    shown = expected[np.isfinite(expected)]  # an expected layer may leave 0..L (a falling cumulative accuracy)
    low, high = min([0.0, *shown.tolist()]), max([float(layers), *shown.tolist()])
    layout = dict(xaxis=frame_axis(steps), yaxis=dict(title=dict(text="expected layer (0 = embeddings)"),
                                                      range=[low - 0.1, high + 0.1], dtick=1),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(traces, layout=house(layout, title, 380))


def selectivity_lines(steps: list[int], tasks: list[str], selectivity: np.ndarray, accuracy: np.ndarray,
                      control: np.ndarray, layer: np.ndarray, title: str) -> go.Figure:
    """selectivity (S, T): the linear probe's test accuracy minus its control task's at its best hidden state, one
    line a task; accuracy, control (S, T) and the hidden state `layer` (S, T) on hover; none (0) dashed."""
    S, T = selectivity.shape
    traces = [go.Scatter(x=list(range(S)), y=selectivity[:, t], mode="lines+markers", name=tasks[t],
                         line=dict(color=RUN_COLORS[t % len(RUN_COLORS)], width=2.5), customdata=layer[:, t],
                         text=[f"accuracy {a:.3f}, control {c:.3f}" for a, c in zip(accuracy[:, t], control[:, t])],
                         hovertemplate=f"{html.escape(tasks[t])}: selectivity %{{y:.3f}}, hidden state "
                                       "%{customdata} (%{text})<extra></extra>") for t in range(T)]
    traces.append(_dashed(S, 0.0, "not selective"))
    low = min(0.0, float(np.nanmin(selectivity))) if np.isfinite(selectivity).any() else 0.0
    layout = dict(xaxis=frame_axis(steps), yaxis=dict(title=dict(text="task minus control accuracy"),
                                                      range=[low - 0.02, 1.02]), legend=LEGEND, hovermode="closest")
    return go.Figure(traces, layout=house(layout, title, 380))


def amnesic_lines(steps: list[int], drop: np.ndarray, random_drop: np.ndarray, loss_rise: np.ndarray,
                  random_loss_rise: np.ndarray, removed: str, title: str) -> go.Figure:
    """drop (S,): how far agreement falls (points) with `removed` ("noun number's directions") taken out, and
    random_drop (S,) with random directions of the same rank (the mean of the draws), dashed; the masked-LM loss's
    rise (S,) with each on hover; no change (0) dotted. NaN: not measured at that step."""
    S = len(drop)
    traces = [go.Scatter(x=list(range(S)), y=np.asarray(values, dtype=np.float64) * 100, mode="lines+markers",
                         name=name, line=dict(color=color, width=2.5, dash=dash), customdata=rise,
                         hovertemplate=f"{html.escape(name)}: agreement %{{y:.1f}} points lower, masked-LM loss "
                                       "rise %{customdata:.3f}<extra></extra>")
              for name, values, rise, color, dash in ((f"{removed} removed", drop, loss_rise, BEST_COLOR, "solid"),
                                                      ("random directions, same rank", random_drop, random_loss_rise,
                                                       LOSS_COLOR, "dash"))]
    traces.append(go.Scatter(x=list(range(S)), y=[0.0] * S, mode="lines", name="no change",
                             line=dict(color=CHANCE_COLOR, width=1.5, dash="dot"), hoverinfo="skip"))
    layout = dict(xaxis=frame_axis(steps), yaxis=dict(title=dict(text="agreement drop (points)")),
                  legend=LEGEND, hovermode="closest")
    return go.Figure(traces, layout=house(layout, title, 380))
