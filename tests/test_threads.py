"""A run's CPU threads (pretrain/threads.py): a fixed number, or every core no other program is using."""

from __future__ import annotations

import time

import pytest
import torch

from bertviz_lab.errors import ConfigError
from bertviz_lab.pretrain import threads as threads_mod
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
    """A fake machine of `n` cores: others(cores) sets how many cores' worth other programs use from now on."""

    def __init__(self, monkeypatch, n: int):
        monkeypatch.setattr(threads_mod, "cores", lambda: list(range(n)))
        self.now, self.busy, self.rate = 100.0, 0.0, 0.0

    def others(self, cores: float) -> None:
        self.rate = cores

    def wait(self, seconds: float) -> None:
        self.now += seconds
        self.busy += self.rate * seconds

    def threads(self, fixed: int = 0) -> Threads:
        return Threads(fixed, busy=lambda: self.busy, clock=lambda: self.now)


def test_a_fixed_count_is_used_and_the_machine_not_watched(monkeypatch):
    machine = Machine(monkeypatch, 4)
    machine.others(3.0)
    t = machine.threads(fixed=3)
    assert not t.watching and t.count == 3 and torch.get_num_threads() == 3
    machine.wait(5 * CHECK_S)
    assert t.update() == 3 and t.describe() == "3 threads"


def test_every_free_core_and_one_given_back_per_core_another_program_uses(monkeypatch):
    machine = Machine(monkeypatch, 4)
    t = machine.threads()
    assert t.watching and t.count == 3 and torch.get_num_threads() == 3  # all but one until it has looked
    machine.wait(CHECK_S / 2)
    assert t.update() == 3  # not looked yet: less than CHECK_S since it began
    machine.wait(CHECK_S / 2)
    assert t.update() == 4 and torch.get_num_threads() == 4  # nothing else ran: every core
    machine.others(1.0)
    machine.wait(CHECK_S)
    assert t.update() == 3 and torch.get_num_threads() == 3
    machine.others(2.4)  # 2.4 cores' worth: two taken
    machine.wait(CHECK_S)
    assert t.update() == 2
    machine.others(2.5)  # half a core or more counts as a core
    machine.wait(CHECK_S)
    assert t.update() == 1
    machine.others(9.0)  # never below one thread
    machine.wait(CHECK_S)
    assert t.update() == 1
    machine.others(0.4)  # less than half a core: every core again
    machine.wait(CHECK_S)
    assert t.update() == 4 and torch.get_num_threads() == 4
    assert t.describe() == "1-4 threads (every core no other program used)"


def test_the_use_is_averaged_over_the_time_since_the_last_look(monkeypatch):
    machine = Machine(monkeypatch, 2)
    t = machine.threads()
    assert t.count == 1
    machine.others(2.0)  # a burst: two cores for a tenth of the window, then nothing
    machine.wait(0.1 * CHECK_S)
    machine.others(0.0)
    machine.wait(0.9 * CHECK_S)
    assert t.update() == 2  # 0.2 cores on average: the app's redraw, not a program that stays


@pytest.mark.parametrize("value, count", [("1", 1), ("2", 2), (" 2 ", 2)])
def test_bertviz_threads_fixes_the_count_of_a_run_on_zero(monkeypatch, value, count):
    machine = Machine(monkeypatch, 2)
    monkeypatch.setenv(FIXED_ENV, value)
    t = machine.threads()
    assert not t.watching and t.count == count
    assert machine.threads(fixed=2).count == 2  # a run's own number wins


@pytest.mark.parametrize("value", ["0", "3", "-1", "two", "1.5"])
def test_a_bad_bertviz_threads_is_refused_with_a_sentence(monkeypatch, value):
    machine = Machine(monkeypatch, 2)
    monkeypatch.setenv(FIXED_ENV, value)
    with pytest.raises(ConfigError, match=r"BERTVIZ_THREADS must be a whole number from 1 to 2"):
        machine.threads()


def test_the_machine_is_read_for_real():
    """busy_seconds counts this process's own work too; own_seconds counts it."""
    cpus = threads_mod.cores()
    busy, own = threads_mod.busy_seconds(cpus), threads_mod.own_seconds()
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    spun = threads_mod.own_seconds() - own
    assert spun >= 0.2  # 0.3 s of spinning, counted in clock ticks
    assert threads_mod.busy_seconds(cpus) - busy >= spun - 0.05  # the whole machine's busy time holds ours


def test_a_run_on_zero_watches_the_machine_each_step_and_its_card_says_what_it_used(monkeypatch, tmp_path):
    machine = Machine(monkeypatch, 2)
    trainer = Trainer(TrainConfig(preset="tiny", hidden=32, heads=2, layers=1, batch_size=4, seq_len=16, steps=4,
                                  warmup=1, eval_every=4, eval_batches=1, checkpoint_every=4, device="cpu"),
                      tmp_path / "run")
    assert trainer.threads.watching and torch.get_num_threads() == 1  # all cores but one until it has looked
    trainer.threads = machine.threads()  # the same, on the fake machine's clock and load
    seen = []
    step = trainer.train_step

    def train_step():  # another program takes a core after step 2
        seen.append(torch.get_num_threads())
        machine.others(1.0 if len(seen) >= 2 else 0.0)
        machine.wait(CHECK_S)
        return step()

    trainer.train_step = train_step
    records = list(trainer.run())
    assert records[-1]["status"] == "finished"
    assert seen == [1, 2, 1, 1]  # one core kept back until the first look; both once free; one once taken
    assert trainer.card()["cpu_threads"] == "1-2 threads (every core no other program used)"


def test_a_run_with_its_own_count_keeps_it(tmp_path):
    trainer = Trainer(TrainConfig(preset="tiny", hidden=32, heads=2, layers=1, batch_size=4, seq_len=16, steps=1,
                                  warmup=1, threads=1, device="cpu"))
    assert not trainer.threads.watching and torch.get_num_threads() == 1
    assert trainer.card()["cpu_threads"] == "1 thread"
