"""Fine-tuning figures: curves of one run or several overlaid, the confusion matrix, class probabilities,
and the dev set as the classifier sees it before and after fine-tuning.

Curves take `{legend name: Curves}` (figures.training) with train records and dev records, both with loss
and acc (the names pretraining's curves use); each run keeps one colour, train curves thin and faint, dev
curves bold. Labels and texts arrive as plain strings and are HTML-escaped here (plotly renders a subset of HTML).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertviz_lab.figures import SEQUENTIAL, house, house_layout
from bertviz_lab.figures.training import HEIGHT, LEGEND, Curves, _chart
from bertviz_lab.metrics import EVAL, TRAIN

BAR_COLOR, BEST_COLOR = "#9bb8d8", "#1f5fa8"
LABEL_COLORS = ("#1f5fa8", "#e0791b", "#4c9a2a", "#c2383a", "#8d5ab8", "#6b6b6b", "#1a9e9e", "#b8860b")
HOVER_CHARS = 140  # a long sentence is cut in the hover


def loss_curves(curves: dict[str, Curves], train: bool = True, held_out: bool = True) -> go.Figure:
    """Cross-entropy of the classifier, per training batch and on the dev set (either may be left out)."""
    series = [(TRAIN, "loss", "train")] * train + [(EVAL, "loss", "held-out")] * held_out
    title = "Loss" if train and held_out else "Training loss" if train else "Dev loss"
    return _overlay(_chart(curves, series, title, "loss (nats)"), len(curves), len(series))


def accuracy_curves(curves: dict[str, Curves], train: bool = True) -> go.Figure:
    """Share of examples (or tagged words) classified right, per training batch and on the dev set."""
    series = [(TRAIN, "acc", "train")] * train + [(EVAL, "acc", "held-out")]
    fig = _chart(curves, series, "Accuracy" if train else "Dev accuracy", "accuracy", fmt=".1%", y_range=[0, 1.02])
    return _overlay(fig, len(curves), len(series))


def _overlay(fig: go.Figure, runs: int, series: int) -> go.Figure:
    """Several runs: legends are run descriptions, too long to share a line with the title, so they go
    below the chart, one per line, without the series name when there is one series."""
    if runs < 2:
        return fig
    if series == 1:
        for trace in fig.data:
            trace.name = trace.name.rsplit(" · ", 1)[0]
    fig.update_layout(legend=dict(orientation="v", yanchor="top", y=-0.28, x=0, xanchor="left"),
                      height=HEIGHT + 24 * len(fig.data) + 30)
    return fig


def confusion_heatmap(counts: np.ndarray, labels: list[str], title: str) -> go.Figure:
    """(C, C) counts, true label down the side, predicted along the bottom; each cell's count printed and
    its share of the row (how the true class was labelled) on hover. Colour = that share."""
    counts = np.asarray(counts)
    totals = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, totals, out=np.zeros(counts.shape), where=totals > 0)
    names = [html.escape(label) for label in labels]
    heatmap = go.Heatmap(
        z=share, x=names, y=names, zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, xgap=2, ygap=2,
        customdata=counts, text=counts, texttemplate="%{text:,}", textfont=dict(size=15 if len(labels) <= 8 else 11),
        hovertemplate="true %{y}, predicted %{x}: %{customdata:,} (%{z:.1%} of %{y})<extra></extra>",
        colorbar=dict(title=dict(text="share of the row", side="right"), thickness=16, len=0.8, tickformat=".0%"))
    layout = dict(xaxis=dict(type="category", title=dict(text="predicted"), side="bottom"),
                  yaxis=dict(type="category", title=dict(text="true"), autorange="reversed"))
    return go.Figure(data=[heatmap], layout=house(layout, title, int(np.clip(140 + 52 * len(labels), 320, 620))))


def probability_bars(labels: list[str], probs: np.ndarray, title: str | None = None) -> go.Figure:
    """One bar per class, in the classifier's order; the predicted class dark."""
    probs = np.asarray(probs, dtype=float)
    best = int(probs.argmax())
    bar = go.Bar(
        x=probs, y=[html.escape(label) for label in labels], orientation="h",
        marker_color=[BEST_COLOR if i == best else BAR_COLOR for i in range(len(labels))],
        text=[f"{p:.1%}" for p in probs], textposition="auto", textfont=dict(size=15), cliponaxis=False,
        hovertemplate="<b>%{y}</b>: probability %{x:.6g}<extra></extra>")
    layout = dict(yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=15)),
                  xaxis=dict(title=dict(text="probability"), tickformat=".0%", range=[0, 1]))
    return go.Figure(bar, layout=house(layout, title, 90 + 40 * len(labels)))


def _short(text: str) -> str:
    return html.escape(text if len(text) <= HOVER_CHARS else text[:HOVER_CHARS - 1] + "…")


def before_after(points: np.ndarray, explained: np.ndarray, labels: list[str], texts: list[str], title: str,
                 classes: list[str] | None = None,
                 names: tuple[str, str] = ("before fine-tuning", "after fine-tuning")) -> go.Figure:
    """(2, M, 2) PCA scores side by side, one colour per true label (one legend for both, in the order of
    `classes`, the first drawn underneath); the text on hover."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                        subplot_titles=[f"{name} · PC1 {e[0]:.0%}, PC2 {e[1]:.0%} of the variance"
                                        for name, e in zip(names, explained)])
    present = set(labels)
    classes = [c for c in classes or dict.fromkeys(labels) if c in present]
    hover = np.array([_short(t) for t in texts], dtype=object)
    for color, label in zip(LABEL_COLORS * 8, classes):
        rows = [i for i, y in enumerate(labels) if y == label]
        for col in (0, 1):
            fig.add_trace(go.Scatter(
                x=points[col, rows, 0], y=points[col, rows, 1], mode="markers", name=html.escape(label),
                legendgroup=label, showlegend=col == 0, customdata=hover[rows],
                marker=dict(size=7, color=color, opacity=0.75, line=dict(color="white", width=0.5)),
                hovertemplate="%{customdata}<extra>" + html.escape(label) + "</extra>"), row=1, col=col + 1)
    fig.update_xaxes(zeroline=True, zerolinecolor="#bbb", showticklabels=False, title_text="PC1")
    fig.update_yaxes(zeroline=True, zerolinecolor="#bbb", showticklabels=False, title_text="PC2")
    fig.update_layout(legend=dict(LEGEND, y=1.08), hovermode="closest")
    return house_layout(fig, title, 470)

