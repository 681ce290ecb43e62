"""Export a figure: as an image (PNG, SVG) drawn by a headless Chromium kept warm, and its numbers as a table.

Images come from kaleido 1.x, which drives a Chrome or Chromium already on the machine through
choreographer: BROWSER_PATH if set, else the first of chrome / chromium / edge / brave on PATH or in
their usual install folders (it downloads nothing). One browser serves the whole process: the first
image starts it (~3 s), later ones reuse it (~0.2-0.5 s each), and it closes when the process exits.
Without a browser `image` raises `ExportError`, whose message is the sentence the user reads.

`numbers` reads any figure back into one tidy table, one row per heatmap cell or per bar / point,
so a chart's CSV holds exactly what the chart draws. Labels are HTML-unescaped (figures escape them
because plotly renders a subset of HTML); `numbers_csv` writes that table through `files.csv_text`, so a
label that starts like a formula (`=HYPERLINK(...)`) reaches a spreadsheet as text.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import html
import os
import re
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from bertviz_lab import files
from bertviz_lab.errors import ExportError

FORMATS = {"png": "image/png", "svg": "image/svg+xml"}  # what `image` draws, with its MIME type
PNG_SCALE = 2  # PNGs at twice the layout's pixels: sharp on a projector and in print
WIDTH = (1000, 1400)  # an image's width: 1.1 x its height, within these bounds (a page column is ~1000 px)
HEIGHT = 450  # plotly's default, for a figure that sets none
EDGE = 16  # pixels of white added around an exported chart
START_S, RENDER_S = 60, 90  # seconds: a cold browser start, one image
NO_BROWSER = ("PNG/SVG export needs Chrome or Chromium on the machine running the lab; the camera button in the "
              "chart's toolbar still saves a PNG.")


# --- Images -------------------------------------------------------------------------------------
def browser_path() -> str | None:
    """The browser kaleido would drive (BROWSER_PATH first), or None when there is none to run."""
    from choreographer.browsers.chromium import Chromium  # ~0.1 s of imports: paid at the first export

    path = Chromium.find_browser(skip_local=False)
    return path if path and Path(path).is_file() and os.access(path, os.X_OK) else None


def check() -> str:
    """The browser's path; `ExportError` with the sentence to show when there is none."""
    try:
        path = browser_path()
    except ImportError as exc:  # a virtual environment made before kaleido joined requirements.txt
        raise ExportError(f"PNG/SVG export needs the kaleido package ({exc}): pip install -r requirements.txt. "
                          "The camera button in the chart's toolbar still saves a PNG.") from exc
    if path is None:
        raise ExportError(NO_BROWSER)
    return path


def size(fig: go.Figure) -> tuple[int, int]:
    """(width, height) in layout pixels: the figure's own, else its height (or plotly's) and a width to match."""
    height = int(fig.layout.height or HEIGHT)
    return int(fig.layout.width or np.clip(round(1.1 * height), *WIDTH)), height


def image(fig: go.Figure, fmt: str = "png") -> bytes:
    """The figure as a PNG (at PNG_SCALE) or an SVG, `size(fig)` layout pixels, drawn by the warm browser."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {sorted(FORMATS)}, not {fmt!r}")
    width, height = size(fig)
    opts = dict(format=fmt, width=width, height=height, scale=PNG_SCALE if fmt == "png" else 1)
    return _BROWSER.render(_framed(fig.to_dict()), opts)  # a plain dict: the browser thread never touches fig


def _framed(spec: dict) -> dict:
    """EDGE more pixels of margin on the left, right and bottom, the title moved in by as much: on a page of
    its own a chart needs the room that the app's page gives it."""
    layout = spec.setdefault("layout", {})
    margin = layout.get("margin") or {}
    layout["margin"] = {**margin, **{side: margin.get(side, 10) + EDGE for side in ("l", "r", "b")}}
    if isinstance(layout.get("title"), dict):
        layout["title"]["pad"] = {**layout["title"].get("pad", {}), "l": EDGE}
    return spec


def close() -> None:
    """Stop the warm browser (the next image starts a new one)."""
    _BROWSER.close()


