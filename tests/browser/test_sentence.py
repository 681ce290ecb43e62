"""Your sentence follows you, in headless Chromium: typed in Mask & predict's real box, kept when the page menu
opens Attention; the guesses visible in the first screen of a laptop; Attention's open tab kept while typing; in projector view at 1024 x 768 no toggle
label cut short and an Attention page a few screens long. Leaves predict_laptop.png and
attention_projector.png in test-artifacts/screenshots/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"  # copied to docs/ by hand for README and docs
LAPTOP, PROJECTOR = (1366, 768), (1024, 768)
TYPED = "the dog sat on the [MASK] ."
SCREENS = 3  # the Attention page in projector view: at most this many screens long (it was about ten)
# Labels of toggles and other widgets whose text overflows its box (the browser then cuts it with an ellipsis).
CUT_LABELS = """() => [...document.querySelectorAll('.stMain label p, .stMain [data-testid="stWidgetLabel"] p')]
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_sentence.log") as url:
        yield url


def type_sentence(page, text: str) -> None:
    box = page.get_by_label("Sentence A")
    box.fill(text)
    box.press("Control+Enter")
    wait_idle(page)


def test_the_typed_sentence_follows_you_from_predict_to_attention(server):
    with browser_page(*LAPTOP) as page:
        open_page(page, server, "predict")
        type_sentence(page, TYPED)
        answer = page.get_by_text("Guesses: #1 →")
        box = answer.bounding_box()
        assert box is not None and box["y"] + box["height"] <= LAPTOP[1]  # in the first screen, no scrolling
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
        page.screenshot(path=str(SHOTS / "predict_laptop.png"))

        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Attention").click()
        wait_idle(page)
        page.wait_for_selector(CHART, timeout=30_000)
        assert page.get_by_label("Sentence A").input_value() == TYPED
        drawn = page.locator('[data-testid="stPlotlyChart"]').first.inner_text()
        assert all(word in drawn for word in ("1 the", "2 dog", "3 sat", "6 [MASK]"))
        assert "animal" not in drawn  # not the page's default sentence
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()

        page.get_by_role("tab", name="Softmax, step by step").click()  # a student reading the softmax steps...
        wait_idle(page)
        for text in ("a bird sang in the tree .", "the cat ran home ."):  # ...types new sentences: the tab stays
            type_sentence(page, text)
            selected = page.locator('[role="tab"][aria-selected="true"]').all_inner_texts()
            assert selected == ["Softmax, step by step"], (text, selected)


@pytest.mark.parametrize("path", ["predict", "attention"])
def test_projector_view_cuts_no_label_and_keeps_attention_short(server, path):
    with browser_page(*PROJECTOR) as page:
        open_page(page, server, f"{path}?projector=1")
        page.wait_for_selector(CHART, timeout=30_000)
        wait_idle(page)
        assert page.evaluate(CUT_LABELS) == []
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
        if path == "attention":
            # Streamlit scrolls its main block, not the document (whose scrollHeight is the window's)
            height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
            print(f"Attention page in projector view: {height} px")
            assert height <= SCREENS * PROJECTOR[1]
            page.locator('[data-testid="stTabs"]').first.evaluate(  # the tabs at the top, under the page menu
                "e => { e.scrollIntoView({block: 'start'}); e.closest('[data-testid=\"stMain\"]').scrollBy(0, -90); }")
            page.wait_for_timeout(500)
            page.screenshot(path=str(SHOTS / "attention_projector.png"))
