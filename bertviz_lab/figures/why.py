"""Why-this-guess figures: one heat strip per attribution method over the tokens, the methods' agreement
matrix, and the deletion curves that test them.

`strips`, `agreement` and `deletion` draw an explanation's three figures, their titles and labels written here
once for the page and the notebook alike (the methods named by their titles); `heat_strips`, `agreement_matrix`
and `deletion_curves` are the charts under them, for any title.

Each method has its own units (a weight, a norm, a logit's share), so each strip is coloured against its own
largest value: signed methods on a diverging scale centred on 0 (blue: raises the score, red: lowers it),
unsigned ones from white to blue. The hover shows the raw value to 6 significant digits.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from bertviz_lab.figures import house, token_labels

DIVERGING = "RdBu"  # red for -1, white for 0, blue for +1 (the agreement matrix)
DIGITS = 6  # significant digits on hover
CELL_TEXT_MAX = 20  # print each value in its cell when the sentence is at most this many tokens
RANDOM = "random orders"  # the deletion chart's name for the random orders' mean and band
LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
LEGEND = dict(orientation="v", yanchor="top", y=1.0, x=1.02, xanchor="left", traceorder="normal",
              title=dict(text="dashed: never reads F"))


# One trace draws every row, so the rows share one colour scale: signed rows are placed on its lower half (RdBu,
# -1..1 -> 0..0.5) and unsigned rows on its upper half (white to blue, 0..1 -> UPPER..1). The jump at 0.5 is where
# the two scales meet; no row's value falls between 0.5 and UPPER.
UPPER = 0.502
_RDBU = ("#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de", "#4393c3", "#2166ac")
_BLUES = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c")
STRIP_SCALE = ([[0.5 * i / (len(_RDBU) - 1), c] for i, c in enumerate(_RDBU)]
               + [[UPPER + (1 - UPPER) * i / (len(_BLUES) - 1), c] for i, c in enumerate(_BLUES)])


def _scaled(values: np.ndarray, signed: bool) -> np.ndarray:
    """`values` over their largest magnitude (-1..1 when signed, 0..1 otherwise; all zeros stay zeros), placed
    on their half of STRIP_SCALE."""
    top = float(np.max(np.abs(values))) if len(values) else 0.0
    unit = values / top if top > 0 else np.zeros_like(values)
    return 0.25 * (unit + 1) if signed else UPPER + (1 - UPPER) * unit


def heat_strips(values: dict[str, np.ndarray], signed: dict[str, bool], labels: list[str], title: str) -> go.Figure:
    """One row per method (`values`: title -> (T,) raw values, top row first), one column per token (`labels`,
    HTML-escaped). Each row is coloured against its own largest |value|; the hover shows the raw value."""
    names, T = list(values), len(labels)
    raw = np.array([np.asarray(values[n], float) for n in names])  # (M, T)
    heatmap = go.Heatmap(
        z=np.array([_scaled(row, signed[n]) for n, row in zip(names, raw)]), x=labels, y=names, customdata=raw,
        zmin=0.0, zmax=1.0, colorscale=STRIP_SCALE, showscale=False, xgap=2, ygap=3,
        hovertemplate=f"%{{y}} · %{{x}}<br>method value %{{customdata:.{DIGITS}g}}<extra></extra>",
        text=[[f"{v:.2g}" for v in row] for row in raw] if T <= CELL_TEXT_MAX else None,
        texttemplate="%{text}" if T <= CELL_TEXT_MAX else None, textfont=dict(size=12))
    layout = dict(
        xaxis=dict(type="category", tickangle=-40 if T > 10 else 0, dtick=1, tickfont=dict(size=14 if T <= 24 else 11)),
        yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=14)))
    return go.Figure(data=[heatmap], layout=house(layout, title, 90 + 44 * len(names) + (60 if T > 10 else 30)))


def agreement_matrix(rho: np.ndarray, names: list[str], title: str) -> go.Figure:
    """(M, M) Spearman's rho between methods (NaN where it is undefined), -1..1 on a diverging scale."""
    heatmap = go.Heatmap(
        z=rho, x=names, y=names, zmin=-1.0, zmax=1.0, zmid=0.0, colorscale=DIVERGING, xgap=2, ygap=2,
        texttemplate="%{z:.2f}", textfont=dict(size=13), hoverongaps=False,
        hovertemplate="%{y} vs %{x}: ρ = %{z:.4f}<extra></extra>",
        colorbar=dict(title=dict(text="Spearman ρ", side="right"), thickness=16, len=0.8))
    layout = dict(xaxis=dict(type="category", tickangle=-35, tickfont=dict(size=13)),
                  yaxis=dict(type="category", autorange="reversed", tickfont=dict(size=13)))
    return go.Figure(data=[heatmap], layout=house(layout, title, 520))