class _Browser:
    """One kaleido (one Chromium, one tab) on an event loop of its own thread, shared by every session;
    renders queue for the tab. A render that fails closes the browser, so the next one starts afresh."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kaleido = None
        atexit.register(self.close)

    def render(self, spec: dict, opts: dict) -> bytes:
        with self._lock:
            if self._kaleido is None:
                self._start(check())
            loop, kaleido = self._loop, self._kaleido
        future = asyncio.run_coroutine_threadsafe(kaleido.calc_fig(spec, opts=opts), loop)
        try:
            return future.result(RENDER_S)
        except Exception as exc:  # a crashed or stuck browser: start a new one next time
            future.cancel()
            self.close()
            raise ExportError(f"The image could not be drawn ({type(exc).__name__}: {exc}); try again.") from exc

    def _start(self, path: str) -> None:
        import kaleido

        async def open_browser():
            browser = kaleido.Kaleido(path=path, n=1, timeout=RENDER_S, mathjax=False)  # no MathJax: no CDN
            await browser.open()
            return browser

        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="kaleido", daemon=True).start()
        try:
            self._kaleido = asyncio.run_coroutine_threadsafe(open_browser(), loop).result(START_S)
        except Exception as exc:
            loop.call_soon_threadsafe(loop.stop)
            raise ExportError(f"{NO_BROWSER} ({path} did not start: {type(exc).__name__}: {exc})") from exc
        self._loop = loop

    def close(self) -> None:
        with self._lock:
            loop, kaleido, self._loop, self._kaleido = self._loop, self._kaleido, None, None
        if loop is None:
            return
        with contextlib.suppress(Exception):  # closing a browser that already died
            asyncio.run_coroutine_threadsafe(kaleido.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)


_BROWSER = _Browser()


# --- Numbers ------------------------------------------------------------------------------------
def numbers(fig: go.Figure) -> pd.DataFrame:
    """Every number the figure draws, one row per heatmap cell or per bar / point: `panel` (the subplot's
    title, when there are several), `trace` (its legend name), `x`, `y`, then `value` (a heatmap's colour),
    `text`, `error`, the hover's extra number (named as the hover names it) and `x label` / `y label` where
    an axis shows other text than the values (a step number for frame 3)."""
    panels = _panels(fig)
    frames = []
    for trace in fig.data:
        frame = _cells(trace) if trace.type == "heatmap" else _points(trace)
        for letter in "xy":
            ticks = _ticks(fig, getattr(trace, f"{letter}axis", None) or letter)
            if ticks:
                frame[f"{letter} label"] = [ticks.get(v, "") for v in frame[letter]]
        frame.insert(0, "trace", _text(trace.name) if trace.name else "")
        if panels:
            frame.insert(0, "panel", panels.get(_axes(trace), ""))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["trace", "x", "y"])
    table = pd.concat(frames, ignore_index=True)
    empty = [c for c in table.columns if c not in ("x", "y") and table[c].replace("", np.nan).isna().all()]
    return table.drop(columns=empty)


def numbers_csv(fig: go.Figure) -> str:
    """`numbers(fig)` as the CSV a chart's Export menu and the handout give (text cells made inert)."""
    return files.csv_text(numbers(fig), index=False)


def _text(value):
    return html.unescape(value) if isinstance(value, str) else value


def _labels(values, n: int) -> list:
    """An axis' values as a list of n (0..n-1 where the trace gives none), strings unescaped."""
    if values is None:
        return list(range(n))
    return [_text(v.item() if isinstance(v, np.generic) else v) for v in values]


def _per_point(values, shape: tuple[int, ...]) -> np.ndarray | None:
    """A per-point array (text, customdata) flattened to one entry a point; None when it is not one."""
    if values is None or isinstance(values, str):
        return None
    array = np.asarray(values, dtype=object)
    if array.shape[:len(shape)] != shape:
        return None
    if array.ndim > len(shape):  # several numbers a point (customdata[0], [1]): one text
        array = np.array([" | ".join(map(str, row)) for row in array.reshape(int(np.prod(shape)), -1)], dtype=object)
    return np.array([_text(v) for v in array.ravel()], dtype=object)


def _custom_name(trace) -> str:
    """What the hover calls %{customdata}: 'logit' in '<br>logit %{customdata:.4f}'; else 'hover'."""
    found = re.search(r"([^>:,{}]*)%\{customdata", trace.hovertemplate or "")
    name = found.group(1).strip() if found else ""
    return html.unescape(name) if name and not name.startswith("%") else "hover"


def _extras(trace, frame: dict, shape: tuple[int, ...]) -> dict:
    for column, values in (("text", trace.text), (_custom_name(trace), trace.customdata)):
        flat = _per_point(values, shape)
        if flat is not None and not ("text" in frame and np.array_equal(frame["text"], flat)):
            frame[column] = flat
    return frame


def _cells(trace) -> pd.DataFrame:
    z = np.asarray(trace.z, dtype=float)
    z = z.reshape(1, -1) if z.ndim == 1 else z
    rows, cols = z.shape
    x, y = _labels(trace.x, cols), _labels(trace.y, rows)
    frame = {"x": np.tile(np.array(x, dtype=object), rows), "y": np.repeat(np.array(y, dtype=object), cols),
             "value": z.ravel()}
    return pd.DataFrame(_extras(trace, frame, (rows, cols)))


def _points(trace) -> pd.DataFrame:
    x, y = getattr(trace, "x", None), getattr(trace, "y", None)
    n = len(x) if x is not None else len(y) if y is not None else 0
    frame = {"x": _labels(x, n), "y": _labels(y, n)}
    error = getattr(trace, "error_y", None)
    if error is not None and error.array is not None and len(error.array) == n:
        frame["error"] = list(error.array)
    return pd.DataFrame(_extras(trace, frame, (n,)))


def _axes(trace) -> tuple[str, str]:
    return getattr(trace, "xaxis", None) or "x", getattr(trace, "yaxis", None) or "y"


def _axis(fig: go.Figure, name: str):
    """'x2' -> layout.xaxis2."""
    return fig.layout[f"{name[0]}axis{name[1:]}"]


def _ticks(fig: go.Figure, name: str) -> dict:
    """value -> shown text, for an axis that labels its ticks itself (tickvals + ticktext)."""
    axis = _axis(fig, name)
    if axis.tickvals is None or axis.ticktext is None:
        return {}
    return {v: _text(t) for v, t in zip(axis.tickvals, axis.ticktext)}


def _panels(fig: go.Figure) -> dict[tuple[str, str], str]:
    """(xaxis, yaxis) -> the title above that subplot (a paper annotation centred at its top); {} for one panel."""
    pairs = {_axes(trace) for trace in fig.data}
    if len(pairs) < 2:
        return {}
    notes = [a for a in fig.layout.annotations or () if a.xref == "paper" and a.yref == "paper" and a.text]
    out = {}
    for x, y in pairs:
        (x0, x1), (_, y1) = _axis(fig, x).domain or (0, 1), _axis(fig, y).domain or (0, 1)
        above = [a for a in notes if x0 - 1e-6 <= a.x <= x1 + 1e-6 and abs(a.y - y1) < 0.02]
        out[(x, y)] = _text(above[0].text) if above else ""
    return out if any(out.values()) else {}
