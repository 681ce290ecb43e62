"""Who is asking: the machine's owner (a browser on this machine) or a visitor from the room; and the
"Join this class" box with its QR code for the projector.

In classroom mode (`./lab.sh app --classroom`, bertviz_lab/classroom.py) a visitor (any other machine) may open
only the shipped models and runs, may stop, resume or delete only the runs it started, and may start a run only
while fewer than `max_runs()` train. The owner keeps full control. Without classroom mode the server listens on
localhost only, so everyone is the owner.

The visitor is known by the TCP peer address of its connection (`st.context.ip_address`,
None for localhost): a refresh or a new tab keeps a student's runs theirs.
"""

from __future__ import annotations

import streamlit as st

from bertviz_lab.classroom import DEFAULT_PORT, classroom_mode, join_url, max_runs, qr_svg
from bertviz_lab.pretrain.runs import OWNER  # what run records say for runs the machine's owner started


def client_ip() -> str | None:
    """The visitor's address; None for a browser on this machine (or outside a browser session)."""
    try:
        ip = st.context.ip_address
    except Exception:  # noqa: BLE001 - no script context (tests, bare mode): the local user
        return None
    return ip if isinstance(ip, str) and ip else None  # AppTest's context answers with a mock: the owner


def is_owner() -> bool:
    """True for the machine's owner: always outside classroom mode, else a browser on localhost."""
    return not classroom_mode() or client_ip() is None


def visitor_id() -> str:
    """Who started a run, as recorded in its folder: OWNER, or the visitor's address."""
    return OWNER if is_owner() else f"visitor {client_ip()}"


def join_box() -> None:
    """The sidebar's "Join this class" box: the address and its QR code, open for the owner (the projector)."""
    url = join_url(int(st.get_option("server.port") or DEFAULT_PORT))
    with st.sidebar.expander("Join this class", expanded=is_owner(), icon=":material/qr_code_2:"):
        if url is None:
            st.caption("No network address found: connect this machine to the room's network and restart.")
            return
        st.image(qr_svg(url), width="stretch")  # its full-screen button fills the projector
        # The address to type, not a link: following it would turn the owner's tab into a visitor's.
        st.subheader(url.removeprefix("http://"), anchor=False)
        st.caption(f"Scan the code or type the address. Visitors can train {max_runs()} runs at once; "
                   "only this machine can open other folders or stop others' runs.")
