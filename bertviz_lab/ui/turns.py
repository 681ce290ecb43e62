"""Script runs take turns: at most two of them compute at once, the others wait in line.

Streamlit runs every session's script in its own thread, all at once. Most of a redraw is Python
(Streamlit, plotly, pandas) holding the GIL, so ten runs at once do not finish sooner than ten in a
row: they interleave every few milliseconds, each one's data pushed out of the CPU caches by the
others, and all ten finish near the end. In turns, the first answers come early and the last no
later: with 10 students typing (`python -m bench.classroom_load --think 3`) the server time's p95
fell from 0.7-0.9 s to 0.6-0.7 s on 2 cores; two turns beat one (torch's kernels and the websocket
sends run outside the GIL). A run waits at most `MAX_WAIT_S` for its turn, then goes ahead anyway:
a slow run (a model loading, a training step) can delay the class, never stop it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

TURNS = max(1, min(2, os.cpu_count() or 1))  # runs computing at once
MAX_WAIT_S = 2.0
_turns = threading.BoundedSemaphore(TURNS)


@contextlib.contextmanager
def my_turn(wait_s: float = MAX_WAIT_S) -> Iterator[bool]:
    """Hold one of the turns while the block runs; yields False when it ran without one (waited too long)."""
    got = _turns.acquire(timeout=wait_s)
    try:
        yield got
    finally:
        if got:
            _turns.release()
