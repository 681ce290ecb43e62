"""Keeps every request inside app.py's router, even a deep link that is a server's first request."""

from __future__ import annotations

import streamlit as st


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
