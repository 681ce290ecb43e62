"""Representation figures: cosine matrices, similarity by layer, a 2-D projection, the logit lens,
retrieval by layer, and the embeddings' geometry.

Layers are counted as the hidden states are: 0 is the embeddings' output, then 1..L. Sentences and
tokens arrive as plain text and are HTML-escaped here, since plotly renders a subset of HTML.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from bertviz_lab.figures import SEQUENTIAL, house
from bertviz_lab.figures.attention import LEGEND, SERIES_COLORS, _tick_size

SENSE_COLORS = ("#1f5fa8", "#e0791b", "#4c9a2a", "#c2383a", "#8d5ab8", "#6b6b6b")
NO_SENSE = "no sense given"
LABEL_CHARS = 34  # a sentence on an axis: longer ones end in "…" (the hover has the whole sentence)


def layer_name(layer: int) -> str:
    return "0 (embeddings)" if layer == 0 else str(layer)


def sentence_labels(sentences: list[str], senses: list[str | None]) -> list[str]:
    """'3 money: i went to the bank…': numbered, so equal sentences stay distinct categories."""
    out = []
    for n, (text, sense) in enumerate(zip(sentences, senses), 1):
        short = text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"
        out.append(html.escape(f"{n} {sense + ': ' if sense else ''}{short}"))
    return out


def _layer_axis(layers: int, title: str = "layer (0 = embeddings)") -> dict:
    return dict(title=dict(text=title), tickmode="array", tickvals=list(range(layers)),
                ticktext=["emb"] + [str(i) for i in range(1, layers)])


def similarity_heatmap(sims: np.ndarray, labels: list[str], sentences: list[str], title: str) -> go.Figure:
    """(S, S) cosines, sentence i down the side (labelled) and j along the bottom (by number); the hover has
    both sentences."""
    S = len(sims)
    columns = [label.split(":")[0] for label in labels]  # "3 money": the rows carry the sentences
    full = np.array([[html.escape(a), html.escape(b)] for a in sentences for b in sentences],
                    dtype=object).reshape(S, S, 2)
    heatmap = go.Heatmap(
        z=sims, x=columns, y=labels, zmin=min(0.0, float(sims.min())), zmax=1.0, colorscale=SEQUENTIAL, xgap=1,
        ygap=1, customdata=full, texttemplate="%{z:.2f}" if S <= 12 else None, textfont=dict(size=13),
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>cosine %{z:.6f}<extra></extra>",
        colorbar=dict(title=dict(text="cosine", side="right"), thickness=16, len=0.8))
    layout = dict(xaxis=dict(type="category", tickangle=-40, tickfont=dict(size=_tick_size(S) - 1)),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=_tick_size(S) - 1)))
    return go.Figure(data=[heatmap], layout=house(layout, title, int(np.clip(150 + 40 * S, 380, 1000))))


def sense_lines(table: pd.DataFrame, columns: list[str], title: str, y_title: str = "mean cosine",
                y_range: list[float] | None = None) -> go.Figure:
    """One line per column over the layers (table has a `layer` column), e.g. same vs different senses."""
    lines = [go.Scatter(x=table["layer"], y=table[c], name=c, mode="lines+markers",
                        line=dict(color=color, width=3), marker=dict(size=9),
                        hovertemplate=f"layer %{{x}}: %{{y:.4f}}<extra>{html.escape(c)}</extra>")
             for color, c in zip(SERIES_COLORS, columns)]
    layout = dict(legend=LEGEND, xaxis=_layer_axis(len(table)), yaxis=dict(title=dict(text=y_title), range=y_range))
    return go.Figure(data=lines, layout=house(layout, title, 380))


def _padded(values: np.ndarray, share: float = 0.18) -> list[float]:
    """An axis range around `values` with room on both sides: a point and its number never sit on the edge,
    under the legend or the title."""
    low, high = float(values.min(initial=0.0)), float(values.max(initial=0.0))
    pad = max(high - low, 1e-9) * share
    return [low - pad, high + pad]


def projection_scatter(points: np.ndarray, senses: list[str | None], sentences: list[str],
                       explained: np.ndarray, title: str) -> go.Figure:
    """(S, 2) PCA scores, one colour per sense, each point numbered as in the matrix; the sentence on hover.

    Only the components the points span are drawn: with one (two sentences) the points lie on one line, with
    none (equal vectors) on one spot; ticks are plain numbers (plotly's default SI prefixes read 1e-15 as "1f").
    """
    spanned = int((np.asarray(explained) > 0).sum())
    xy = np.where(np.arange(2) < spanned, points, 0.0)
    names = list(dict.fromkeys(s or NO_SENSE for s in senses))
    traces = []
    for color, name in zip(SENSE_COLORS * 4, names):
        rows = [i for i, s in enumerate(senses) if (s or NO_SENSE) == name]
        traces.append(go.Scatter(
            x=xy[rows, 0], y=xy[rows, 1], name=html.escape(name), mode="markers+text",
            text=[str(i + 1) for i in rows], textposition="top center", textfont=dict(size=13),
            marker=dict(size=14, color=color, line=dict(color="white", width=1)),
            customdata=[html.escape(sentences[i]) for i in rows],
            hovertemplate="%{text}: %{customdata}<extra>" + html.escape(name) + "</extra>"))
    axis = dict(zeroline=True, zerolinecolor="#bbb", tickformat=".3~g", exponentformat="power")
    x_title = f"PC1 ({explained[0]:.0%} of the variance)" if spanned else "no direction: the vectors are equal"
    x = dict(axis, title=dict(text=x_title), range=_padded(xy[:, 0]))
    if spanned < 2:  # one line: no second axis to read
        y = dict(range=[-1.0, 1.6], fixedrange=True, showticklabels=False, showgrid=False, zeroline=True,
                 zerolinecolor="#888", zerolinewidth=2)  # the one direction, drawn as the line it is
        legend = dict(orientation="h", x=0, xanchor="left", y=1, yanchor="top")  # inside, clear of the title
        layout = dict(legend=legend, xaxis=x, yaxis=y)
        return go.Figure(data=traces, layout=house(layout, title, 300))
    y = dict(axis, title=dict(text=f"PC2 ({explained[1]:.0%})"), range=_padded(xy[:, 1], 0.25))
    return go.Figure(data=traces, layout=house(dict(legend=LEGEND, xaxis=x, yaxis=y), title, 440))


def lens_heatmap(probs: np.ndarray, tokens: list[str], title: str) -> go.Figure:
    """(L + 1, n) probabilities of n tokens after each layer: layers down the side, the last at the bottom."""
    layers, n = probs.shape
    heatmap = go.Heatmap(
        z=probs, x=[html.escape(t) for t in tokens], y=[layer_name(i) for i in range(layers)], zmin=0.0, zmax=1.0,
        colorscale=SEQUENTIAL, xgap=1, ygap=1, texttemplate="%{z:.2f}" if n <= 16 else None, textfont=dict(size=12),
        hovertemplate="layer %{y}: p(%{x}) = %{z:.6g}<extra></extra>",
        colorbar=dict(title=dict(text="probability", side="right"), thickness=16, len=0.8))
    layout = dict(xaxis=dict(type="category", tickangle=-40, title=dict(text="token"), tickfont=dict(size=_tick_size(n))),
                  yaxis=dict(type="category", autorange="reversed", title=dict(text="after layer")))
    return go.Figure(data=[heatmap], layout=house(layout, title, int(np.clip(160 + 40 * layers, 320, 760))))


def precision_lines(table: pd.DataFrame, k: int, title: str) -> go.Figure:
    """precision@k by layer, one line per word; each word's chance level dotted in its colour."""
    traces = []
    for color, (word, rows) in zip(SENSE_COLORS, table.groupby("word", sort=False)):
        traces.append(go.Scatter(x=rows["layer"], y=rows["precision"], name=html.escape(word), legendgroup=word,
                                 mode="lines+markers", line=dict(color=color, width=3), marker=dict(size=8),
                                 hovertemplate=f"layer %{{x}}: precision@{k} %{{y:.3f}}<extra>{html.escape(word)}"
                                               "</extra>"))
        traces.append(go.Scatter(x=rows["layer"], y=rows["chance"], legendgroup=word, showlegend=False,
                                 mode="lines", line=dict(color=color, width=1.5, dash="dot"),
                                 hovertemplate=f"chance for {html.escape(word)}: %{{y:.3f}}<extra></extra>"))
    layers = int(table["layer"].max()) + 1
    layout = dict(legend=LEGEND, xaxis=_layer_axis(layers),
                  yaxis=dict(title=dict(text=f"precision@{k}"), range=[0, 1.05]))
    return go.Figure(data=traces, layout=house(layout, title, 400))


def position_heatmap(sims: np.ndarray, title: str) -> go.Figure:
    """(n, n) cosines between position embeddings, -1 red, 0 white, 1 blue."""
    n = len(sims)
    heatmap = go.Heatmap(z=sims, x=list(range(n)), y=list(range(n)), zmin=-1.0, zmax=1.0, zmid=0.0,
                         colorscale="RdBu", hovertemplate="position %{y} · position %{x}: cosine %{z:.4f}"
                                                          "<extra></extra>",
                         colorbar=dict(title=dict(text="cosine", side="right"), thickness=16, len=0.8))
    layout = dict(xaxis=dict(title=dict(text="position"), constrain="domain"),
                  yaxis=dict(title=dict(text="position"), autorange="reversed", scaleanchor="x"))
    return go.Figure(data=[heatmap], layout=house(layout, title, 520))
