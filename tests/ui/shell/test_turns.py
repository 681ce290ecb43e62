"""Script runs take turns (ui/shell/turns.py): at most TURNS at once, a long wait goes ahead anyway, and a turn
is given back whatever the block does (st.stop and st.rerun raise through it)."""

import threading

import pytest

from bertviz_lab.ui.shell import turns


def hold_every_turn():
    """Threads holding every turn until `release` is set; returns (release, threads)."""
    release, holding = threading.Event(), threading.Barrier(turns.TURNS + 1)

    def hold():
        with turns.my_turn() as got:
            assert got
            holding.wait()
            release.wait(10)

    threads = [threading.Thread(target=hold) for _ in range(turns.TURNS)]
    for thread in threads:
        thread.start()
    holding.wait(10)  # every turn is taken now
    return release, threads


def test_a_run_waits_for_a_turn_and_gets_one_when_it_is_given_back():
    release, threads = hold_every_turn()
    got = []

    def wait_in_line():
        with turns.my_turn(wait_s=10) as turn:
            got.append(turn)

    waiter = threading.Thread(target=wait_in_line)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and got == []  # in line: every turn is held
    release.set()
    waiter.join(10)
    assert got == [True]
    for thread in threads:
        thread.join(10)


def test_a_run_that_waited_too_long_goes_ahead_without_a_turn():
    release, threads = hold_every_turn()
    try:
        with turns.my_turn(wait_s=0.05) as got:
            assert got is False
    finally:
        release.set()
        for thread in threads:
            thread.join(10)
    with turns.my_turn(wait_s=0) as got:  # nothing was taken by the run that went ahead
        assert got is True


def test_a_turn_is_given_back_when_the_run_raises():
    for _ in range(3 * turns.TURNS):
        with pytest.raises(RuntimeError), turns.my_turn(wait_s=0):
            raise RuntimeError("st.stop() and st.rerun() end a run with an exception")
    release, threads = hold_every_turn()  # every turn is free again: all of them can be taken at once
    release.set()
    for thread in threads:
        thread.join(10)


def test_at_most_turns_runs_compute_at_once():
    inside, most, lock = [0], [0], threading.Lock()
    start = threading.Barrier(6)

    def run():
        start.wait(10)
        with turns.my_turn(wait_s=10):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            threading.Event().wait(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most[0] == turns.TURNS


def test_a_run_waiting_on_shared_work_stands_aside_and_takes_a_turn_again():
    with turns.my_turn(wait_s=0) as got:
        assert got
        with turns.stand_aside():
            held = [turns._turns.acquire(timeout=0) for _ in range(turns.TURNS)]
            assert all(held)  # its turn is free for another run while it waits
            for _ in held:
                turns._turns.release()
        assert turns._held.turn  # and it holds one again for the rest of its run
    assert all(turns._turns.acquire(timeout=0) for _ in range(turns.TURNS))  # nothing leaked
    for _ in range(turns.TURNS):
        turns._turns.release()


def test_standing_aside_without_a_turn_gives_nothing_back():
    with turns.stand_aside():
        pass
    assert all(turns._turns.acquire(timeout=0) for _ in range(turns.TURNS))
    for _ in range(turns.TURNS):
        turns._turns.release()
    with pytest.raises(ValueError):
        turns._turns.release()  # a BoundedSemaphore: an extra release would have raised here


class Left(BaseException):
    """What a session's script raises when it stops or reruns (Streamlit's StopException, RerunException)."""


class CountedTurns:
    """The turns, with every acquire counted."""

    def __init__(self, inner):
        self.inner, self.acquired = inner, 0

    def acquire(self, timeout=None):
        self.acquired += 1
        return self.inner.acquire(timeout=timeout)

    def release(self):
        self.inner.release()


@pytest.mark.parametrize("leaving", [Left, RuntimeError])
def test_a_run_that_leaves_while_standing_aside_takes_no_turn_back(monkeypatch, leaving):
    counted = CountedTurns(turns._turns)
    monkeypatch.setattr(turns, "_turns", counted)
    with pytest.raises(leaving), turns.my_turn(wait_s=0) as got:
        assert got and counted.acquired == 1
        with turns.stand_aside():
            raise leaving("the session left while it waited on shared work")
    assert counted.acquired == 1 and not turns._held.turn  # no wait for a turn it would give back at once
    with turns.my_turn(wait_s=0), turns.stand_aside():
        pass
    assert counted.acquired == 3  # a normal end takes one again
    monkeypatch.undo()
    assert all(turns._turns.acquire(timeout=0) for _ in range(turns.TURNS))  # nothing leaked
    for _ in range(turns.TURNS):
        turns._turns.release()


def test_a_run_alone_computes_on_every_core_and_two_runs_share_them(monkeypatch):
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(turns, "CORES", 4)
    monkeypatch.setattr(turns, "SHARED_THREADS", 4 // turns.TURNS)
    seen, second_in, first_may_go = {}, threading.Event(), threading.Event()

    def run(name, before=None, after=None):
        with turns.my_turn(wait_s=10):
            seen[name] = torch.get_num_threads()  # this script thread's own threads
            if before:
                before.set()
            if after:
                after.wait(10)

    previous = torch.get_num_threads()
    try:
        alone = threading.Thread(target=run, args=("alone",))
        alone.start()
        alone.join(10)
        first = threading.Thread(target=run, args=("first", None, first_may_go))
        first.start()
        while turns._computing[0] != 1:
            threading.Event().wait(0.01)
        second = threading.Thread(target=run, args=("second", second_in))
        second.start()
        second_in.wait(10)
        first_may_go.set()
        for thread in (first, second):
            thread.join(10)
    finally:
        torch.set_num_threads(previous)
    assert seen == {"alone": 4, "first": 4, "second": 4 // turns.TURNS} if turns.TURNS > 1 else seen["alone"] == 4
    assert turns._computing[0] == 0
