"""Work computed once for the whole class (ui/shell/once.py): the slot itself, with threads, and the Lesson's training
step, with AppTest sessions: one run for every session that presses Reveal, followed live by a session that comes
while it trains, kept going when the session that started it leaves, and a failure told as a sentence.

No test waits for a time to pass: each step waits on an Event set where the thing it needs has happened (a
follower drew the work's news, the run is held mid-way), so a busy machine makes them slower, never wrong."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import traceback
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from bertviz_lab.errors import InputError
from bertviz_lab.ui.lesson import stepper as ui_lesson
from bertviz_lab.ui.shell import once
from bertviz_lab.views.lesson import runs as lesson_runs
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "lesson.py")
STEP = "training"  # the short training run
REVEAL = f"lesson.reveal.{STEP}"
MOON = "the loss went to the moon"
WAIT_S = 120  # the most any step waits for another thread: only a hang reaches it


# --- The slot --------------------------------------------------------------------------------------------
def follow_in_threads(slot: once.Once, work, n: int = 2) -> tuple[list, list[threading.Thread]]:
    """n threads following the slot at once, and what each got (its result, or the error it raised); returns once
    every one of them has drawn the work's news: each follows the running work (started by one of them)."""
    got: list = []
    drew = [threading.Event() for _ in range(n)]

    def follower(drawn: threading.Event) -> None:
        try:
            got.append(once.follow(slot, work, lambda news: drawn.set()))
        except Exception as exc:  # noqa: BLE001 - the test reads it
            got.append(exc)

    threads = [threading.Thread(target=follower, args=(drawn,)) for drawn in drew]
    for thread in threads:
        thread.start()
    assert all(drawn.wait(WAIT_S) for drawn in drew)
    return got, threads


