"""The handout: one zip of the views this session drew, for a teacher to hand out or print.

Every chart drawn through `widgets.chart` and every table passed to `record_table` is recorded in session
state (HANDOUT: page script hash -> `View`), under the page that drew it. `handout_button`, called once at
the end of every full run, closes the page's view: what the page drew since the last close stays, what it
no longer draws goes; the other pages keep the view of their latest run. So a teacher can visit three pages
and download one zip. `handout_zip` (pure Python) writes it in memory: per page a folder with each chart as
PNG, SVG and CSV of its numbers, each table as CSV, and an index.html with no outside resources that shows
them all, each page's restore link above its charts. Without a browser for images the zip keeps the CSVs and
index.html, which says why the images are missing. At most MAX_FIGURES charts go in, the current page's first.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from bertviz_lab import files
from bertviz_lab.errors import ExportError
from bertviz_lab.figures import export
from bertviz_lab.ui.state import Classroom

HANDOUT = Classroom.HANDOUT.name  # session state: page script hash -> View, the most recently closed last
MAX_FIGURES = 40  # charts in one zip (each is drawn twice, ~0.3 s a drawing with a warm browser)
TABLE_ROWS, TABLE_COLUMNS = 60, 12  # the part of a table printed in index.html (the CSV has it all)
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


@dataclass(frozen=True)
class Page:
    """One page of the handout, as it was when its button was drawn."""
    title: str
    link: str | None
    charts: tuple[tuple[str, go.Figure], ...]
    tables: tuple[tuple[str, pd.DataFrame], ...]


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


# --- The zip, in plain Python ------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60] or "untitled"


def _title(fig: go.Figure, filename: str) -> str:
    text = fig.layout.title.text if fig.layout.title and fig.layout.title.text else filename
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def handout_zip(pages: Sequence[Page], draw: Callable[[go.Figure, str], bytes] = export.image,
                limit: int = MAX_FIGURES, made: datetime | None = None) -> bytes:
    """The zip's bytes: per page a folder `NN_title/` with `NN_file.png|svg|csv` for each chart and
    `table_name.csv` for each table, and index.html. `draw(fig, fmt)` makes the images; an ExportError from it
    leaves them out (the CSVs stay) and index.html says why. Charts past `limit` are left out, and it says so."""
    buffer, missing, left = io.BytesIO(), None, 0
    parts = []
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for n, page in enumerate(pages, 1):
            folder = f"{n:02d}_{_slug(page.title or f'page {n}')}"
            items = []
            for i, (filename, fig) in enumerate(page.charts, 1):
                if limit <= 0:
                    left += 1
                    continue
                limit -= 1
                stem = f"{folder}/{i:02d}_{_slug(filename)}"
                z.writestr(f"{stem}.csv", export.numbers_csv(fig))
                images = missing is None
                for fmt in ("png", "svg") if images else ():
                    try:
                        z.writestr(f"{stem}.{fmt}", draw(fig, fmt))
                    except ExportError as exc:
                        missing, images = str(exc), False
                        break
                items.append(_figure_html(stem, _title(fig, filename), filename, export.size(fig)[0], images))
            for name, frame in page.tables:
                path = f"{folder}/table_{_slug(name)}.csv"
                z.writestr(path, files.csv_text(frame))
                items.append(_table_html(path, name, frame))
            parts.append(_page_html(page, items))
        z.writestr("index.html", _index_html(parts, missing, left, made or datetime.now()))
    return buffer.getvalue()


def _figure_html(stem: str, title: str, filename: str, width: int, images: bool) -> str:
    name = html.escape(title)
    picture = (f'<img src="{stem}.png" alt="{name}" width="{width}">' if images
               else f'<p class="missing">{name} (no image)</p>')
    svg = f' · <a href="{stem}.svg">SVG</a>' if images else ""
    return (f"<figure>{picture}<figcaption>{html.escape(filename)}: <a href=\"{stem}.csv\">numbers (CSV)</a>{svg}"
            "</figcaption></figure>")


def _table_html(path: str, name: str, frame: pd.DataFrame) -> str:
    shown = frame.iloc[:TABLE_ROWS, :TABLE_COLUMNS].to_html(index=not isinstance(frame.index, pd.RangeIndex), border=0,
                                                           float_format=lambda v: f"{v:.6g}", na_rep="")
    cut = [f"the first {n} of {total} {what}" for n, total, what in
           ((TABLE_ROWS, len(frame), "rows"), (TABLE_COLUMNS, frame.shape[1], "columns")) if total > n]
    more = f" ({', '.join(cut)})" if cut else ""
    return f'<div class="table"><h3>{html.escape(name)}{more} · <a href="{path}">CSV</a></h3>{shown}</div>'


def _page_html(page: Page, items: list[str]) -> str:
    title = html.escape(page.title or "Page")
    link = (f'<p><a class="restore" href="{html.escape(page.link)}">Open this view in the lab</a> '
            f"(while the lab runs)</p>" if page.link else "<p>No link to this view.</p>")
    return f"<section><h2>{title}</h2>{link}{''.join(items)}</section>"


STYLE = """body{font-family:Inter,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}h1{margin-bottom:.2em}section{border-top:2px solid #1f5fa8;margin-top:2em}
figure{margin:1.5em 0;page-break-inside:avoid}img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption,.small{color:#555;font-size:.9em}.note{background:#fff4e5;border-left:4px solid #e0791b;padding:.6em 1em}
table{border-collapse:collapse;font-size:.85em}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}
.missing{color:#a33}.table{overflow-x:auto}"""


def _index_html(parts: list[str], missing: str | None, left: int, made: datetime) -> str:
    notes = []
    if missing:
        notes.append(f'<p class="note">The charts are here as numbers (CSV) only, without images: '
                     f"{html.escape(missing)}</p>")
    if left:
        notes.append(f'<p class="note">{left} more chart(s) were left out: a handout holds at most '
                     f"{MAX_FIGURES} charts, the current page's first.</p>")
    body = "".join(parts) or "<p>Nothing was drawn yet.</p>"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>bertviz_lab handout</title>'
            f"<style>{STYLE}</style></head><body><h1>bertviz_lab handout</h1>"
            f'<p class="small">Made {made:%Y-%m-%d %H:%M}. Each chart: its image, its numbers as CSV and as SVG '
            f"to print at any size.</p>{''.join(notes)}{body}</body></html>")
