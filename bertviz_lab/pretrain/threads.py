"""A run's CPU threads: the number its settings fix, or with `threads` 0 (the default, the Start button's) every
core that no other program is using, looked at again every CHECK_S seconds while the run trains.

Why watch the machine: torch shares out each operation among its threads and waits for the last one. When
another program takes one of those threads' cores, every operation waits for it, and the run slows many times
over, far more than the core it lost: the classroom preset's 200 steps on two threads beside a program that keeps
one core busy take seven times as long as on one, while the app's redraws of its live panel cost two threads nothing
measurable. So 0 used to mean all cores but one, which on 2 cores is one thread and the slow run. It now means every
core while they are free, and cores given back while other programs use them: the preset's run alone takes a
third less time, and about as long as before beside a busy program or another run. Measured by python -m
bertviz_lab train (--steps 200, and the preset's 600); figures in docs/benchmarks.md, "The Start button's threads".

The thread count changes the last bits of the sums (a sum split differently rounds differently), so two runs
of one seed match bit for bit where their thread counts did, as on a quiet machine. `--threads N` fixes the
count whatever else the machine does, and so does BERTVIZ_THREADS=N for runs on 0 (the tests set it).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

import psutil
import torch

from bertviz_lab import settings

CHECK_S = 1.0  # how often the machine is looked at again, in seconds of wall time (each look 0.75-1.25 x this)
FIRST_S = 0.25  # the first look, before the run's first evaluation and step, spans its setup: this long at least
BUSY = 0.5  # a core's worth of use: this much of one (averaged since the last look) counts as the whole core
STARVED = 0.25  # crowded, and this run got this many cores fewer than its threads: it gives one back
MOST_WAITS = 4  # after giving threads back, looks with room in a row before taking them again: 1, 2, 4 (then 4)
CALM_LOOKS = 30  # ... back to 1 after this many looks without giving any back
FIXED_ENV = settings.THREADS  # a whole number: the threads of a run on threads 0, not watching the machine


def cores() -> list[int]:
    """The CPUs this process may run on (all of them where the system cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows: no affinity call
        return list(range(os.cpu_count() or 1))


def cpu_seconds(cpus: list[int]) -> tuple[float, float]:
    """(idle, stolen) CPU seconds so far on `cpus`: idle includes waiting on disks; stolen is time the host of a
    virtual machine gave to others. Linux's /proc/stat is read by CPU number; where it lacks one of `cpus` (a
    container's renumbered view) or elsewhere, psutil's list, by position where it reaches, else every CPU."""
    rows = _proc_stat()
    if rows is not None and all(i in rows for i in cpus):
        picked = [rows[i] for i in cpus]
        return sum(r[3] + r[4] for r in picked), sum(r[7] for r in picked)
    per_cpu = psutil.cpu_times(percpu=True)
    picked = [per_cpu[i] for i in cpus] if all(i < len(per_cpu) for i in cpus) else per_cpu
    return (sum(t.idle + getattr(t, "iowait", 0.0) for t in picked),
            sum(getattr(t, "steal", 0.0) for t in picked))


def _proc_stat() -> dict[int, list[float]] | None:
    """Linux: CPU number -> its seconds (user, nice, system, idle, iowait, irq, softirq, steal); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            lines = [line.split() for line in f if line.startswith("cpu") and line[3:4].isdigit()]
        tick = os.sysconf("SC_CLK_TCK")
        return {int(p[0][3:]): [int(x) / tick for x in (p[1:9] + ["0"] * 8)[:8]] for p in lines}
    except (OSError, ValueError, AttributeError):
        return None


def own_seconds() -> float:
    """CPU seconds this process has used so far, all its threads."""
    times = os.times()
    return times.user + times.system


class Threads:
    """torch's CPU threads for one run. `fixed` is the run's setting (0: watch the machine); `update()`, called
    as the run begins and before each step, looks at the machine about every CHECK_S seconds and returns the
    thread count in use. The first look is at the first call, over the time since this object was made (the
    run's setup; FIRST_S at least, waited for if need be), so on a quiet machine every evaluation and step of a
    run has the same count, whatever the timing, and a rerun repeats it bit for bit.

    Each look reads, since the last one: the idle cores, this process's use, and so every other program's
    (stolen time left out). With room (half a core or more idle), the others got all they wanted, and the run
    takes every core they leave, half a core's use counting as a whole one. Crowded (no room, and others using
    half a core or more), their use is only their share: the run gives a thread back, one a look, while it
    leaves others a core they use or gets STARVED fewer cores than its threads. After giving some back it waits
    for room at 1, then 2, then 4 looks in a row before taking them again, and each look comes 0.75-1.25 CHECK_S
    after the last (a per-process draw, not torch's): two runs then do not climb and fall back in step.

    `sample` (the idle, stolen and own CPU seconds so far), `clock`, `sleep` and `rng` are for tests."""

    def __init__(self, fixed: int, *, ranks: int = 1, sample: Callable[[], tuple[float, float, float]] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None):
        """`ranks`: the processes of one torchrun job on this machine; with more than one, each takes its share of
        the cores, fixed (they step in lockstep, so one rank's threads giving way would only slow the rest)."""
        self.cpus = cores()
        self.fixed = fixed or fixed_count()
        if not self.fixed and ranks > 1:
            self.fixed = max(1, len(self.cpus) // ranks)
        self._sample = sample or (lambda: (*cpu_seconds(self.cpus), own_seconds()))
        self._clock, self._sleep, self._rng = clock, sleep, rng or random.Random(os.getpid())
        self.used: set[int] = set()  # every thread count this run has used
        # Watching, a run starts on all cores but one and takes the last once it has seen it free: two runs that
        # started together each on every core, then back to one, both ran at half speed to the end (2 cores).
        self.count = self.fixed or max(1, len(self.cpus) - 1)
        self._wait, self._roomy, self._calm = 1, 0, 0
        self._last = None if self.fixed else (self._clock(), *self._sample())
        self._next = None  # the first look: at the first update(), over the run's setup (FIRST_S at least)
        self._apply()

    @property
    def watching(self) -> bool:
        return not self.fixed

    def update(self) -> int:
        """Look at the machine if it is time; the thread count now."""
        if self._last is None:
            return self.count
        now = self._clock()
        if self._next is None and now - self._last[0] < FIRST_S:  # a setup too quick to judge the machine by
            self._sleep(FIRST_S - (now - self._last[0]))
            now = self._clock()
        elif self._next is not None and now < self._next:
            return self.count
        sample = self._sample()
        seconds = max(now - self._last[0], 1e-6)
        idle, stolen, own = ((new - old) / seconds for new, old in zip(sample, self._last[1:]))
        self._last, self._next = (now, *sample), now + self._gap()
        n = len(self.cpus)
        others = max(0.0, n - idle - stolen - own)  # cores' worth that every other program used
        free = max(1, n - int(others + 1 - BUSY))  # the cores they leave
        if idle >= BUSY:  # room: what the others used is what they wanted
            self._roomy += 1
            if free < self.count or self._roomy >= self._wait:
                self.count = free
        else:
            self._roomy = 0
            if others >= BUSY and (free < self.count or own < self.count - STARVED) and self.count > 1:
                self.count -= 1
                self._wait, self._calm = min(2 * self._wait, MOST_WAITS), 0
        self._calm += 1
        if self._calm >= CALM_LOOKS:
            self._wait = 1
        self._apply()
        return self.count

    def describe(self) -> str:
        """What the run used, for its card: "2 threads", or "1-2 threads (every core no other program used)"."""
        low, high = min(self.used), max(self.used)
        counted = f"{low} thread{'s' * (high > 1)}" if low == high else f"{low}-{high} threads"
        return counted + ("" if self.fixed else " (every core no other program used)")

    def _gap(self) -> float:
        return CHECK_S * self._rng.uniform(0.75, 1.25)

    def _apply(self) -> None:
        self.used.add(self.count)
        if torch.get_num_threads() != self.count:
            torch.set_num_threads(self.count)


def fixed_count() -> int:
    """BERTVIZ_THREADS as a thread count from 1 to this machine's cores; 0 when unset (watch the machine). Anything
    else is a ConfigError sentence (settings.py), which the Start button and `train` show before a run begins."""
    return settings.whole(FIXED_ENV, 1, len(cores()), 0, " (this machine's cores)", " to watch the machine")
