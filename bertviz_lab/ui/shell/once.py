"""Work done once for every session of the class, and the live progress every session that waits on it sees.

Some answers are the same for everyone and take seconds: the Lesson's tiny training run (per seed) and its linear
probes (per model and task), the Representations page's sentence bank (per model). Each kind of such work is one
module-level `Slots` (its name, how many keys it keeps); `follow(slots.slot(key), work, draw)` is the one way a
page asks for it. The first session that asks starts the work in a daemon thread of its own, so the work
outlives the script that started it (a user who navigates away stops their script, not the run). Every session that
asks while it runs follows the same progress (`follow`: what the work last reported, redrawn every POLL_S seconds);
one that asks afterwards gets the result at once. Work that fails hands every session that followed it the same
error (each its own exception, chained from the work's), and the next ask starts it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import streamlit as st

from bertviz_lab.errors import LabError
from bertviz_lab.ui.shell import turns

T = TypeVar("T")
Report = Callable[[Any], None]  # what the work calls with its progress ("news"), in whatever shape its page draws
POLL_S = 0.5  # how often a following session redraws the news: a live bar, not a chart per training step
log = logging.getLogger(__name__)


class WorkFailed(LabError):
    """Shared work that raised a bug rather than a LabError; the message names the work and the error."""


@dataclass(eq=False)
class Job(Generic[T]):
    """One attempt at the work. Only its thread writes it; sessions read `news` (replaced whole, so a reader
    never sees half an update) and, once `done` is set, `result` or `error`."""

    news: Any  # what the work last reported
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None

    def report(self, news: Any) -> None:
        self.news = news

    def run(self, work: Callable[[Report], T], name: str) -> None:
        start = time.perf_counter()
        try:
            self.result = work(self.report)
            # once per slot and attempt: the server log shows it (bench.classroom_load counts the tiny runs)
            log.warning("%s: computed once for the class in %.1f s", name, time.perf_counter() - start)
        except BaseException as exc:  # whatever it was, every follower must hear of it rather than wait forever
            if isinstance(exc, LabError):  # the sentence the page shows (a word the vocabulary lacks): one log line
                log.warning("%s refused: %s", name, exc)
            else:
                log.exception("%s failed", name)
            self.error = exc
        finally:
            self.done.set()


class Once(Generic[T]):
    """A slot for one piece of shared work: at most one attempt runs at a time; a finished one serves everyone."""

    def __init__(self, name: str):
        self.name = name  # what the work is, as an error names it: "The tiny training run"
        self._lock = threading.Lock()
        self._job: Job[T] | None = None

    def start(self, work: Callable[[Report], T], first: Any = None) -> tuple[Job[T], bool]:
        """The current attempt, and whether this call started it: a new one, in a daemon thread, when none has
        begun or the last one failed. `first` is the news to draw until the work reports its own."""
        with self._lock:
            started = self._job is None or self._job.error is not None
            if started:
                self._job = Job(first)
                threading.Thread(target=self._job.run, args=(work, self.name), name=f"once: {self.name}",
                                 daemon=True).start()
            return self._job, started

    def running(self) -> bool:
        """Whether an attempt is under way (started and not done)."""
        job = self._job
        return job is not None and not job.done.is_set()

    def ready(self) -> bool:
        """Whether a finished result is there to read (a test waits on it; a page just calls `follow`)."""
        job = self._job
        return job is not None and job.done.is_set() and job.error is None


class Slots(Generic[T]):
    """The slots of one kind of shared work, one per key (what decides its result: the model, the seed, the task),
    kept for every session of the process. The `keep` keys asked for last are kept; an older one's slot is dropped
    with its result (a sentence bank can be 190 MB), unless its work is still running: it stays until done."""

    def __init__(self, name: str, keep: int):
        self.name, self.keep = name, keep  # name: what the work is, as an error names it
        self._lock = threading.Lock()
        self._slots: OrderedDict[Hashable, Once[T]] = OrderedDict()

    def slot(self, key: Hashable) -> Once[T]:
        """The one slot for `key`: the same object for every session that asks."""
        with self._lock:
            if key in self._slots:
                self._slots.move_to_end(key)
            else:
                self._slots[key] = Once(self.name)
                # the oldest idle slots go; one still computing stays (dropped, its next asker would start again)
                idle = [k for k, slot in self._slots.items() if k != key and not slot.running()]
                for old in idle[: max(len(self._slots) - self.keep, 0)]:
                    del self._slots[old]
            return self._slots[key]

    def clear(self) -> None:
        """Forget every slot: the next ask starts the work again (tests start from nothing)."""
        with self._lock:
            self._slots.clear()


def follow(slot: Once[T], work: Callable[[Report], T], draw: Callable[[Any], None], first: Any = None) -> T:
    """The work's result, the work started if need be. While it runs, the session draws `draw(news)` (Streamlit
    calls, into one placeholder) with the news the work last reported, again every POLL_S seconds (each redraw
    also lets a session that was left, its script stopped, stop here), and clears it at the end; a session that
    finds the result ready draws nothing. A LabError from the work is raised as one of its class with its
    message, anything else as a WorkFailed that names the work, each follower its own, chained from the work's
    (the placeholder then keeps the last news: how far it got)."""
    job, started = slot.start(work, first)
    if started or not job.done.is_set():
        place = st.empty()
        with turns.stand_aside():  # waiting computes nothing: the turn goes to the class's other redraws
            while True:
                with place.container():
                    draw(job.news)
                if job.done.wait(POLL_S):
                    break
        if job.error is None:
            place.empty()
    if job.error is not None:
        raise _own_error(job.error, slot.name) from job.error
    return job.result


def _own_error(error: BaseException, name: str) -> LabError:
    """A follower's own exception for the work's error: raising the one object in every follower's thread would
    add each one's frames to its shared __traceback__ (keeping every session's objects alive). A LabError comes
    back as a new one of its class with its message (a WorkFailed with the message, where the class cannot be
    built from the message alone), anything else as a WorkFailed that names the work."""
    if isinstance(error, LabError):
        try:
            own = type(error)(str(error))
        except Exception:  # noqa: BLE001 - a constructor that wants more than the message
            own = None
        return own if own is not None and str(own) == str(error) else WorkFailed(str(error))
    what = (str(error).strip().splitlines() or [""])[0][:300]
    return WorkFailed(f"{name} failed ({type(error).__name__}{': ' + what if what else ''}); "
                      "asking again starts it over.")
