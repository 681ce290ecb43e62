"""Share this view: the link that restores it (ui/shell/links.py) as text to copy and as a QR code.

Drawn at the foot of the sidebar, or in projector view in the toolbar at the top of the page, after the
page has run, so the link holds everything the page now shows. In classroom mode the owner's browser
is on localhost, which students cannot reach: the link then names this machine's address on the room's
network, as the "Join this class" box does. The projector switch is left out: a student's laptop
should not open in projector view.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import streamlit as st

from bertviz_lab import classroom
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.state import Classroom

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")  # as urlsplit().hostname gives them: IPv6 without brackets


def link(page: str, query: dict) -> str | None:
    """The address that restores this view; None outside a browser (AppTest) or without a network in
    classroom mode."""
    try:
        base = st.context.url
    except Exception:  # noqa: BLE001 - no script context
        base = None
    if not isinstance(base, str) or not base.startswith("http"):
        return None
    parts = urlsplit(base)
    root = parts.path.rstrip("/")  # the app's own path: st.context.url may end with the page's
    if page and root.endswith(f"/{page}"):
        root = root[: -len(page) - 1]
    origin = f"{parts.scheme}://{parts.netloc}"
    if classroom.classroom_mode() and parts.hostname in LOCAL_HOSTS:
        origin = classroom.join_url(parts.port or classroom.DEFAULT_PORT)
        if origin is None:
            return None
    params = {name: value for name, value in query.items() if name != "projector"}
    address = f"{origin}{root}/{page}"
    return address + (f"?{urlencode(params, doseq=True)}" if params else "")


def qr_code(url: str) -> str | None:
    """The QR code of `url` as SVG; None if the link holds more than a QR code can."""
    try:
        return classroom.qr_svg(url)
    except Exception:  # noqa: BLE001 - segno's DataOverflowError: a link of several long sentences
        return None


QR_IN_POPOVER = 300  # px: the projector toolbar's popover is about 536 px tall at 1024 x 768; this fits below the link
QR_FULL_SCREEN = 520  # px: what a 1024 x 768 screen holds below the dialog's title; scanned from the back of a room


@st.dialog("Scan to open this view", width="large")
def full_screen(svg: str) -> None:
    """The QR code as large as the screen allows, over the page until closed (its X, or Esc)."""
    st.container(horizontal_alignment="center").image(svg, width=QR_FULL_SCREEN)


def _ask_full_screen() -> None:
    """The button's callback, before the run: close the Share popover (it would cover the dialog), open the dialog."""
    state.put(Classroom.QR_SHOW, True)
    if Classroom.SHARE_OPEN.name in st.session_state:
        state.put(Classroom.SHARE_OPEN, False)


def share_box(where, page: str, query: dict, left_out: dict[str, str], popover: bool = False) -> str | None:
    """The link, its QR code, a button that shows the code full screen, and what the link leaves out (name -> the
    sentence to show, from links.query); returns the link (None where there is none). popover: drawn in the
    projector toolbar's popover, where the code is QR_IN_POPOVER wide so it is seen whole without scrolling."""
    url = link(page, query)
    if url is None:
        where.caption("The link to this view appears here when the app is open in a browser"
                      + (" on a network." if classroom.classroom_mode() else "."))
        return None
    where.caption("Open this link, or scan the code, to see this same view: sentences, masks, layer, head, "
                  "token and options.")
    where.code(url, language=None, wrap_lines=True)  # its copy button copies the whole link
    svg = qr_code(url)
    if svg is None:
        where.caption("This link is too long for a QR code: share it as text.")
    else:
        code, beside = where.columns([3, 2], vertical_alignment="center") if popover else (where, where)
        code.image(svg, width=QR_IN_POPOVER if popover else "stretch")  # in the popover: the button beside it
        beside.button("Full screen", key=Classroom.QR_FULL.name, icon=":material/fullscreen:", width="stretch",
                      on_click=_ask_full_screen, help="Show the QR code full screen, to scan from the back of a room.")
        if state.get(Classroom.QR_SHOW):
            state.put(Classroom.QR_SHOW, False)
            full_screen(svg)
    if left_out:
        where.caption("Left out of the link: " + "; ".join(left_out.values()) + ".")
    return url
