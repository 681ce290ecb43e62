"""The Lesson on a 1024 x 768 projector (projector view) and a 1366 x 768 laptop, in headless Chromium: every step's
question, its Reveal and Back / Next are on the first screen, and a revealed step's tables fit their boxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertviz_lab.views.lesson import steps as vls
from tests.browser.harness import CHROMIUM, EXCEPTION, ROOT, browser_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"  # not docs/: its committed pictures stay as they are
MASKED = "The lesson's sentence (with [MASK] where BERT should guess a word)"
STEPS = vls.ids()  # a step is named by its id in its link and in its widgets' keys
# The bottom edge of the question, of Reveal, Back and Next, and of the page's first element, in the viewport.
BOTTOMS = """step => {
  const bottom = e => e ? Math.round(e.getBoundingClientRect().bottom) : null;
  const main = [...document.querySelectorAll('.stMain p')];
  const key = k => bottom(document.querySelector(`.st-key-${k} button`));
  return {question: bottom(main.find(p => p.innerText.startsWith('Predict, then reveal'))),
          reveal: key('lesson-reveal-' + step),
          back: key('lesson-back'), next: key('lesson-next'), scrolled: window.scrollY + document.querySelector(
            '[data-testid="stMain"]').scrollTop};
}"""
# Each table's grid: how much wider its content is than its box (0: it fits, no hidden columns).
HIDDEN = """() => [...document.querySelectorAll('.stMain [data-testid="stDataFrame"] .dvn-scroller')]
  .map(s => s.scrollWidth - s.clientWidth)"""


@pytest.fixture(scope="module")
def server():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as url:
        yield url


def open_step(page, url: str, step: str, projector: bool) -> None:
    page.goto(f"{url}/lesson?step={step}" + ("&projector=1" if projector else ""))
    page.wait_for_selector(f".st-key-lesson-reveal-{step} button", timeout=60_000)
    wait_idle(page)


def reveal(page, step: str, guess: str) -> None:
    """Guess (a pill's text, or a number typed) and press Reveal."""
    if guess.isdigit():
        box = page.locator(f".st-key-lesson-guess-{step} input")
        box.fill(guess)
        box.press("Enter")
    else:
        page.locator(f".st-key-lesson-guess-{step}").get_by_text(guess, exact=True).first.click()
    wait_idle(page)
    page.locator(f".st-key-lesson-reveal-{step} button").first.click()
    page.wait_for_selector('[data-testid="stAlert"]', timeout=60_000)
    wait_idle(page)


@pytest.mark.parametrize(("width", "projector"), [(1024, True), (1366, False)])
def test_every_steps_question_reveal_back_and_next_are_on_the_first_screen(server, width, projector):
    with browser_page(width, 768) as page:
        open_step(page, server, STEPS[0], projector)
        for number, step in enumerate(STEPS, 1):
            shown = page.evaluate(BOTTOMS, step)
            assert shown["scrolled"] == 0 and page.locator(EXCEPTION).count() == 0
            for what in ("question", "reveal", "back", "next"):
                assert shown[what] is not None and 0 < shown[what] <= 768, (width, step, what, shown)
            if projector and step in ("heads", "nsp"):  # the heads grid; the two sentences B
                page.screenshot(path=str(SHOTS / f"lesson_projector_step{number}.png"))
            if number < len(STEPS):
                page.keyboard.press("ArrowRight")  # Next's shortcut
                page.wait_for_selector(f".st-key-lesson-reveal-{STEPS[number]} button", timeout=60_000)
                wait_idle(page)


def test_the_arrow_keys_move_between_steps_but_not_while_typing(server):
    with browser_page(1024, 768) as page:
        open_step(page, server, "heads", True)
        page.keyboard.press("ArrowLeft")  # Back's shortcut
        page.wait_for_selector(".st-key-lesson-reveal-embeddings button", timeout=60_000)
        wait_idle(page)
        box = page.get_by_label(MASKED)
        text = box.input_value()
        box.press("Home")
        box.press("ArrowRight")  # in the box: Next's shortcut moves the caret one character, not the lesson
        page.keyboard.type("X")
        assert box.input_value() == text[:1] + "X" + text[1:]  # the key reached the box: X went in after one letter
        box.press("Enter")  # the edited sentence reruns the script, with a Next press if the arrow had made one
        page.wait_for_function(f"() => new URLSearchParams(location.search).get('a') === {box.input_value()!r}",
                               timeout=60_000)
        wait_idle(page)
        assert page.locator(".st-key-lesson-reveal-embeddings button").count() >= 1 \
            and page.locator(EXCEPTION).count() == 0
        assert page.locator(".st-key-lesson-reveal-heads button").count() == 0


def test_the_revealed_tables_fit_their_boxes_on_a_projector(server):
    with browser_page(1024, 768) as page:
        open_step(page, server, "tokens", True)
        page.get_by_label(MASKED).fill(
            "the little cat sat quietly on the old [MASK] near the warm kitchen door .")
        page.keyboard.press("Enter")
        page.wait_for_selector(".st-key-lesson-reveal-tokens button", timeout=60_000)
        wait_idle(page)
        reveal(page, "tokens", "9")
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=30_000)
        assert len(page.evaluate(HIDDEN)) >= 2  # a long sentence: its tokens in rows of eight
        assert max(page.evaluate(HIDDEN)) <= 1
        open_step(page, server, "softmax", True)
        reveal(page, "softmax", "animal")
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=30_000)
        assert max(page.evaluate(HIDDEN)) <= 1  # the softmax steps: every column in view
        page.get_by_text("score = q·k ÷").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "lesson_projector_step4_revealed.png"))