def joined(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()


def test_slots_give_every_session_one_slot_per_key_and_keep_the_latest_keys():
    slots = once.Slots("The test work", keep=2)
    a, b = slots.slot("a"), slots.slot(("b", 1))
    assert slots.slot("a") is a and a is not b and a.name == "The test work"
    slots.slot("c")  # a third key: the one asked for longest ago, b, goes
    assert slots.slot("a") is a and slots.slot(("b", 1)) is not b
    slots.clear()
    assert slots.slot("a") is not a


def test_a_slot_whose_work_still_runs_is_not_dropped_for_a_newer_key():
    slots, gate = once.Slots("The test work", keep=1), threading.Event()
    busy = slots.slot("busy")
    job, _ = busy.start(lambda report: gate.wait(WAIT_S) and "done")
    try:
        assert busy.running()
        slots.slot("next")  # over the cap, but the only older slot is computing: it stays
        assert slots.slot("busy") is busy
    finally:
        gate.set()
        job.done.wait(WAIT_S)
    assert not busy.running() and job.result == "done"
    slots.slot("next")
    slots.slot("third")  # now idle, the oldest go
    assert slots.slot("busy") is not busy


def test_two_threads_that_ask_at_once_run_the_work_once_and_share_its_result():
    slot, calls, gate = once.Once("The test work"), [], threading.Event()

    def work(report):
        calls.append(threading.current_thread().name)
        report("half way")
        assert gate.wait(WAIT_S)
        return object()

    got, threads = follow_in_threads(slot, work)
    gate.set()
    joined(threads)
    assert len(calls) == 1 and calls[0].startswith("once: ")  # the work ran once, in the slot's own thread
    assert len(got) == 2 and got[0] is got[1] and slot.ready()
    assert once.follow(slot, work, lambda news: pytest.fail("drew a finished result")) is got[0]
    assert len(calls) == 1


def test_work_that_fails_tells_every_follower_and_the_next_ask_starts_it_again():
    slot, calls, gate = once.Once("The test work"), [], threading.Event()

    def work(report):
        calls.append(1)
        assert gate.wait(WAIT_S)
        if len(calls) == 1:
            raise RuntimeError(MOON)
        return "done"

    got, threads = follow_in_threads(slot, work)
    gate.set()
    joined(threads)
    assert [type(e) for e in got] == [once.WorkFailed] * 2 and str(got[0]) == str(got[1])
    assert str(got[0]) == f"The test work failed (RuntimeError: {MOON}); asking again starts it over."
    assert isinstance(got[0].__cause__, RuntimeError) and got[0].__cause__ is got[1].__cause__ and not slot.ready()
    assert once.follow(slot, work, lambda news: None) == "done" and len(calls) == 2  # started over, once


def test_a_lab_error_from_the_work_reaches_the_page_as_itself():
    def work(report):
        raise InputError("no such task")

    with pytest.raises(InputError, match="no such task"):
        once.follow(once.Once("The test work"), work, lambda news: None)


def test_the_server_log_gives_a_lab_error_one_line_and_anything_else_its_traceback(caplog):
    """A word the vocabulary lacks, said inside shared work, is a user's input: one line in the server log each
    time, not a traceback; a bug keeps its traceback."""
    def refused(report):
        raise InputError("'zzz' is not a token")

    def broken(report):
        raise KeyError("bug")

    for work, raised in ((refused, InputError), (broken, once.WorkFailed)):
        with pytest.raises((raised, KeyError)):
            once.follow(once.Once("The test work"), work, lambda news: None)
    (said, failed) = [r for r in caplog.records if r.name == once.log.name]
    assert said.getMessage() == "The test work refused: 'zzz' is not a token" and said.exc_info is None
    assert failed.getMessage() == "The test work failed" and failed.exc_info[0] is KeyError


class Unbuildable(InputError):
    """A LabError that its message alone cannot rebuild."""

    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: {why}")


@pytest.mark.parametrize("error, raised", [(InputError("no such task"), InputError),
                                           (Unbuildable("the task", "gone"), once.WorkFailed)])
def test_each_follower_raises_its_own_error_and_the_works_traceback_stays_its_own(error, raised):
    slot, gate = once.Once("The test work"), threading.Event()

    def work(report):
        assert gate.wait(WAIT_S)
        raise error

    got, threads = follow_in_threads(slot, work)
    gate.set()
    joined(threads)
    assert [type(e) for e in got] == [raised] * 2 and got[0] is not got[1]  # each follower its own
    assert all(str(e) == str(error) and e.__cause__ is error for e in got)  # the same sentence, chained
    assert [frame.name for frame in traceback.extract_tb(error.__traceback__)] == ["run", "work"]  # no follower's


# --- The Lesson's training step --------------------------------------------------------------------------
@pytest.fixture
def tiny(monkeypatch):
    """A 6-step tiny run (its own slot: TINY is in the key) whose train_tiny calls are counted. While `gate` is
    closed the run stops at its fourth record (2 train records and 1 held-out reported) and sets `held`; it fails
    there once if `fail` is set. Every redraw of a follower is noted in `frames`; a session that redraws while
    `leave` is set and the run is held leaves (st.stop: its script stops, as when its user navigates away); the
    redraw that makes the frames `open_at` long opens the gate."""
    monkeypatch.setattr(lesson_runs, "TINY", dataclasses.replace(lesson_runs.TINY, steps=6, eval_every=3))
    spy = SimpleNamespace(calls=[], gate=threading.Event(), held=threading.Event(), fail=False, frames=[],
                          leave=False, open_at=None)
    spy.gate.set()
    real, draw = lesson_runs.train_tiny, ui_lesson._training_frame

    def train_tiny(seed: int = 0, report=lambda record: None):
        spy.calls.append(seed)
        seen = itertools.count()

        def held_at_the_fourth(record: dict) -> None:
            if next(seen) == 3:
                if not spy.gate.is_set():
                    spy.held.set()
                    assert spy.gate.wait(WAIT_S)
                if spy.fail:
                    spy.fail = False
                    raise RuntimeError(MOON)
            report(record)

        return real(seed, held_at_the_fourth)

    def frame(news, n):
        spy.frames.append((len(news.train), len(news.held_out)))
        if spy.leave and spy.held.is_set():
            spy.leave = False
            st.stop()
        if spy.open_at is not None and len(spy.frames) >= spy.open_at:
            spy.gate.set()
        draw(news, n)

    monkeypatch.setattr(lesson_runs, "train_tiny", train_tiny)
    monkeypatch.setattr(ui_lesson, "_training_frame", frame)
    ui_lesson.RUNS.clear()
    yield spy
    spy.gate.set()
    ui_lesson.RUNS.clear()


def session() -> AppTest:
    """A Lesson session on the training step with a guess picked: Reveal is one click away."""
    at = app_test(PAGE, WAIT_S).run()
    at.selectbox(key="lesson.step").set_value(STEP).run()
    question, _ = lesson_runs.start_question(lesson_runs.tiny_vocab_size())
    at.pills(key=f"lesson.guess.{STEP}").set_value(question.options[0]).run()
    assert not at.exception, at.exception
    return at


def revealed(at: AppTest) -> tuple:
    """The run the session revealed, after checking that the page shows the verdict."""
    assert not at.exception, at.exception
    assert any("The model's answer" in m.value for m in [*at.success, *at.error]), [m.value for m in at.error]
    return at.session_state["lesson.training"]


def leave_mid_run(tiny, at: AppTest) -> None:
    """Press Reveal and leave while the run is held mid-way: the script stops in a redraw of the run it follows."""
    tiny.gate.clear()
    tiny.leave = True
    at.button(key=REVEAL).click().run()
    assert tiny.held.is_set() and not tiny.leave and not at.exception, at.exception
    assert "lesson.training" not in at.session_state and tiny.calls == [0]


def test_two_sessions_that_press_reveal_share_one_run(tiny, monkeypatch):
    computed, frequency = [], lesson_runs._frequency_loss
    frequency.cache_clear()

    def counted():
        misses = frequency.cache_info().misses
        got = frequency()
        if frequency.cache_info().misses > misses:
            computed.append(threading.current_thread().name)
        return got

    monkeypatch.setattr(lesson_runs, "_frequency_loss", counted)
    first, second = session(), session()
    run = revealed(first.button(key=REVEAL).click().run())
    drawn = len(tiny.frames)
    assert drawn >= 1 and not first.progress[1:]  # the run's bar drawn while it trained, gone once done
    assert revealed(second.button(key=REVEAL).click().run()) == run
    assert tiny.calls == [0] and len(tiny.frames) == drawn  # the second found it done: nothing to follow
    seed, train, held_out = run
    assert seed == 0 and [r.step for r in held_out] == [0, 3, 6] and len(train) == 6
    assert computed == ["once: The tiny training run"]  # the frequency guess: by the run, the sessions read it


def test_the_run_outlives_the_session_that_started_it_and_a_later_one_follows_it_live(tiny):
    starter, follower = session(), session()
    leave_mid_run(tiny, starter)
    before = len(tiny.frames)
    tiny.open_at = before + 2  # the follower's second redraw lets the run go on
    run = revealed(follower.button(key=REVEAL).click().run())
    watched = tiny.frames[before:]
    assert tiny.calls == [0]  # the follower did not start a run of its own: the first one went on
    assert watched[:2] == [(2, 1), (2, 1)]  # it saw the run mid-way (held at 2 steps), and redrew it
    assert revealed(starter.button(key=REVEAL).click().run()) == run  # back: at once
    assert tiny.calls == [0] and len(tiny.frames) == before + len(watched)


def test_a_run_that_fails_says_so_and_the_next_reveal_starts_it_again(tiny):
    starter, follower = session(), session()
    tiny.fail = True
    leave_mid_run(tiny, starter)
    tiny.open_at = len(tiny.frames) + 1  # the follower's first redraw lets the run go on: to fail
    follower.button(key=REVEAL).click().run()
    assert not follower.exception, follower.exception
    (error,) = [e.value.replace("\\", "") for e in follower.error]
    assert f"The tiny training run failed (RuntimeError: {MOON}); asking again starts it over." in error
    assert "lesson.training" not in follower.session_state  # nothing half-kept
    run = revealed(starter.button(key=REVEAL).click().run())
    assert tiny.calls == [0, 0] and [r.step for r in run[2]] == [0, 3, 6]  # started over, and finished
    assert revealed(follower.button(key=REVEAL).click().run()) == run and tiny.calls == [0, 0]
