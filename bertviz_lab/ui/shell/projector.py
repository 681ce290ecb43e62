"""Projector view: one switch that makes the app readable from the back of a room at 1024 x 768.

Text, tokens, tables and charts get larger and darker (black on white, captions no longer grey), the
page uses the whole width, and the sidebar folds away: the page menu moves to the top bar (a dropdown per
section) and a small toolbar at the top of the page holds "Share" and "Leave projector view". The folded sidebar
still opens with its arrow, so every control keeps working. The switch is remembered in the link
(`?projector=1`), so a reload keeps it; links shared from it leave it out (ui/shell/share.py).
"""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import Classroom

# A table wider than its box must say so. Streamlit's grid (glide-data-grid) draws on a canvas inside a scroller,
# .dvn-scroller, whose scrollbars it makes thin and transparent until the pointer hovers: on a projector nobody
# hovers, and columns past the right edge vanish without a hint. This gives every grid's scroller a classic,
# always-drawn scrollbar with a dark thumb (Chromium and Firefox read the standard properties; the webkit ones
# are for Safari). A table that fits draws no horizontal bar. Drawn on every page by projector.apply().
SCROLL_CUE = """<style>
[data-testid="stDataFrame"] .dvn-scroller {
  scrollbar-width: auto !important; scrollbar-color: #5f5f5f #e4e4e4 !important; }
[data-testid="stDataFrame"] .dvn-scroller::-webkit-scrollbar { height: 14px; width: 14px; background: #e4e4e4; }
[data-testid="stDataFrame"] .dvn-scroller::-webkit-scrollbar-thumb { background: #5f5f5f; border-radius: 7px; }
</style>"""

ON, SEEN = Classroom.PROJECTOR, Classroom.PROJECTOR_READ
FONT, SMALL_FONT, TITLE_FONT = 20, 17, 24  # chart text in projector view, in px
# Streamlit sizes its text in rem: a larger root size scales text, widgets and spacing together. Tables
# are drawn on a canvas in px, so their boxes are zoomed instead, at a width that zooms back to the page's
# (a wide table scrolls inside its box, never off the page). Captions lose their grey (Streamlit draws
# them at 60% opacity).
CSS = """<style>
html { font-size: 22px; }
.stMain .block-container { max-width: 100%; padding: 4.4rem 1.2rem 3rem 1.2rem; }
.stApp, .stMain { background: #ffffff; color: #000000; }
.stMain [data-testid="stMarkdownContainer"] p, .stMain [data-testid="stMarkdownContainer"] li { color: #000; }
.stMain [data-testid="stCaptionContainer"], [data-testid="stPopoverBody"] [data-testid="stCaptionContainer"] { opacity: 1; }
.stMain [data-testid="stCaptionContainer"], .stMain [data-testid="stCaptionContainer"] *,
[data-testid="stPopoverBody"] [data-testid="stCaptionContainer"] * { color: #1b1b1b !important; }
.stMain [data-testid="stWidgetLabel"] p { color: #000; font-weight: 600; }
.stMain [data-testid="stElementContainer"]:has([data-testid="stDataFrame"]) { zoom: 1.25; max-width: calc(100% / 1.25); }
.stMain code { color: #000; }
.stMain h1 { font-size: 2.0rem; padding-top: 0.2rem; }
.stMain [data-testid="stRadio"] label [data-testid="stMarkdownContainer"] p { font-size: 1rem; }
</style>"""


def on() -> bool:
    return bool(state.get(ON))


def read_link() -> None:
    """Take ?projector=1 from the session's first URL (later URLs are the app's own)."""
    if state.get(SEEN):
        return
    state.put(SEEN, True)
    if st.query_params.get("projector", "").lower() in ("1", "true", "on"):
        state.put(ON, True)


def apply() -> None:
    """Fold or unfold the sidebar to match the switch and, when on, enlarge everything; on every page, give wide tables
    a visible scrollbar (SCROLL_CUE). Call it first."""
    st.set_page_config(initial_sidebar_state="collapsed" if on() else "auto")
    st.html(SCROLL_CUE)  # in either view: a table wider than its box shows its scrollbar
    if on():
        st.html(CSS)


def switch(where=st.sidebar) -> None:
    where.toggle("Projector view", key=ON.name, help="Large, high-contrast text and charts for the back of "
                 "the room; the sidebar folds away (its arrow, top left, opens it again).")


def leave() -> None:
    state.put(ON, False)


def enlarge(fig: go.Figure, ticks: bool = True) -> go.Figure:
    """A copy of `fig` with text sized for a projector (the original may be cached and shared). `ticks=False`
    keeps the figure's own tick labels (a grid of small squares whose token labels must fit beside them)."""
    if not on():
        return fig
    big = go.Figure(fig)
    big.update_layout(font_size=FONT, font_color="#000", title_font_size=TITLE_FONT, legend_font_size=SMALL_FONT,
                      hoverlabel_font_size=FONT)
    tick = {"tickfont_size": SMALL_FONT} if ticks else {}
    big.update_xaxes(title_font_size=FONT, automargin=True, **tick)
    big.update_yaxes(title_font_size=FONT, automargin=True, **tick)
    big.update_annotations(font_size=SMALL_FONT)
    big.update_traces(textfont_size=SMALL_FONT, selector=lambda t: "textfont" in t)
    if big.layout.height:
        big.update_layout(height=int(big.layout.height * 1.15))
    return big
