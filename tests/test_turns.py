"""Script runs take turns (ui/turns.py): at most TURNS at once, a long wait goes ahead anyway, and a turn
is given back whatever the block does (st.stop and st.rerun raise through it)."""

import threading

import pytest

from bertviz_lab.ui import turns


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
