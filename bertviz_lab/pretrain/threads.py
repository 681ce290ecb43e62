"""A run's CPU threads: the number its settings fix, or with `threads` 0 (the default, the Start button's) every
core that no other program is using, looked at again every CHECK_S seconds while the run trains.

Why watch the machine: torch shares out each operation among its threads and waits for the last one. When
another program takes one of those threads' cores, every operation waits for it, and the run slows many times
over, far more than the core it lost. Measured 2026-11-26 on 2 cores, `python -m bertviz_lab train --steps 200`
(the classroom preset): 16.1 s on one thread, 11.8 s on two; beside a program that keeps one core busy, 15.5 s
on one and 115 s on two. The app's redraws of its live panel (70 ms of CPU every 1.5 s) cost two threads
nothing measurable (11.7 s). So 0 used to mean all cores but one, which on 2 cores is one thread and the slow
run. It now means every core while they are free, and a core given back as soon as another program uses one:
12.0 s alone, 12.0 s beside the redraws, 15.6 s beside the busy program (`bench.class_wait --threads 0` for the
whole 600 steps). A run begins on all cores but one and takes the last at its first look: two runs started
together on every core, then each back to one, ran twice as slow to the end (108 ms a step against 66).

The thread count changes the last bits of the sums (a sum split differently rounds differently), so two runs
of one seed match bit for bit where their thread counts did, as on a quiet machine. `--threads N` fixes the
count whatever else the machine does, and so does BERTVIZ_THREADS=N for runs on 0 (the tests set it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import psutil
import torch

from bertviz_lab.errors import ConfigError

CHECK_S = 1.0  # how often the machine is looked at again, in seconds of wall time
BUSY = 0.5  # another program using this much of a core (averaged since the last look) takes that core
FIXED_ENV = "BERTVIZ_THREADS"  # a whole number: the threads of a run on threads 0, not watching the machine


def cores() -> list[int]:
    """The CPUs this process may run on (all of them where the system cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows: no affinity call
        return list(range(os.cpu_count() or 1))


def busy_seconds(cpus: list[int]) -> float:
    """CPU seconds spent busy so far on `cpus`, by every program (idle and waiting on disks left out)."""
    per_cpu = psutil.cpu_times(percpu=True)
    total = 0.0
    for i in cpus:
        if i < len(per_cpu):
            t = per_cpu[i]
            # guest time is counted in user time already (Linux); iowait is idle time
            total += sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) \
                - getattr(t, "guest_nice", 0.0)
    return total


def own_seconds() -> float:
    """CPU seconds this process has used so far, all its threads."""
    times = os.times()
    return times.user + times.system


class Threads:
    """torch's CPU threads for one run. `fixed` is the run's setting (0: watch the machine); `update()`, called
    before each step, looks at the machine every CHECK_S seconds and returns the thread count in use.
    `busy` and `clock` are for tests: the CPU seconds every program has used so far, and the time."""

    def __init__(self, fixed: int, *, busy: Callable[[], float] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.cpus = cores()
        env = os.environ.get(FIXED_ENV, "").strip()
        self.fixed = fixed or (_whole(env, len(self.cpus)) if env else 0)
        self._busy, self._clock = busy or (lambda: busy_seconds(self.cpus) - own_seconds()), clock
        self.used: set[int] = set()  # every thread count this run has used
        # Watching, a run starts on all cores but one and takes the last once it has seen it free: two runs that
        # start together each on every core, then back to one, both ran at half speed to the end (2 cores)
        self.count = self.fixed or max(1, len(self.cpus) - 1)
        self._last = None if self.fixed else (self._clock(), self._busy())
        self._apply()

    @property
    def watching(self) -> bool:
        return not self.fixed

    def update(self) -> int:
        """Look at the machine if CHECK_S seconds have passed since the last look; the thread count now."""
        if self._last is None:
            return self.count
        now = self._clock()
        if now - self._last[0] < CHECK_S:
            return self.count
        busy = self._busy()
        others = max(0.0, (busy - self._last[1]) / (now - self._last[0]))  # cores' worth, used by others
        self._last = (now, busy)
        self.count = max(1, len(self.cpus) - int(others + 1 - BUSY))  # a core given back per core in use
        self._apply()
        return self.count

    def describe(self) -> str:
        """What the run used, for its card: "2 threads", or "1-2 threads (every core no other program used)"."""
        low, high = min(self.used), max(self.used)
        counted = f"{low} thread{'s' * (high > 1)}" if low == high else f"{low}-{high} threads"
        return counted + ("" if self.fixed else " (every core no other program used)")

    def _apply(self) -> None:
        self.used.add(self.count)
        if torch.get_num_threads() != self.count:
            torch.set_num_threads(self.count)


def _whole(text: str, most: int) -> int:
    """BERTVIZ_THREADS as a thread count from 1 to `most`; anything else is refused with a sentence."""
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise ConfigError(f"{FIXED_ENV} must be a whole number from 1 to {most} (this machine's cores), "
                          f"not {text!r}")
    return int(text)
