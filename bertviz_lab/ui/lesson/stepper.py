"""The Lesson page's widget groups: the stepper, predict-then-reveal with the running score, the inputs a
teacher edits, and the two live runs (training, probes), each computed once for the whole class (ui/shell/once.py) and
drawn live in every session that waits on it.

`ask` is the heart of every step: the question, the class's guess (a number, pills, a radio or a
selectbox, by the options), and a Reveal button that stays locked until there is a guess. Reveal computes
the model's answer, stores it with what it was computed for (model and sentences), and the step then shows
the guess, the verdict and its live view. Change the sentence or the model and the step asks again; an
earlier answer keeps counting in the score until the new one replaces it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from bertviz_lab import metrics
from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.errors import InputError
from bertviz_lab.figures.lesson import training_loss
from bertviz_lab.ui.shell import once
from bertviz_lab.ui.shell import state
from bertviz_lab.ui.shell.models import ModelKey, model_key
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.ui.kit.widgets import chart
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import steps as vls

PILLS_MAX = 24  # more options than this go in a selectbox (BERT-base's 144 heads)


# --- Navigation and score ----------------------------------------------------------------------------
# The steps and their order are views/lesson/steps.py's list, read on every run; the session names a step by its id.
def move(delta: int) -> None:
    ids = vls.ids()
    state.put(K.STEP, ids[min(max(ids.index(state.get(K.STEP)) + delta, 0), len(ids) - 1)])


def start_over() -> None:
    state.put(K.ANSWERS, {})
    state.put(K.STEP, vls.STEPS[0].id)
    for key in K.GUESSES.values():
        state.forget(key)


def picked(step_id: str) -> str:
    """How the step picker names a step: 'Step 4 of 11 · The softmax steps'."""
    return f"Step {vls.position(step_id)} of {len(vls.STEPS)} · {vls.by_id(step_id).title}"


def header() -> vls.Step:
    """One row: the step picker (which names the step), the score and Start over; returns the step shown."""
    state.init(K.STEP)
    state.keep_valid(K.STEP, vls.ids())
    state.keep(K.STEP)
    pick, score, restart = st.columns([5, 4, 2], vertical_alignment="center")
    pick.selectbox("Go to step", vls.ids(), key=K.STEP.name, label_visibility="collapsed", format_func=picked)
    score.markdown(f"**Score:** {vl.score(state.get(K.ANSWERS))}")
    restart.button("Start over", key=K.RESTART.name, on_click=start_over, icon=":material/restart_alt:",
                   width="stretch", help="Forget every answer and go back to step 1.")
    return vls.by_id(state.get(K.STEP))


def nav(bar: DeltaGenerator) -> None:
    """Back and Next in `bar`, beside the question's Reveal (or under its verdict); the arrow keys press them."""
    ids = vls.ids()
    current = state.get(K.STEP)
    bar.button("Back", key=K.BACK.name, on_click=move, args=(-1,), disabled=current == ids[0], shortcut="Left",
               help="The step before (the ← key).")
    bar.button("Next", key=K.NEXT.name, on_click=move, args=(1,), disabled=current == ids[-1], shortcut="Right",
               help="The next step (the → key).")


@dataclass(frozen=True)
class Frame:
    """Where a step draws: `lead` (a figure the class reads to answer, atop the left column, beside the question),
    `left` (the step's inputs, under its paragraph), `ask` (the question and the guess, on the first screen beside
    `left`; a step runs inside it), `bar` (one row under it: Reveal, Back, Next), `below` (what the Reveal unlocks,
    full width)."""
    lead: DeltaGenerator
    left: DeltaGenerator
    ask: DeltaGenerator
    bar: DeltaGenerator
    below: DeltaGenerator


# --- Inputs ------------------------------------------------------------------------------------------
def sentence(key: state.Key, label: str) -> str:
    """A text box the teacher edits; its text outlives a visit to another step or page."""
    state.init(key)
    state.keep(key)
    return st.text_input(label, key=key.name, max_chars=500)


def choice(key: state.Key, label: str, options: list, default, **kwargs):
    """A selectbox whose remembered value is kept while the options still offer it, else `default` (a value,
    or a function computing it only when needed)."""
    state.keep_valid(key, options)
    if st.session_state.get(key.name) is None:
        state.put(key, default() if callable(default) else default)
    state.keep(key)
    return st.selectbox(label, options, key=key.name, **kwargs)


