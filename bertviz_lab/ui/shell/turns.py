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
import sys
import threading
from collections.abc import Iterator

TURNS = max(1, min(2, os.cpu_count() or 1))  # runs computing at once
CORES = os.cpu_count() or 1
# torch's threads for a run: every core while it computes alone, its share of the cores while another run computes
# too (two runs of 2 threads each on 2 cores ask for twice the cores there are). With 30 sessions typing, a redraw's
# server CPU is a little under 2 threads for every run's and above one thread a turn's, and the p95 the same in all
# three, bound by the GIL (measured by python -m bench.classroom_load; figures in docs/benchmarks.md, "A class at
# once"). A user's OMP_NUM_THREADS wins.
SHARED_THREADS = max(1, CORES // TURNS)
MAX_WAIT_S = 2.0
_turns = threading.BoundedSemaphore(TURNS)
_held = threading.local()  # .turn: whether this thread's script run holds a turn now
_computing = [0]  # script runs holding a turn now
_count = threading.Lock()


def _take(wait_s: float) -> bool:
    """Take a turn (False: none came within wait_s) and set this thread's torch threads for what runs now."""
    got = _turns.acquire(timeout=wait_s)
    with _count:
        _computing[0] += got
        alone = got and _computing[0] == 1
    torch = sys.modules.get("torch")  # never imported here: ui/shell/serve.py imports it with its OpenMP settings
    if torch is not None and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(CORES if alone else SHARED_THREADS)  # this thread's, and the default of new ones
    return got


def _give_back() -> None:
    with _count:
        _computing[0] -= 1
    _turns.release()


@contextlib.contextmanager
def my_turn(wait_s: float = MAX_WAIT_S) -> Iterator[bool]:
    """Hold one of the turns while the block runs; yields False when it ran without one (waited too long)."""
    _held.turn = _take(wait_s)
    try:
        yield _held.turn
    finally:
        if _held.turn:
            _give_back()
        _held.turn = False


@contextlib.contextmanager
def stand_aside() -> Iterator[None]:
    """Give this run's turn to the next in line while the block waits on work that is not its own (shared work
    computing in another thread, ui/shell/once.py), and take one again when the block ends normally: thirty sessions
    watching one training run must not hold the turns that the rest of the class's redraws wait for. A block left
    by an exception (st.stop, a rerun: the session left; an error) takes none back: the run is ending, and would
    wait up to MAX_WAIT_S for a turn it gives back at once."""
    had = getattr(_held, "turn", False)
    if had:
        _held.turn = False
        _give_back()
    yield  # no try/finally: an exception raised here goes on up without coming back for a turn
    if had:
        _held.turn = _take(MAX_WAIT_S)
