"""The handout's zip, in plain Python: per page a folder with each chart as PNG, SVG and CSV of its numbers, each
table as CSV, and an index.html with no outside resources that shows them all, each page's restore link above its
charts. Without a browser for images (`export.image` raises ExportError) the zip keeps the CSVs and index.html,
which says why the images are missing. At most MAX_FIGURES charts go in, the first pages' first.

What goes in is a list of `Page`s; ui/shell/handout.py records them as a session draws and offers the download.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd
import plotly.graph_objects as go

from bertviz_lab import files
from bertviz_lab.errors import ExportError
from bertviz_lab.figures import export

MAX_FIGURES = 40  # charts in one zip (each is drawn twice, ~0.3 s a drawing with a warm browser)
TABLE_ROWS, TABLE_COLUMNS = 60, 12  # the part of a table printed in index.html (the CSV has it all)


@dataclass(frozen=True)
class Page:
    """One page of the handout, as it was when its button was drawn."""
    title: str
    link: str | None
    charts: tuple[tuple[str, go.Figure], ...]
    tables: tuple[tuple[str, pd.DataFrame], ...]


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
