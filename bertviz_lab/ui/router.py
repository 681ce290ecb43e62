"""Keeps every request inside app.py's router, even a deep link that is a server's first request, and lets a
page end early without ending the app's own work after it (the link and the share box, app.py)."""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import NoReturn

import streamlit as st
import torch

from bertviz_lab.errors import GpuMemoryError

_routed = threading.local()  # each session's script runs in a thread of its own


class PageEnd(Exception):
    """A page has nothing more to draw (`end_page`); app.py's `routing()` catches it."""


OUT_OF_MEMORY = ("The GPU ran out of memory for this page (other models or runs hold the rest of it): choose CPU "
                 "under Device in the sidebar, or try a shorter text.")


@contextlib.contextmanager
def routing():
    """Run a page under the router: `end_page` inside it ends the page, not the whole script run; a GPU that runs
    out of memory ends it with a sentence saying what to do, and its unused memory is given back."""
    _routed.on = True
    out_of_memory = None
    try:
        yield
    except PageEnd:
        pass
    except (torch.OutOfMemoryError, GpuMemoryError) as exc:
        out_of_memory = f"{exc}." if isinstance(exc, GpuMemoryError) else OUT_OF_MEMORY
    finally:
        _routed.on = False
    if out_of_memory:  # outside the handler, whose traceback holds the failed pass's tensors
        gc.collect()
        torch.cuda.empty_cache()
        st.error(out_of_memory[0].upper() + out_of_memory[1:], icon=":material/memory:")


def end_page() -> NoReturn:
    """Stop drawing this page, as `st.stop()` would. Under app.py's router only the page ends, so what app.py
    draws after it (the link that restores the view, the share box) still runs: after `st.stop()` every
    Streamlit call of the run raises again. A page run on its own (AppTest of one page) gets `st.stop()`."""
    if getattr(_routed, "on", False):
        raise PageEnd
    st.stop()


def ensure_router() -> None:
    """Leave Streamlit's legacy pages/-folder mode if this server started in it.

    A server whose first request is a deep link (say /attention, bookmarked) runs the
    page file directly with an automatic menu built from pages/, because app.py has not
    yet told Streamlit about st.navigation. Turning that flag off and rerunning sends the
    same URL through app.py's router, with its menu, its sidebar and its wide layout.
    So app.py calls this first, and so does every page (through `models.active_model`
    or directly): in that first request the page file is the only code that runs.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a Streamlit without this internal: nothing to fix
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()
