"""Who is asking: the machine's owner (a browser on this machine) or a visitor from the room.

`./lab.sh app --classroom` serves the app on the local network and sets BERTVIZ_CLASSROOM=1.
Then a visitor (any other machine) may open only the shipped models and runs, may stop, resume
or delete only the runs it started, and may start a run only while fewer than `max_runs()`
train. The owner keeps full control. Without classroom mode the server listens on localhost
only, so everyone is the owner.

The visitor is known by the TCP peer address of its connection (`st.context.ip_address`,
None for localhost): a refresh or a new tab keeps a student's runs theirs.
"""

from __future__ import annotations

import os

import streamlit as st

CLASSROOM_ENV = "BERTVIZ_CLASSROOM"
MAX_RUNS_ENV = "BERTVIZ_MAX_RUNS"
OWNER = "owner"  # what run records say for runs the machine's owner started


def classroom_mode() -> bool:
    return os.environ.get(CLASSROOM_ENV, "") not in ("", "0")


def client_ip() -> str | None:
    """The visitor's address; None for a browser on this machine (or outside a browser session)."""
    try:
        return st.context.ip_address
    except Exception:  # noqa: BLE001 - no script context (tests, bare mode): the local user
        return None


def is_owner() -> bool:
    """True for the machine's owner: always outside classroom mode, else a browser on localhost."""
    return not classroom_mode() or client_ip() is None


def visitor_id() -> str:
    """Who started a run, as recorded in its folder: OWNER, or the visitor's address."""
    return OWNER if is_owner() else f"visitor {client_ip()}"


def max_runs() -> int:
    """How many runs visitors may have training at once (default 2; $BERTVIZ_MAX_RUNS overrides)."""
    try:
        return max(1, int(os.environ.get(MAX_RUNS_ENV, "2")))
    except ValueError:
        return 2
