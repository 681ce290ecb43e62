"""A run's CPU threads (pretrain/threads.py): a fixed number, or every core no other program is using.

Most tests run the watcher on a fake machine whose cores are shared fairly among the threads that want
them, as a scheduler shares them, with other programs (a number of busy threads each) and other watchers."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import replace

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import ConfigError
from bertviz_lab.pretrain import threads
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.pretrain.threads import CHECK_S, FIXED_ENV, Threads


@pytest.fixture(autouse=True)
def torch_threads_put_back(monkeypatch):
    """Each test watches the machine (the session's BERTVIZ_THREADS unset) and leaves torch's threads as it
    found them."""
    monkeypatch.delenv(FIXED_ENV, raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


class Machine:
    """`n` cores shared fairly: while the threads that want a core outnumber the cores, each gets an equal share.
    `busy(name, k)`: another program wants k cores from now on; `watcher(name)`: a run on threads 0 that looks
    at this machine; `advance(s)` lets s seconds pass in steps of 50 ms, each watcher looking before each."""

    def __init__(self, monkeypatch, n: int, stolen: float = 0.0):
        monkeypatch.setattr(threads, "cores", lambda: list(range(n)))
        self.n, self.now, self.stolen = n, 100.0, stolen  # stolen: cores' worth a VM's host takes
        self.wanting: dict[str, int] = {}
        self.watchers: dict[str, Threads] = {}
        self.cpu: dict[str, float] = defaultdict(float)
        self.idle = self.stolen_s = 0.0
        self.history: list[dict[str, int]] = []  # each step's thread counts of the watchers

    def busy(self, name: str, k: int) -> None:
        self.wanting[name] = k

    def watcher(self, name: str, seed: int = 0, fixed: int = 0) -> Threads:
        t = Threads(fixed, sample=lambda: (self.idle, self.stolen_s, self.cpu[name]), clock=lambda: self.now,
                    sleep=self.wait, rng=random.Random(seed))
        self.watchers[name] = t
        self.wanting[name] = t.count
        return t

    def advance(self, seconds: float, step: float = 0.05) -> None:
        for _ in range(round(seconds / step)):
            for name, t in self.watchers.items():
                self.wanting[name] = t.update()
            self.history.append({name: self.wanting[name] for name in self.watchers})
            self.wait(step)

    def wait(self, seconds: float) -> None:
        """`seconds` pass with every program wanting what it wants now (a watcher sleeping for its first look
        waits this way too)."""
        cores = self.n - self.stolen
        wanted = sum(self.wanting.values())
        share = min(1.0, cores / wanted) if wanted else 0.0
        for name, k in self.wanting.items():
            self.cpu[name] += k * share * seconds
        self.idle += max(0.0, cores - wanted) * seconds
        self.stolen_s += self.stolen * seconds
        self.now += seconds

    def last(self, seconds: float, step: float = 0.05) -> list[dict[str, int]]:
        return self.history[-round(seconds / step):]


def test_a_fixed_count_is_used_and_the_machine_not_watched(monkeypatch):
    machine = Machine(monkeypatch, 4)
    machine.busy("other", 3)
    t = machine.watcher("run", fixed=3)
    assert not t.watching and t.count == 3 and torch.get_num_threads() == 3
    machine.advance(5 * CHECK_S)
    assert t.update() == 3 and t.describe() == "3 threads"


def test_alone_a_run_takes_every_core_at_its_first_look_and_keeps_them(monkeypatch):
    machine = Machine(monkeypatch, 4)
    t = machine.watcher("run")
    assert t.watching and t.count == 3 and torch.get_num_threads() == 3  # all but one until it has looked
    machine.wait(2.0)  # the run's setup
    machine.advance(0.05)  # its first update(): the first look, over the setup
    assert t.count == 4 and torch.get_num_threads() == 4 and machine.history == [{"run": 4}]
    machine.advance(30 * CHECK_S)
    assert {h["run"] for h in machine.history} == {4}
    assert t.describe() == "3-4 threads (every core no other program used)"


def test_a_setup_too_quick_to_judge_by_is_waited_for_once():
    slept, now = [], [10.0]
    t = Threads(0, sample=lambda: (0.0, 0.0, 0.0), clock=lambda: now[0], sleep=slept.append)
    now[0] += 0.1
    t.update()
    assert slept == [pytest.approx(0.15)]  # FIRST_S (0.25 s) since the Threads was made
    now[0] += 0.1
    t.update()
    assert slept == [pytest.approx(0.15)]  # once: later looks come when they are due


@pytest.mark.parametrize("n, other", [(2, 1), (4, 1), (4, 3), (8, 6), (16, 11)])
def test_beside_a_busy_program_the_run_leaves_it_its_cores_and_takes_them_back_after(monkeypatch, n, other):
    """The other program's use is only its share while the cores are oversubscribed: the run gives threads back
    until there is no oversubscription, and takes every core once the program stops."""
    machine = Machine(monkeypatch, n)
    t = machine.watcher("run")
    machine.advance(5 * CHECK_S)
    assert t.count == n
    machine.busy("other", other)
    machine.advance(20 * CHECK_S)
    assert {h["run"] for h in machine.last(5 * CHECK_S)} == {n - other}  # every core used, none twice
    machine.busy("other", 0)
    machine.advance(10 * CHECK_S)
    assert {h["run"] for h in machine.last(3 * CHECK_S)} == {n}


def test_a_program_busy_before_the_run_starts_is_left_its_core(monkeypatch):
    machine = Machine(monkeypatch, 2)
    machine.busy("other", 1)
    t = machine.watcher("run")
    machine.advance(20 * CHECK_S)
    assert {h["run"] for h in machine.history} == {1} and t.describe().startswith("1 thread ")


def test_the_apps_redraws_do_not_take_a_core(monkeypatch):
    """70 ms of one core every 1.5 s (the live panel's redraw): too little to give a thread up for."""
    machine = Machine(monkeypatch, 2)
    machine.watcher("run")
    machine.advance(3 * CHECK_S)
    for _ in range(20):
        machine.busy("app", 1)
        machine.advance(0.1)
        machine.busy("app", 0)
        machine.advance(1.4)
    assert {h["run"] for h in machine.last(28)} == {2}


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_two_runs_started_together_share_the_cores(monkeypatch, n):
    """Mostly neither oversubscribed nor idle: a run's look comes at its own moments, and after giving threads
    back it waits longer for room each time, so the two do not climb and fall back in step."""
    machine = Machine(monkeypatch, n)
    machine.watcher("a", seed=1)
    machine.watcher("b", seed=2)
    machine.advance(60 * CHECK_S)
    late = machine.last(40 * CHECK_S)
    over = sum(h["a"] + h["b"] > n for h in late) / len(late)
    idle = sum(h["a"] + h["b"] < n - 1 for h in late) / len(late)
    assert over <= 0.1 and idle <= 0.1, (over, idle)
    assert all(h["a"] >= 1 and h["b"] >= 1 for h in late)


def test_time_a_virtual_machines_host_takes_is_not_another_program(monkeypatch):
    machine = Machine(monkeypatch, 2, stolen=0.5)  # a quarter of each core taken by the host
    machine.watcher("run")
    machine.advance(30 * CHECK_S)
    assert {h["run"] for h in machine.last(25 * CHECK_S)} == {2}


def test_torchrun_ranks_each_take_their_share_of_the_cores(monkeypatch):
    """Ranks step in lockstep: one rank's threads giving way would only slow the others, so each takes its share,
    fixed; BERTVIZ_THREADS still wins."""
    Machine(monkeypatch, 4)
    t = Threads(0, ranks=2)
    assert not t.watching and t.count == 2
    assert Threads(0, ranks=8).count == 1
    monkeypatch.setenv(FIXED_ENV, "3")
    assert Threads(0, ranks=2).count == 3


def test_a_resumed_run_keeps_the_counts_it_used_before(tmp_path):
    cfg = TrainConfig(preset="tiny", hidden=32, heads=2, layers=1, batch_size=4, seq_len=16, steps=4, warmup=1,
                      eval_every=2, eval_batches=1, checkpoint_every=2, threads=2, device="cpu")
    first = Trainer(replace(cfg, steps=2), tmp_path / "run")
    assert list(first.run())[-1]["status"] == "finished"
    resumed = Trainer(replace(cfg, threads=1), tmp_path / "run", resume=True)
    assert resumed.step == 2 and resumed.card()["cpu_threads"] == "1-2 threads"
    assert list(resumed.run())[-1]["status"] == "finished"
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "step-000004").card["cpu_threads"] == "1-2 threads"


@pytest.mark.parametrize("value, count", [("1", 1), ("2", 2), (" 2 ", 2)])
def test_bertviz_threads_fixes_the_count_of_a_run_on_zero(monkeypatch, value, count):
    machine = Machine(monkeypatch, 2)
    monkeypatch.setenv(FIXED_ENV, value)
    t = machine.watcher("run")
    assert not t.watching and t.count == count
    assert machine.watcher("other", fixed=2).count == 2  # a run's own number wins


@pytest.mark.parametrize("value", ["0", "3", "-1", "two", "1.5", "²", "٢", "1" * 5000])
def test_a_bad_bertviz_threads_is_refused_with_a_sentence(monkeypatch, value):
    """'²' and '٢' are digits to str.isdigit() (int() refuses the first and reads the second as 2); 5,000 digits are
    past int()'s limit: each is the sentence, not a ValueError."""
    machine = Machine(monkeypatch, 2)
    monkeypatch.setenv(FIXED_ENV, value)
    with pytest.raises(ConfigError, match=r"^BERTVIZ_THREADS must be a whole number from 1 to 2 .*: set it to one"):
        machine.watcher("run")


def test_the_machine_is_read_for_real():
    """While this process spins on one core, own_seconds counts it, and the idle time of its cores falls short
    of all of them by about that much. It spins until it has used 0.3 s of CPU, not for 0.3 s of wall time: on a
    machine busy with other programs 0.3 s of wall time gave it 0.09 s of CPU."""
    cpus = threads.cores()
    (idle, stolen), own, start = threads.cpu_seconds(cpus), threads.own_seconds(), time.perf_counter()
    while threads.own_seconds() - own < 0.3 and time.perf_counter() - start < 60:
        pass
    (idle2, stolen2), own2, wall = threads.cpu_seconds(cpus), threads.own_seconds(), time.perf_counter() - start
    assert own2 - own >= 0.3  # the spinning, counted in clock ticks (within a minute, however busy the machine)
    assert idle2 - idle <= len(cpus) * wall - (own2 - own) + 0.05  # our spinning was not idle time
    assert 0 <= stolen2 - stolen <= len(cpus) * wall + 0.05


def test_a_run_on_zero_watches_the_machine_each_step_and_its_card_says_what_it_used(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, 2)
    trainer = Trainer(TrainConfig(preset="tiny", hidden=32, heads=2, layers=1, batch_size=4, seq_len=16, steps=6,
                                  warmup=1, eval_every=6, eval_batches=1, checkpoint_every=6, device="cpu"),
                      tmp_path / "run")
    assert trainer.threads.watching and torch.get_num_threads() == 1  # all cores but one until it has looked
    trainer.threads = machine.watcher("run")  # the same, on the fake machine's clock and load
    seen = []
    step = trainer.train_step

    def train_step():  # another program takes a core after the third step
        seen.append(torch.get_num_threads())
        machine.busy("other", 1 if len(seen) >= 3 else 0)
        machine.advance(1.3 * CHECK_S)
        return step()

    trainer.train_step = train_step
    records = list(trainer.run())
    assert records[-1]["status"] == "finished"
    assert seen[:3] == [2, 2, 2] and seen[-1] == 1  # both cores from the first look on; one once one is taken
    assert trainer.card()["cpu_threads"] == "1-2 threads (every core no other program used)"


def test_a_run_with_its_own_count_keeps_it(tmp_path):
    trainer = Trainer(TrainConfig(preset="tiny", hidden=32, heads=2, layers=1, batch_size=4, seq_len=16, steps=1,
                                  warmup=1, threads=1, device="cpu"))
    assert not trainer.threads.watching and torch.get_num_threads() == 1
    assert trainer.card()["cpu_threads"] == "1 thread"
