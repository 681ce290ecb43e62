"""Syntax-across-a-corpus figures: each head's accuracy on a relation, a head's picks against the base rate, the
structural probe layer by layer, a sentence's gold tree against the probe's, and agreement by attractors.

Right and wrong are told apart by colour and by line (blue solid, orange dashed), never by red against green
alone, so the charts read the same to a colour-blind student and on a washed-out projector. Titles, labels and
words arrive as plain text and are HTML-escaped here: plotly draws a subset of HTML, and a treebank's relation
names and words are the uploader's (a DEPREL of "<b>x</b>" is shown as written, not in bold).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import SEQUENTIAL, house

RIGHT, WRONG, MISSED, LINEAR = "#2166ac", "#e66101", "#9e9e9e", "#555555"
CURVE_COLORS = ("#1f77b4", "#2ca02c", "#9467bd")  # UUAS, distance Spearman, root accuracy
PICKS, BASE = "this head's picks", "all word pairs (the base rate)"
CHANCE = "chance: 50% (half the subjects are plural)"  # the agreement line's label (corpus/agreement.py balances them)


def _text(title: str) -> str:
    """Plain text as plotly should draw it: its <, > and & escaped (the quotes need not be, outside a tag)."""
    return html.escape(title, quote=False)


def accuracy_heatmap(accuracy: np.ndarray, title: str) -> go.Figure:
    """(L, H) each head's accuracy on one relation and direction, 0..1, layers down the side, heads along."""
    L, H = accuracy.shape
    heatmap = go.Heatmap(
        z=accuracy, x=[f"head {h}" for h in range(H)], y=[f"layer {layer}" for layer in range(L)], zmin=0.0, zmax=1.0,
        colorscale=SEQUENTIAL, xgap=1, ygap=1, texttemplate="%{z:.0%}", textfont=dict(size=12),
        hovertemplate="%{y} · %{x}: %{z:.1%} right<extra></extra>",
        colorbar=dict(title=dict(text="right"), tickformat=".0%", thickness=14))
    layout = dict(xaxis=dict(type="category", side="top"), yaxis=dict(type="category", autorange="reversed"))
    return go.Figure(data=[heatmap], layout=house(layout, _text(title), 140 + 36 * L))


def share_bars(labels: list[str], shares: np.ndarray, bases: np.ndarray, title: str) -> go.Figure:
    """A head's share of picks per label beside each label's base rate, the first label on top."""
    names = [html.escape(label) for label in labels]
    bars = [go.Bar(y=names, x=values, orientation="h", name=name, marker_color=color,
                   text=[f"{v:.1%}" for v in values], textposition="outside", cliponaxis=False,
                   hovertemplate=f"%{{y}}: %{{x:.2%}} of {what}<extra></extra>")
            for name, values, color, what in ((PICKS, shares, RIGHT, "the head's picks"),
                                              (BASE, bases, MISSED, "all ordered word pairs"))]
    top = float(max(np.max(shares, initial=0), np.max(bases, initial=0)))
    layout = dict(barmode="group", bargap=0.25, legend=dict(orientation="h", y=-0.12, x=0),
                  xaxis=dict(tickformat=".0%", range=[0, top * 1.18 + 1e-9], title=dict(text="share")),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=13)))
    return go.Figure(data=bars, layout=house(layout, _text(title), 150 + 38 * len(labels)))


def probe_curves(curves: dict[str, np.ndarray], linear: float, title: str,
                 control: np.ndarray | None = None) -> go.Figure:
    """Per layer (0 = the embeddings), each score in `curves` (name -> (L + 1,)), the LINEAR baseline's UUAS as a
    dashed line and, when given, the UUAS of the same probe on random weights, dotted."""
    n = len(next(iter(curves.values())))
    x = np.arange(n)
    traces = [go.Scatter(x=x, y=values, mode="lines+markers", name=name, line=dict(color=color, width=3),
                         hovertemplate=f"{name} at layer %{{x}}: %{{y:.3f}}<extra></extra>")
              for (name, values), color in zip(curves.items(), CURVE_COLORS)]
    if control is not None:
        traces.append(go.Scatter(x=x, y=control, mode="lines+markers", name="UUAS, random weights (control)",
                                 line=dict(color=WRONG, width=2, dash="dot"),
                                 hovertemplate="UUAS on random weights at layer %{x}: %{y:.3f}<extra></extra>"))
    traces.append(go.Scatter(x=x, y=np.full(n, linear), mode="lines", name="UUAS of LINEAR (each word to the next)",
                             line=dict(color=LINEAR, width=2, dash="dash"),
                             hovertemplate="LINEAR baseline: %{y:.3f}<extra></extra>"))
    layout = dict(xaxis=dict(title=dict(text="layer (0: the embeddings' output)"), tickvals=list(x),
                             ticktext=["0 (emb.)", *map(str, x[1:])]),
                  yaxis=dict(range=[0, 1.02], title=dict(text="score (0 to 1)")),
                  legend=dict(orientation="v", x=1.02, y=1, xanchor="left"), hovermode="x unified")
    return go.Figure(data=traces, layout=house(layout, _text(title), 420))


