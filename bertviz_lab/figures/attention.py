"""Attention figures: one head's matrix, the grid of all heads, softmax bars, vector bars, and the
length of each vector along one encoder layer.

Sized to be read from the back of a classroom: 14 px text or more where it fits,
values in the cells of small matrices, weights to WEIGHT_DIGITS significant digits on
hover (enough to check a computation by hand, even for a weight like 0.000123456). Axis
labels arrive HTML-escaped (`token_labels`), since plotly renders a subset of HTML.
Each figure is built in one constructor call with its whole layout (`house`: plotly
validates once), because the page redraws all of them on every rerun.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.figures import SEQUENTIAL, house
from bertviz_lab.head_id import HeadId

SERIES_COLORS = ("#1f5fa8", "#e0791b", "#4c9a2a", "#8d5ab8")
CELL_TEXT_MAX = 16  # print each weight inside the cells when the matrix is at most this wide
COLORBAR = dict(title=dict(text="attention weight", side="right"), thickness=16, len=0.8)
LEGEND = dict(orientation="h", yanchor="bottom", y=1.0, x=1, xanchor="right")
WEIGHT_DIGITS = 6  # significant digits of a weight on hover (and in the page's tables)
WEIGHT_HOVER = f".{WEIGHT_DIGITS}g"  # d3-format: 6 significant digits, 0.000123456 stays whole


def export_config(filename: str, scale: int = 2) -> dict:
    """Plotly config for st.plotly_chart: the camera button saves a sharp PNG named `filename`."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": filename, "scale": scale},
            "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


def _tick_size(n: int) -> int:
    return 14 if n <= 24 else 12 if n <= 40 else 10


def attention_heatmap(weights: np.ndarray, x_labels: list[str], y_labels: list[str], title: str,
                      height: int | None = None) -> go.Figure:
    """(R, C) weights, queries down the side (row 0 on top), keys along the bottom, colours 0..1."""
    rows, cols = weights.shape
    small = max(rows, cols) <= CELL_TEXT_MAX
    heatmap = go.Heatmap(
        z=weights, x=x_labels, y=y_labels, zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, xgap=1, ygap=1,
        hovertemplate=f"%{{y}} → %{{x}}: %{{z:{WEIGHT_HOVER}}}<extra></extra>", colorbar=COLORBAR,
        texttemplate="%{z:.2f}" if small else None, textfont=dict(size=12))
    layout = dict(
        xaxis=dict(title=dict(text="key (looked at)"), type="category", tickangle=-50, dtick=1,
                   tickfont=dict(size=_tick_size(cols))),
        yaxis=dict(title=dict(text="query (looking)"), type="category", autorange="reversed", dtick=1,
                   tickfont=dict(size=_tick_size(rows))))
    return go.Figure(data=[heatmap], layout=house(layout, title, height or int(np.clip(170 + 30 * rows, 420, 1000))))


def attention_grid(weights: np.ndarray, x_labels: list[str], y_labels: list[str],
                   heads_on: np.ndarray | None = None, title: str | None = None,
                   first_layer: int = 0) -> go.Figure:
    """(L, H, R, C): one small heatmap per layer (rows) and head (columns), one shared colour scale. `first_layer`:
    the model layer of row 0, when the rows are some of its layers (one layer's heads: L = 1)."""
    L, H = weights.shape[:2]
    on = np.ones((L, H), bool) if heads_on is None else heads_on
    gap_x, gap_y = 0.2 / H, 0.3 / L
    width, height = (1 - gap_x * (H - 1)) / H, (1 - gap_y * (L - 1)) / L
    traces, layout, notes = [], {}, []
    for layer in range(L):
        for head in range(H):
            n = layer * H + head + 1
            suffix = "" if n == 1 else str(n)
            x0, y1 = head * (width + gap_x), 1 - layer * (height + gap_y)
            name = HeadId(first_layer + layer, head)
            hover = f"{name}<br>%{{y}} → %{{x}}: %{{z:{WEIGHT_HOVER}}}<extra></extra>"
            traces.append(go.Heatmap(z=weights[layer, head], x=x_labels, y=y_labels, coloraxis="coloraxis",
                                     xaxis=f"x{suffix}", yaxis=f"y{suffix}", hovertemplate=hover))
            axis = dict(showticklabels=False, type="category", showgrid=False)
            layout[f"xaxis{suffix}"] = dict(axis, domain=[x0, x0 + width], anchor=f"y{suffix}")
            layout[f"yaxis{suffix}"] = dict(axis, domain=[y1 - height, y1], anchor=f"x{suffix}", autorange="reversed")
            notes.append(dict(text=str(name) + ("" if on[layer, head] else " (off)"), x=x0 + width / 2,
                              y=y1, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                              showarrow=False, font=dict(size=13)))
    layout.update(annotations=notes, coloraxis=dict(colorscale=SEQUENTIAL, cmin=0.0, cmax=1.0, colorbar=COLORBAR))
    return go.Figure(data=traces, layout=house(layout, title, int(80 + 160 * L)))


