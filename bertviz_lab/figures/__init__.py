"""Plotly figure builders: numpy and plain Python in, `plotly.graph_objects.Figure` out.

They know nothing of torch or streamlit. Shared conventions live here: token
labels that stay distinct when a word repeats, and one house layout.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=14)
SEQUENTIAL = "Blues"  # attention weights and probabilities: 0 white, 1 dark blue


def token_labels(tokens: list[str]) -> list[str]:
    """Axis labels: 'i token', so repeated tokens stay distinct categories; HTML-escaped,
    because plotly renders a subset of HTML in labels and user text must stay text."""
    return [f"{i} {html.escape(tok)}" for i, tok in enumerate(tokens)]


def house_layout(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    fig.update_layout(font=FONT, title=dict(text=title, x=0, xanchor="left") if title else None,
                      margin=dict(l=10, r=10, t=50 if title else 10, b=10), template="plotly_white",
                      **({"height": height} if height else {}))
    return fig