@contextmanager
def shown_errors() -> Iterator[None]:
    """Bad input or a missing head ends the step with a sentence saying so, never a traceback; so does a shared
    run (training, probes) that failed, the next Reveal starting it again."""
    try:
        yield
    except once.WorkFailed as exc:
        st.error(plain(str(exc)), icon=":material/error:")
    except InputError as exc:
        text = str(exc).strip()
        message = plain(text[:1].upper() + text[1:] + ("" if text[-1:] in ".?!”" else "."))
        quiet = isinstance(exc, (vl.MissingHead, vpr.NothingMasked))
        (st.info if quiet else st.warning)(message, icon=":material/info:" if quiet else ":material/warning:")


def encode(ckpt: Checkpoint, text: str, text_b: str | None = None) -> Encoding:
    """The text as the model reads it; an InputError when it is empty or longer than the model reads."""
    return inputs.encode(ckpt.tokenizer, ckpt.model, text, text_b, allow_truncation=False)


def basis(ckpt: Checkpoint, *values) -> tuple:
    """What a revealed answer depends on: the model and the step's inputs."""
    return (str(ckpt.path), *values)


# --- The model's numbers, cached ---------------------------------------------------------------------
@st.cache_data(max_entries=128, show_spinner="Running the model…")  # the spinner shows only past 0.5 s
def _computed(key: ModelKey, name: str, args: tuple, _view: Callable, _ckpt: Checkpoint):
    return _view(_ckpt.model, _ckpt.tokenizer, *args)


def computed(ckpt: Checkpoint, view: Callable, *args):
    """`view(model, tokenizer, *args)` (a function of views/lesson/) for the active model, cached per model,
    device and inputs and shared by every session: a redraw (a guess picked, Reveal) runs no forward pass
    again. Bad input raises its InputError as before (an exception is not cached)."""
    return _computed(model_key(ckpt), f"{view.__module__}.{view.__qualname__}", args, view, ckpt)


# --- Predict, then reveal ----------------------------------------------------------------------------
def guess_widget(question: vl.Question, key: state.Key):
    label = "Your class's guess"
    if not question.options:
        return st.number_input(label, min_value=0, max_value=100_000, step=1, value=None, key=key.name,
                               placeholder="a whole number")
    if state.get(key) not in (None, *question.options):  # a guess at the options of another sentence
        state.forget(key)
    if len(question.options) > PILLS_MAX:
        return st.selectbox(label, question.options, index=None, key=key.name, placeholder="Pick one")
    if max(len(o) for o in question.options) <= 24:
        return st.pills(label, question.options, key=key.name, format_func=plain)
    return st.radio(label, question.options, index=None, key=key.name, format_func=plain)


def ask(bar: DeltaGenerator, question: vl.Question, about: tuple, solve: Callable[[], vl.Quiz]) -> vl.Answered | None:
    """The current step's question and the class's guess; Reveal (in `bar`, the row that Back and Next join) runs
    `solve` (the model's answer, computed now) and stores it. Returns the answered step once it is revealed for
    these inputs (`about`), else None."""
    step = state.get(K.STEP)  # the id of the step shown: its guess, its answer and its Reveal are named by it
    st.markdown(f"**Predict, then reveal:** {plain(question.prompt)}")
    answered = state.get(K.ANSWERS).get(step)
    if answered is not None and answered.basis == about:
        st.markdown(f"Your class's guess: **{plain(str(answered.guess))}**")
        verdict(answered)
        return answered
    if answered is not None:
        st.caption("This step was revealed for another sentence or model (that answer stays in the score); "
                   "guess again for this one.")
    state.keep(K.GUESSES[step])
    guess = guess_widget(question, K.GUESSES[step])
    if bar.button("Reveal", key=f"{K.REVEAL.name}.{step}", type="primary", disabled=guess is None,
                  icon=":material/visibility:", help="Commit to a guess first: Reveal unlocks once there is one."):
        answers = {**state.get(K.ANSWERS), step: vl.Answered(about, guess, solve())}
        state.put(K.ANSWERS, answers)
        st.rerun()
    return None