def softmax_bars(df: pd.DataFrame, title: str) -> go.Figure:
    """One bar per key (the index, HTML-escaped labels) for each column, e.g. model vs what-if weights."""
    text = "%{y:.2f}" if len(df) <= 24 else None
    bars = [go.Bar(x=list(df.index), y=df[column], name=str(column), marker_color=color, texttemplate=text,
                   textposition="outside", hovertemplate=f"%{{x}}: %{{y:{WEIGHT_HOVER}}}<extra>{column}</extra>")
            for color, column in zip(SERIES_COLORS, df.columns)]
    top = float(np.nanmax(df.to_numpy())) if df.size else 1.0
    layout = dict(barmode="group", showlegend=len(df.columns) > 1, legend=LEGEND,
                  xaxis=dict(type="category", tickangle=-50, tickfont=dict(size=_tick_size(len(df)))),
                  yaxis=dict(title=dict(text="attention weight"), range=[0, min(1.1, top * 1.2 + 0.02)]))
    return go.Figure(data=bars, layout=house(layout, title, 420))


def vector_bars(df: pd.DataFrame, title: str, height: int = 360, lower: list[str] | None = None) -> go.Figure:
    """Grouped bars, one per dimension (the index) for each column, e.g. q and k; the `lower`
    columns (e.g. q × k) get a second panel underneath on the same dimension axis."""
    lower = lower or []
    bars = [go.Bar(x=list(df.index), y=df[column], name=str(column), marker_color=color,
                   yaxis="y2" if column in lower else "y", xaxis="x2" if column in lower else "x",
                   hovertemplate="dim %{x}: %{y:.4f}<extra>" + str(column) + "</extra>")
            for color, column in zip(SERIES_COLORS, df.columns)]
    x = dict(title=dict(text="dimension"), dtick=4 if len(df) > 16 else 1)
    layout = dict(barmode="group", bargap=0.15, showlegend=len(df.columns) > 1, legend=LEGEND, xaxis=x,
                  yaxis=dict(zeroline=True, zerolinecolor="#888"))
    if lower:
        layout.update(xaxis=dict(x, matches="x2", showticklabels=False, title=None, anchor="y"),
                      yaxis=dict(layout["yaxis"], domain=[0.52, 1.0]), xaxis2=dict(x, anchor="y2"),
                      yaxis2=dict(zeroline=True, zerolinecolor="#888", domain=[0.0, 0.42], anchor="x2"))
    return go.Figure(data=bars, layout=house(layout, title, height))


def step_norms(steps: list[str], norms: np.ndarray, title: str, highlight: str = "LayerNorm") -> go.Figure:
    """One horizontal bar per step (first step on top): the L2 norm of its vector; steps whose
    name starts with `highlight` get the second colour (LayerNorm resets the length)."""
    colors = [SERIES_COLORS[1] if step.startswith(highlight) else SERIES_COLORS[0] for step in steps]
    bar = go.Bar(x=norms, y=steps, orientation="h", marker_color=colors, texttemplate="%{x:.3g}",
                 textposition="outside", cliponaxis=False, hovertemplate="%{y}: ‖·‖ = %{x:.6g}<extra></extra>")
    layout = dict(xaxis=dict(title=dict(text="length of the vector (L2 norm)"), range=[0, float(max(norms)) * 1.15]),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14), ticklabelstandoff=8),
                  bargap=0.25)
    return go.Figure(data=[bar], layout=house(layout, title, 80 + 36 * len(steps)))


def head_summary(values: np.ndarray, title: str, number_format: str, unit: str) -> go.Figure:
    """(L, H): one number per head, layers down the side, heads along the bottom, each cell labelled."""
    L, H = values.shape
    heatmap = go.Heatmap(
        z=values, x=[f"head {h}" for h in range(H)], y=[f"layer {layer}" for layer in range(L)],
        colorscale=SEQUENTIAL, xgap=1, ygap=1, texttemplate=f"%{{z:{number_format}}}", textfont=dict(size=11),
        hovertemplate=f"%{{y}} · %{{x}}: %{{z:{number_format}}} {unit}<extra></extra>",
        colorbar=dict(title=dict(text=unit)))
    layout = dict(xaxis=dict(type="category"), yaxis=dict(type="category", autorange="reversed"))
    return go.Figure(data=[heatmap], layout=house(layout, title, 120 + 34 * L))