def _arc(a: int, b: int, up: bool) -> tuple[str, float]:
    """An arch joining words a and b above them (or below), as an SVG path, and the height of its top. Its ends
    stand a little inside the two words, so that arches meeting at one word do not meet in one point."""
    left, right = sorted((a, b))
    sign = 1 if up else -1
    base, rise = sign * 0.22, sign * (0.25 + 0.2 * (right - left))
    x0, x1 = left + 0.12, right - 0.12
    inset = 0.3 * (x1 - x0)  # sloping sides: an arch, not a loop
    return (f"M {x0},{base} C {x0 + inset},{base + rise} {x1 - inset},{base + rise} {x1},{base}",
            base + 0.75 * rise)


def tree_arcs(words: list[str], gold: list[tuple[int, int]], predicted: list[tuple[int, int]],
              title: str) -> go.Figure:
    """The gold tree's edges as arcs above the words and the probe's below: an edge both share is blue and solid,
    a predicted edge the gold tree lacks orange and dashed, a gold edge the probe missed grey and dotted. Each
    arc's top carries a point with the edge's words (what the hover and the export read)."""
    found = {frozenset(e) for e in predicted}
    wanted = {frozenset(e) for e in gold}
    groups = {"gold edge the probe found": [], "gold edge the probe missed": [],
              "probe's edge, right": [], "probe's edge, wrong": []}
    shapes = []
    for edges, up in ((gold, True), (predicted, False)):
        for a, b in sorted(tuple(sorted(e)) for e in edges):
            right = frozenset((a, b)) in (found if up else wanted)
            name = (("gold edge the probe found" if right else "gold edge the probe missed") if up else
                    ("probe's edge, right" if right else "probe's edge, wrong"))
            color, dash = (RIGHT, "solid") if right else ((MISSED, "dot") if up else (WRONG, "dash"))
            path, top = _arc(a, b, up)
            shapes.append(dict(type="path", path=path, line=dict(color=color, width=2.5, dash=dash), layer="below"))
            groups[name].append(((a + b) / 2, top, f"{html.escape(words[a])} — {html.escape(words[b])}"))
    traces = [go.Scatter(x=list(range(len(words))), y=np.zeros(len(words)), mode="text", name="words",
                         text=[html.escape(w) for w in words], textfont=dict(size=15), hoverinfo="skip",
                         showlegend=False)]
    styles = {"gold edge the probe found": RIGHT, "gold edge the probe missed": MISSED,
              "probe's edge, right": RIGHT, "probe's edge, wrong": WRONG}
    for name, points in groups.items():
        x, y, text = zip(*points) if points else ((), (), ())
        traces.append(go.Scatter(x=list(x), y=list(y), text=list(text), mode="markers", name=name,
                                 marker=dict(color=styles[name], size=7, symbol="circle" if "right" in name or
                                             "found" in name else "x"),
                                 hovertemplate=f"{name}: %{{text}}<extra></extra>"))
    reach = max([abs(y) for p in groups.values() for _, y, _ in p], default=0.5) + 0.35
    layout = dict(shapes=shapes, xaxis=dict(visible=False, range=[-0.8, len(words) - 0.2]),
                  yaxis=dict(visible=False, range=[-reach, reach]), legend=dict(orientation="h", y=-0.02, x=0),
                  annotations=[dict(x=-0.8, y=reach * 0.85, text="gold tree", showarrow=False, xanchor="left"),
                               dict(x=-0.8, y=-reach * 0.85, text="the probe's tree", showarrow=False,
                                    xanchor="left")])
    return go.Figure(data=traces, layout=house(layout, _text(title), 240 + int(110 * reach)))


def agreement_bars(attractors: list[int], accuracy: np.ndarray, agreed: list[int], pairs: list[int],
                   title: str) -> go.Figure:
    """Accuracy per number of attractors (NaN: no pair) with "k of n" on each bar and chance as a line: 50%, since
    half the subjects are plural (corpus/agreement.py balances the pairs)."""
    labels = [f"{k} attractor{'' if k == 1 else 's'}" for k in attractors]
    bar = go.Bar(x=labels, y=accuracy, marker_color=RIGHT, textposition="outside", cliponaxis=False,
                 text=[f"{a} of {n}" if n else "no pairs" for a, n in zip(agreed, pairs)], customdata=pairs,
                 name="accuracy", hovertemplate="%{x}: %{y:.1%} right<br>pairs %{customdata}<extra></extra>")
    layout = dict(yaxis=dict(range=[0, 1.1], tickformat=".0%", title=dict(text="right form scored higher")),
                  xaxis=dict(type="category"), showlegend=False,
                  shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=0.5, y1=0.5,
                               line=dict(color=LINEAR, width=2, dash="dash"))],
                  annotations=[dict(xref="paper", x=1, y=0.5, text=CHANCE, showarrow=False, xanchor="right",
                                    yanchor="bottom", font=dict(color=LINEAR))])
    return go.Figure(data=[bar], layout=house(layout, _text(title), 400))
