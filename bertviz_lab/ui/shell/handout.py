"""The handout: one zip of the views this session drew, for a teacher to hand out or print.

Every chart drawn through `widgets.chart` and every table passed to `record_table` is recorded in session
state (HANDOUT: page script hash -> `View`), under the page that drew it. `handout_button`, called once at
the end of every full run, closes the page's view: what the page drew since the last close stays, what it
no longer draws goes; the other pages keep the view of their latest run. So a teacher can visit three pages
and download one zip, written when clicked by figures/handout.py (`handout_zip`: per page a folder with
each chart as PNG, SVG and CSV, each table as CSV, and an index.html that shows them all). At most
MAX_FIGURES charts go in, the current page's first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from bertviz_lab.figures.handout import MAX_FIGURES, Page, handout_zip
from bertviz_lab.ui.shell.state import Classroom

HANDOUT = Classroom.HANDOUT.name  # session state: page script hash -> View, the most recently closed last
ZIP_NAME = "bertviz_lab_handout.zip"


@dataclass
class View:
    """What one page drew: charts (key -> (file name, figure)) and tables (name -> frame), in drawing order."""
    title: str = ""
    link: str | None = None
    charts: dict[str, tuple[str, go.Figure]] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    drawn: set[str] = field(default_factory=set)  # keys recorded since the view was last closed

    def close(self, title: str, link: str | None) -> None:
        """The end of a full run: keep only what it drew."""
        self.title, self.link = title, link
        self.charts = {k: v for k, v in self.charts.items() if k in self.drawn}
        self.tables = {k: v for k, v in self.tables.items() if "table:" + k in self.drawn}
        self.drawn = set()


def _view() -> View | None:
    """The view of the page this run draws (None outside a Streamlit run)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    views = st.session_state.setdefault(HANDOUT, {})
    return views.setdefault(ctx.page_script_hash, View())


def record_chart(fig: go.Figure, filename: str, key: str) -> None:
    """Called by `widgets.chart` for every chart it draws (`key` is unique on the page)."""
    view = _view()
    if view is not None:
        view.charts.pop(key, None)  # re-inserted: the order is this run's drawing order
        view.charts[key] = (filename, fig)
        view.drawn.add(key)


def record_table(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Put a table in the handout as `name`.csv; returns `frame`, so it can wrap the table it draws."""
    view = _view()
    if view is not None:
        view.tables.pop(name, None)
        view.tables[name] = frame
        view.drawn.add("table:" + name)
    return frame


def handout_button(where, page_title: str, link: str | None) -> None:
    """Draw "Download handout (.zip)" in `where` (a container, the sidebar, a popover). Call it once at the end
    of every full run, after the page has drawn: it closes this page's view as `page_title` with its restore
    `link` (None: none to give). The zip is built when clicked (the app does not rerun): the views of this
    page and of every other page this session visited, the current page first."""
    views = st.session_state.setdefault(HANDOUT, {})
    ctx = get_script_run_ctx()
    current = ctx.page_script_hash if ctx is not None else ""
    views.setdefault(current, View()).close(page_title, link)
    views[current] = views.pop(current)  # the most recent last
    pages = [Page(v.title, v.link, tuple(v.charts.values()), tuple(v.tables.items()))
             for v in reversed(views.values()) if v.charts or v.tables]
    charts = sum(len(p.charts) for p in pages)
    where.download_button(
        "Download handout (.zip)", partial(handout_zip, pages), file_name=ZIP_NAME, mime="application/zip",
        key="handout.zip", on_click="ignore", icon=":material/folder_zip:", disabled=not pages,
        help=f"{len(pages)} page(s), {charts} chart(s): each chart as PNG, SVG and CSV, the tables as CSV, and an "
             f"index.html that shows them all{f' (the first {MAX_FIGURES} charts)' if charts > MAX_FIGURES else ''}.")
