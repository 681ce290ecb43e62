"""The Lesson page in AppTest: open it, go to a step, read a step's options and answer it; its sentences. Moved here
from tests/pages/test_lesson.py, which uses them too."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from bertviz_lab.views.lesson import steps as vls
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT


PAGE = str(ROOT / "pages" / "lesson.py")

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"

SENSES = ("a fisherman was fishing on the bank .", "he put his money in the bank .",
          "the ducks sat on the bank of the river .")  # the contextual step's three sentences, as the page starts


def page() -> AppTest:
    at = app_test(PAGE).run()
    assert not at.exception, at.exception
    return at


def widget(at: AppTest, step: str):
    """The guess widget of a step (named by its id), whatever its kind."""
    key = f"lesson.guess.{step}"
    for kind in (at.number_input, at.pills, at.radio, at.selectbox):
        try:
            return kind(key=key)
        except KeyError:
            continue
    raise AssertionError(f"no guess widget for step {step}")


def answer(at: AppTest, step: str, guess) -> str:
    """Guess, Reveal, and the verdict the page shows."""
    widget(at, step).set_value(guess).run()
    at.button(key=f"lesson.reveal.{step}").click().run()
    assert not at.exception, at.exception
    (shown,) = [*at.success, *at.error]
    return shown.value.replace("\\", "")


def go(at: AppTest, step: str) -> AppTest:
    at.selectbox(key="lesson.step").set_value(step).run()
    assert not at.exception, at.exception
    return at


def score(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Score:**"))


def options(at: AppTest, step: str) -> list[str]:
    """The options as the class reads them (labels arrive Markdown-escaped)."""
    return [o.replace("\\", "") for o in widget(at, step).options]


def paragraph(step: str) -> str:
    """A step's paragraph, as the page shows it under "About this step"."""
    return vls.by_id(step).paragraph
