"""Time-lapse charts: role scores over the steps, word positions at one step, the loss with the step marked.

Input is plain data (numpy arrays and lists from views/timelapse/history.py). The role chart draws one
frame per checkpoint at equal spacing, each tick labelled with its step, and its x axis says so:
the steps are not to scale (0 to 500 is ten frames of the shipped model's nineteen, a tenth of its
steps). The loss chart keeps the true step axis.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import house
from bertviz_lab.figures.training import RUN_COLORS
from bertviz_lab.head_id import HeadId

GROUP_COLORS = ("#1f5fa8", "#e0791b", "#4c9a2a", "#c2383a", "#8d5ab8", "#6b6b6b")
SHOWN_HEADS = 8  # heads drawn in colour on the role chart (the ones that play the role most); the rest grey
MARK = "#c2383a"  # the current step, on every chart
CHANCE_COLOR = "#888888"
FRAME_AXIS = "checkpoint (evenly spaced, labelled by step: not to scale)"


def _frame_axis(steps: list[int]) -> dict:
    return dict(title=dict(text=FRAME_AXIS), tickmode="array", tickvals=list(range(len(steps))),
                ticktext=[f"{s:,}" for s in steps], range=[-0.3, len(steps) - 0.7])


def role_lines(steps: list[int], series: np.ndarray, role: str, current: int, title: str,
               chance: float | None = None) -> go.Figure:
    """series (S, L, H): one line per head; the SHOWN_HEADS with the highest peak in colour; `chance`, what
    uniform attention would score, as a dashed grey line."""
    S, L, H = series.shape
    peak = np.nan_to_num(series, nan=0.0).max(0)  # (L, H)
    ranks = np.empty(L * H, dtype=int)
    ranks[np.argsort(-peak, axis=None)] = np.arange(L * H)  # 0: the head with the highest peak
    ranks = ranks.reshape(L, H)
    traces = []
    for layer in range(L):
        for head in range(H):
            rank, name = int(ranks[layer, head]), HeadId(layer, head)
            on = rank < SHOWN_HEADS
            traces.append(go.Scatter(
                x=list(range(S)), y=series[:, layer, head], mode="lines+markers" if on else "lines",
                name=str(name), showlegend=on, legendrank=rank,
                line=dict(color=RUN_COLORS[rank % len(RUN_COLORS)] if on else "#cfcfcf", width=2.5 if on else 1),
                customdata=steps,
                hovertemplate=f"{name}, step %{{customdata:,}}: %{{y:.3f}}<extra></extra>"))
    traces.sort(key=lambda t: t.showlegend)  # grey lines underneath
    layout = dict(xaxis=_frame_axis(steps), yaxis=dict(title=dict(text=f"score: {role}"), range=[0, 1.02]),
                  legend=dict(font=dict(size=12)),
                  shapes=[dict(type="line", x0=current, x1=current, y0=0, y1=1, yref="paper",
                               line=dict(color=MARK, width=2, dash="dot"))])
    fig = go.Figure(traces, layout=house(layout, title, 400))
    if chance is not None:
        fig.add_hline(y=chance, line=dict(color=CHANCE_COLOR, width=1.5, dash="dash"),
                      annotation=dict(text=f"uniform attention {chance:.2f}", font=dict(color=CHANCE_COLOR)),
                      annotation_position="top left")
    return fig


def word_map(xy: np.ndarray, words: list[str], groups: list[str], title: str, limit: float = 2.4,
             labelled: set[str] | None = None) -> go.Figure:
    """Word positions (W, 2) on fixed axes, one colour per group; the words in `labelled` (default: all) written
    beside their points, every word on hover (25 labels on one small map overlap into a heap)."""
    names = list(dict.fromkeys(groups))
    traces = []
    for n, group in enumerate(names):
        idx = [i for i, g in enumerate(groups) if g == group]
        traces.append(go.Scatter(
            x=xy[idx, 0], y=xy[idx, 1], mode="markers+text", name=html.escape(group),
            text=[html.escape(words[i]) if labelled is None or words[i] in labelled else "" for i in idx],
            textposition="top center", textfont=dict(size=14), customdata=[html.escape(words[i]) for i in idx],
            marker=dict(size=12, color=GROUP_COLORS[n % len(GROUP_COLORS)]),
            hovertemplate="%{customdata}<extra>" + html.escape(group) + "</extra>"))
    axis = dict(range=[-limit, limit], zeroline=False, showticklabels=False, title=None)
    layout = dict(xaxis=axis, yaxis=dict(axis, scaleanchor="x"), legend=dict(orientation="h", y=-0.02,
                                                                              yanchor="top"))
    return go.Figure(traces, layout=house(layout, title, 480))


def fixed_probability_axis(fig: go.Figure, highest: float) -> go.Figure:
    """A guesses chart's probability axis from 0 to `highest` (the top guess's probability over every frame), the
    same on every frame: while playing, a bar's length compares with the other frames' (a per-frame axis makes a
    0.1% bar look full)."""
    top = min(1.0, highest * 1.1) if highest > 0 else 1.0
    fig.update_xaxes(range=[0, top], tickformat=".0%" if top >= 0.1 else ".2~%",
                     title=dict(text="probability (one scale for every step)"))
    return fig


def mark_step(fig: go.Figure, step: int) -> go.Figure:
    """A vertical dotted line at `step` on a chart whose x axis is the training step."""
    fig.add_vline(x=step, line=dict(color=MARK, width=2, dash="dot"))
    return fig
