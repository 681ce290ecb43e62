"""Activation-patching figures: a grid of normalised scores (0: the corrupted run's, 1: the clean run's), rows the
depths, layers or query/key/value, columns the tokens or heads.

Drawn on a diverging scale from -1 to 1, white at 0 (patching leaves the corrupted run's score), blue towards 1 (it
brings the clean one back), red below 0 (it pushes the score further from the clean one): most cells of a grid move
nothing and stay white, so the few that matter stand out. Values past 1 (a patch can overshoot) are shown on hover
and in the cells. The
hover gives the cell's normalised score and its raw logit difference to 6 significant digits.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import house, token_labels

CELL_TEXT_MAX = 20  # print each value in its cell when the grid is at most this many columns wide
COLORS = ((0.0, "#b2182b"), (0.25, "#f4a582"), (0.5, "#ffffff"), (0.75, "#92c5de"), (1.0, "#2166ac"))
COLORBAR = dict(title=dict(text="share restored", side="right"), thickness=16, len=0.8,
                tickvals=[-1, -0.5, 0, 0.5, 1], ticktext=["-1", "-0.5", "0 corrupted", "0.5", "1 clean"])


def columns(kind: str, tokens: list[str], heads: int) -> list[str]:
    """The grid's column labels: the tokens ("3 park"), or the heads ("head 1")."""
    return [f"head {h + 1}" for h in range(heads)] if kind == "heads" else token_labels(tokens)


def grid_heatmap(values: np.ndarray, f: np.ndarray, rows: list[str], cols: list[str], title: str,
                 metric: str = "F", height: int | None = None) -> go.Figure:
    """(R, C) normalised scores, row 0 on top; `f` (R, C) the raw score of each cell, named `metric` on hover."""
    n_rows, n_cols = values.shape
    small = n_cols <= CELL_TEXT_MAX
    heatmap = go.Heatmap(
        z=values, x=cols, y=[html.escape(r) for r in rows], customdata=f, zmin=-1.0, zmax=1.0, colorscale=COLORS,
        xgap=1, ygap=1, colorbar=COLORBAR, texttemplate="%{z:.2f}" if small else None, textfont=dict(size=12),
        hovertemplate=(f"%{{y}}, %{{x}}<br>share restored: %{{z:.6g}}<br>{html.escape(metric)}: "
                       "%{customdata:.6g}<extra></extra>"))
    layout = dict(
        xaxis=dict(type="category", tickangle=-50, dtick=1, tickfont=dict(size=14 if n_cols <= 24 else 11)),
        yaxis=dict(type="category", autorange="reversed", dtick=1, tickfont=dict(size=14)))
    return go.Figure(data=[heatmap], layout=house(layout, title, height or int(np.clip(150 + 42 * n_rows, 280, 760))))