def verdict(answered: vl.Answered) -> None:
    """Right, not this time, or (where the model gives no clear answer) not scored; the model's numbers behind it."""
    quiz = answered.quiz
    stop = "" if str(quiz.answer)[-1:] in ".?!" else "."  # a sentence as the answer has its own
    text = (f"The model's answer: **{plain(str(quiz.answer))}**{stop} {plain(quiz.why)}  \n"
            f"Score: {vl.score(state.get(K.ANSWERS))}.")
    if not quiz.scored:
        st.info(f"{quiz.unclear}: not scored. " + text, icon=":material/balance:")
    elif answered.right:
        st.success("Right! " + text, icon=":material/check_circle:")
    else:
        st.error("Not this time. " + text, icon=":material/cancel:")


# --- The two live runs, each computed once for every session (ui/shell/once.py) -------------------------------
Run = tuple[int, list[metrics.Metrics], list[metrics.Metrics]]  # (seed, train records, held-out records)


# One tiny run per (seed, TINY), TINY's device "cpu" included: nothing else decides its records, not the loaded
# model, not the session. The probes: one result per (model_key, task).
RUNS: once.Slots[Run] = once.Slots("The tiny training run", keep=8)
PROBES: once.Slots[lesson_runs.ProbeResult] = once.Slots("The linear probes", keep=8)


@dataclass(frozen=True, eq=False)  # hashed by identity: `_frame_chart` builds one figure per report for everyone
class _Frame:
    """The run so far, as the worker reports it after each record."""

    train: tuple[metrics.Metrics, ...] = ()
    held_out: tuple[metrics.Metrics, ...] = ()


def _train(seed: int, report: once.Report) -> Run:
    """The run, reporting the train and held-out records so far after each one; then the frequency guess that
    `frequency_note` sets it against, computed here, once for the class: the sessions that waited only read it."""
    train, held_out = [], []

    def record(r: dict) -> None:
        if r["kind"] in (metrics.TRAIN, metrics.EVAL):
            (train if r["kind"] == metrics.TRAIN else held_out).append(metrics.Metrics.of(r))
            report(_Frame(tuple(train), tuple(held_out)))

    lesson_runs.train_tiny(seed, record)
    lesson_runs.frequency_loss()
    return seed, train, held_out


@lru_cache(maxsize=4)
def _frame_chart(frame: _Frame):
    return training_chart(list(frame.train), list(frame.held_out))


def _training_frame(frame: _Frame, n: int) -> None:
    """The n-th redraw of the run so far: a progress bar, and the loss chart once the first held-out loss is in."""
    steps = lesson_runs.TINY.steps
    if not frame.train:
        st.progress(0.0, text="Training a tiny BERT from scratch…")
    else:
        last = frame.train[-1]
        st.progress(last.step / steps, text=f"Step {last.step} of {steps}: loss {last.loss:.3f}")
    if frame.held_out:
        chart(_frame_chart(frame), "lesson_training", key=f"lesson.training.frame{n}", frame=True)


def train_live(seed: int) -> Run:
    """The tiny BERT's run for this seed, stored in K.TRAINING: trained once for the whole class, every session
    that waits on it watching the same progress bar and loss chart grow."""
    frames = itertools.count()
    run = once.follow(RUNS.slot((seed, lesson_runs.TINY)), lambda report: _train(seed, report),
                      lambda frame: _training_frame(frame, next(frames)), first=_Frame())
    state.put(K.TRAINING, run)
    return run


def training_run() -> Run:
    """The session's run (kept from before a Start over: it was revealed in this session), else seed 0's."""
    return state.get(K.TRAINING) or train_live(0)


def training_chart(train: list[metrics.Metrics], held_out: list[metrics.Metrics]):
    """The run's MLM loss, train and held-out, with ln V (a uniform guess) drawn across."""
    return training_loss(metrics.frame(train), metrics.frame(held_out), math.log(lesson_runs.tiny_vocab_size()),
                         lesson_runs.TINY.steps)


def probes(ckpt: Checkpoint, task: str) -> lesson_runs.ProbeResult:
    """The two linear probes (fixed seeds: one result per model and task), computed once for every session, each
    one that waits on them watching the same progress bar."""
    def work(report: once.Report) -> lesson_runs.ProbeResult:
        return lesson_runs.compare_probes(ckpt.model, ckpt.tokenizer, task, lambda share, text: report((share, text)))

    return once.follow(PROBES.slot((model_key(ckpt), task)), work, lambda news: st.progress(*news),
                       first=(0.0, "Linear probe: reading the task…"))
