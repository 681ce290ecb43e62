"""Plotly figure builders: numpy and plain Python in, `plotly.graph_objects.Figure` out.

They know nothing of torch or streamlit. Shared conventions live here: token
labels that stay distinct when a word repeats, and one house style.

The house style is written into each figure's layout (font, margins, the title at the left: a chart
drawn with Streamlit's theme replaces the template but keeps these) over a plotly template made
plotly's default when this package is imported. A default template is applied without being
validated again, where `template="plotly_white"` on each figure cost ~20 ms of deep copying and
validation (of ~25 ms in all for a heatmap), paid on every redraw of every session. And a builder
hands the whole layout to `go.Figure` (`house`), which validates it once: `update_layout` on the
finished figure costs 2-5 ms more.
"""

from __future__ import annotations

import html

import pandas as pd  # noqa: F401  (see below)
import plotly.graph_objects as go
import plotly.io as pio

# plotly's validators peek at sys.modules["pandas"] without importing it. In a server whose sessions start
# at once, one session may be importing pandas while another builds a figure: that one sees a half-made
# pandas and fails ("partially initialized module 'pandas' has no attribute 'Series'"). An `import`
# statement waits for the other thread's import to finish, so every figure comes after a whole pandas.

FONT = dict(family="Inter, Segoe UI, Helvetica, Arial, sans-serif", size=14)
SEQUENTIAL = "Blues"  # attention weights and probabilities: 0 white, 1 dark blue
MARGIN = dict(l=10, r=10, t=50, b=10)  # t: room for the title; 10 when a figure has none
TEMPLATE = "bertviz_lab"
TRACE_TYPES = ("bar", "heatmap", "scatter")  # the trace types our figures draw


def _house_template() -> go.layout.Template:
    """plotly_white, cut to what our 2-D charts use."""
    white = pio.templates["plotly_white"].to_plotly_json()
    layout = {key: value for key, value in white["layout"].items()
              if key not in ("geo", "mapbox", "polar", "scene", "ternary")}  # 3-D, maps, polar: never drawn
    return go.layout.Template(layout=layout, data={kind: white["data"][kind] for kind in TRACE_TYPES})


pio.templates[TEMPLATE] = _house_template()
pio.templates.default = TEMPLATE


def token_labels(tokens: list[str]) -> list[str]:
    """Axis labels: 'i token', so repeated tokens stay distinct categories; HTML-escaped,
    because plotly renders a subset of HTML in labels and user text must stay text."""
    return [f"{i} {html.escape(tok)}" for i, tok in enumerate(tokens)]


def house(layout: dict | None = None, title: str | None = None, height: int | None = None) -> dict:
    """`layout` with the house style, the title and the height: pass it to `go.Figure(layout=...)`."""
    out = {"font": FONT, "margin": dict(MARGIN, t=MARGIN["t"] if title else 10), **(layout or {})}
    if title:
        out["title"] = dict(text=title, x=0, xanchor="left")
    if height:
        out["height"] = height
    return out


def house_layout(fig: go.Figure, title: str | None = None, height: int | None = None) -> go.Figure:
    """The same on a figure built step by step (add_hline, subplots), at the cost of an update_layout."""
    fig.update_layout(**house(None, title, height))
    return fig
