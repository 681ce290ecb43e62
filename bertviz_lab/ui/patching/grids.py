"""The "Where is the answer made?" page's grids: which one and in which direction, each computed once per (model,
ask, grid, direction, head) for the whole class with a progress bar, drawn as a heatmap with exact values on hover,
the sentences written from its numbers, its CSV; and the checks on the residual grid, each shown passed or failed.

Only the grid picked is computed. Grids of one recorded pair run one at a time (`_HOOKED`): they hook the same
private copy of the model (explain/patching.py's `twin`), which two threads must not hook at once.
"""

from __future__ import annotations

import threading
from functools import partial

import pandas as pd
import streamlit as st

from bertviz_lab import files
from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.explain.patch_grids import DIRECTIONS, Grid
from bertviz_lab.figures import patching as fpa
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.handout import record_table
from bertviz_lab.ui.shell.models import model_key
from bertviz_lab.ui.shell.state_patching import VIEWS, Patch as K
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa

GRIDS = once.Slots("Patching", keep=32)
_HOOKED = threading.Lock()
VIEW_TITLES = {"resid": "Residual stream", "blocks": "Attention & feed-forward blocks", "heads": "Heads",
               "qkv": "One head's query, key, value"}
DIRECTION_LABELS = {"denoise": "Denoise: clean → corrupted", "noise": "Noise: corrupted → clean"}
KINDS = {"resid": ("resid",), "blocks": ("attn", "mlp"), "heads": ("heads",), "qkv": ("qkv",)}  # view -> its grids
DIRECTION_TITLES = {"denoise": "Clean into corrupted (denoising)", "noise": "Corrupted into clean (noising)"}
GRID_NAMES = {"resid": "residual stream", "attn": "attention blocks", "mlp": "feed-forward blocks", "heads": "heads",
              "qkv": "query, key and value"}


def _bar(news: tuple[float, str]) -> None:
    st.progress(*news)


def pickers(patching: vpa.Patching) -> tuple[str, str, tuple[int, int] | None]:
    """The grid, the direction (with what it asks under it) and, for the query/key/value grid, the head."""
    state.keep_valid(K.GRID, VIEWS)
    state.keep_valid(K.DIRECTION, DIRECTIONS)
    view = st.segmented_control("Grid", VIEWS, format_func=VIEW_TITLES.get, key=K.GRID.name, required=True,
                                wrap=True)
    direction = st.segmented_control("Direction", DIRECTIONS, format_func=DIRECTION_LABELS.get, key=K.DIRECTION.name,
                                     required=True, wrap=True)
    st.caption(plain(vpa_read.DIRECTION_WORDS[direction][0].upper() + vpa_read.DIRECTION_WORDS[direction][1:]))
    if view != "qkv":
        return view, direction, None
    state.keep_valid(K.LAYER, range(patching.layers))
    state.keep_valid(K.HEAD, range(patching.heads))
    left, right = st.columns(2)
    layer = left.segmented_control("Layer", list(range(patching.layers)), format_func=lambda i: str(i + 1),
                                   key=K.LAYER.name, required=True, wrap=True)
    head = right.segmented_control("Head", list(range(patching.heads)), format_func=lambda i: str(i + 1),
                                   key=K.HEAD.name, required=True, wrap=True)
    return view, direction, (layer, head)


def grid(ckpt: Checkpoint, patching: vpa.Patching, kind: str, direction: str,
         head: tuple[int, int] | None = None) -> Grid:
    """One grid, computed once for the class, a progress bar while it runs."""
    def work(report: once.Report) -> Grid:
        with _HOOKED:
            return vpa.grid(patching, kind, direction, head,
                            progress=lambda done, what: report((done, f"Patching the {what}: {done:.0%}")))

    slot = GRIDS.slot((model_key(ckpt), patching.ask, kind, direction, head))
    return once.follow(slot, work, _bar, first=(0.0, f"Patching the {GRID_NAMES[kind]}…"))


def title(g: Grid) -> str:
    """The heatmap's title: what was patched and which way (the colour bar says what the colour is); short enough
    for one line on a 1024-wide projector, where plotly does not wrap a title."""
    what = {"resid": "The residual stream, depth by position", "attn": "Attention blocks, layer by position",
            "mlp": "Feed-forward blocks, layer by position", "heads": "Every head's output, layer by head"}.get(g.kind)
    if what is None:
        layer, head = g.head
        what = f"Head {layer + 1}.{head + 1}'s query, key and value, by position"
    return f"{what} · {DIRECTION_TITLES[g.direction].lower()}"


def draw(patching: vpa.Patching, grids: list[Grid], view: str) -> None:
    """Each grid: what exactly is patched, its heatmap, its sentences; then one CSV of them all."""
    for g in grids:
        st.caption("Patched: " + plain(vpa_read.KIND_WORDS[g.kind]) + ".")
        cols = fpa.columns(g.kind, patching.tokens, patching.heads)
        chart(fpa.grid_heatmap(g.values, g.f, g.rows, cols, title(g), metric=f"F = {patching.metric}"),
              f"patching_{g.kind}_{g.direction}")
        st.markdown("\n".join(f"- {plain(s)}" for s in vpa_read.sentences(patching, g)))
    table = record_table(pd.DataFrame([r for g in grids for r in vpa_read.rows(patching, g)]),
                         f"patching_{view}_{grids[0].direction}")
    st.download_button("Download this grid's numbers (CSV)", partial(files.csv_text, table),
                       file_name=f"patching_{view}_{grids[0].direction}.csv", mime="text/csv", on_click="ignore",
                       icon=":material/table:")


def checks(patching: vpa.Patching, resid: Grid) -> list[vpa_read.Check]:
    """The checks on the residual grid, each drawn as passed or failed with its detail; returned."""
    found = vpa_read.checks(patching, resid)
    st.markdown("\n".join(check_line(c) for c in found))
    return found


def check_line(check: vpa_read.Check) -> str:
    """One check as a Markdown list item: passed in green or failed in red, then what it compared."""
    mark = ":green[:material/check_circle: **passed**]" if check.passed else ":red[:material/cancel: **failed**]"
    name = check.name[0].upper() + check.name[1:]
    return f"- {mark} {plain(name)}: {plain(check.detail)}."
