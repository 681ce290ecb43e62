"""Figures of the Worked examples page: one bar per token for weights or probabilities.

The bars are the table's own numbers (lists, so the chart's JSON reads as plain numbers),
optionally next to a second series such as the figures a seed printed or a scaled variant.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from bertviz_lab.figures import house_layout, token_labels

EXACT_COLOR = "#1f77b4"
OTHER_COLOR = "#b0b0b0"


def _bars(x: list[str], y: list[float], name: str, color: str, digits: int | None) -> go.Bar:
    """digits=None: no number on the bars (the second series; hover still shows it)."""
    text = None if digits is None else [f"{v:.{digits}f}" for v in y]
    return go.Bar(x=x, y=y, name=html.escape(name), marker_color=color, text=text,
                  textposition="outside", textfont=dict(size=15), cliponaxis=False,
                  hovertemplate="%{x}<br>" + html.escape(name) + " %{y:.6f}<extra></extra>")


def weight_bars(tokens: list[str], values, title: str | None = None, *, name: str = "exact",
                other=None, other_name: str = "as printed", digits: int = 3,
                highlight: int | None = None) -> go.Figure:
    """Bars of `values` (weights or probabilities, 0..1) per token; `other` beside them in grey.

    highlight: a token index whose bar is drawn darker (the true word of an MLM example).
    """
    x = token_labels(list(tokens))
    y = [float(v) for v in values]
    exact = _bars(x, y, name, EXACT_COLOR, digits)
    if highlight is not None:
        exact.marker.color = ["#08306b" if i == highlight else EXACT_COLOR for i in range(len(y))]
    data = [exact]
    if other is not None:
        data.append(_bars(x, [float(v) for v in other], other_name, OTHER_COLOR, None))  # one number per bar pair
    fig = go.Figure(data)
    top = max([*y, *(float(v) for v in other)] if other is not None else y, default=0.0)
    fig.update_xaxes(type="category", tickfont=dict(size=16), tickangle=-30 if len(x) > 8 else 0)
    fig.update_yaxes(range=[0, max(top * 1.2, 0.05)], tickfont=dict(size=14))
    fig.update_layout(barmode="group", bargap=0.25, showlegend=other is not None,
                      legend=dict(orientation="h", yanchor="top", y=-0.15, xanchor="left", x=0))
    return house_layout(fig, title, height=380)