def deletion_curves(curves: dict[str, np.ndarray], random: np.ndarray, dashed: set[str], y_title: str,
                    title: str) -> go.Figure:
    """p after removing 0..n words: one line per method (`curves`: title -> (n + 1,); `dashed`: the methods that
    never read F), and the random orders' mean with a band of ±1 standard deviation (`random`: (R, n + 1))."""
    traces = []
    if len(random):
        x = np.arange(random.shape[1])
        mean, sd = random.mean(0), random.std(0)
        traces += [  # the band is cut to 0..1, where a probability lives
            go.Scatter(x=x, y=np.minimum(mean + sd, 1), mode="lines", line=dict(width=0), hoverinfo="skip",
                       showlegend=False, name=f"{RANDOM}: mean + 1 sd"),
            go.Scatter(x=x, y=np.maximum(mean - sd, 0), mode="lines", line=dict(width=0), fill="tonexty",
                       fillcolor="rgba(120,120,120,0.22)", hoverinfo="skip", showlegend=False,
                       name=f"{RANDOM}: mean − 1 sd"),
            go.Scatter(x=x, y=mean, mode="lines", name=f"{RANDOM}: mean (band: ±1 sd)", line=dict(color="#555", width=3),
                       hovertemplate=f"{RANDOM} (mean): %{{y:.4f}} after %{{x}} removed<extra></extra>")]
    for i, (name, curve) in enumerate(curves.items()):
        traces.append(go.Scatter(
            x=np.arange(len(curve)), y=curve, mode="lines+markers", name=name,
            line=dict(color=LINE_COLORS[i % len(LINE_COLORS)], width=2, dash="dash" if name in dashed else "solid"),
            hovertemplate=f"{name}: %{{y:.4f}} after %{{x}} removed<extra></extra>"))
    layout = dict(xaxis=dict(title=dict(text="tokens masked, most important first"),
                             dtick=1, rangemode="tozero"),
                  yaxis=dict(title=dict(text=y_title), rangemode="tozero"), legend=LEGEND, hovermode="closest")
    return go.Figure(data=traces, layout=house(layout, title, 460))


def looked(layer: int, head: int | None) -> str:
    """Which attention the attention strip shows, as its title says it."""
    return f"attention at layer {layer}, " + ("mean over heads" if head is None else f"head {head}")


def strips(values: dict[str, np.ndarray], signed: dict[str, bool], tokens: list[str], layer: int,
           head: int | None) -> go.Figure:
    """Every method's answer for the `tokens` (`values` and `signed`: by method title), titled with the attention
    strip's `layer` and `head`."""
    return heat_strips(values, signed, token_labels(tokens),
                       f"Each method's answer, token by token ({looked(layer, head)})")


def agreement(rho: dict[str, dict[str, float | None]], removable: int) -> go.Figure:
    """Spearman's rho of every pair of methods (rows by method title, each row in the same order; None where it is
    undefined) over the `removable` tokens."""
    matrix = np.array([[np.nan if r is None else r for r in row.values()] for row in rho.values()])
    return agreement_matrix(matrix, list(rho),
                            f"Do the methods rank the tokens alike? Spearman ρ over {removable} tokens")


def deletion(curves: dict[str, np.ndarray], random: np.ndarray, dashed: set[str], follows: str) -> go.Figure:
    """The causal check's curves (by method title; `dashed`: those that never read F) against the `random`
    orders', following `follows` ("p(mat)", written as text: escaped here for plotly, which reads HTML)."""
    p = html.escape(follows)
    return deletion_curves(curves, random, dashed, p, f"{p} after each removal, in each method's order")
