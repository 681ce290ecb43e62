"""The real app in headless Chromium: every page renders its charts without an exception,
a new sentence changes the chart, and each page leaves a screenshot to look at."""

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from bertviz_lab.ui.shell.router import by_section
from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
PAGES = [("home", "", False), ("predict", "predict", True), ("attention", "attention", True),
         ("representations", "representations", True), ("losses", "losses", True), ("worked", "worked", True)]
REPRESENTATION_TABS = ["Same word, different contexts", "Nearest neighbours", "Logit lens", "Embedding geometry",
                       "Shapes and padding"]
# What to do on a page before its charts exist: the losses stepper starts at step 1 (no chart).
PREPARE = {"losses": lambda page: page.get_by_text("Show all steps").click()}


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.mark.parametrize("name, path, has_chart", PAGES)
def test_page_renders_without_exception(server, name, path, has_chart):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page() as page:
        open_page(page, server, path)
        if name in PREPARE:
            PREPARE[name](page)
            wait_idle(page)
        if has_chart:
            page.wait_for_selector(CHART, timeout=30_000)
            assert page.locator(CHART).count() >= 1
        assert page.locator(EXCEPTION).count() == 0
        assert page.locator('[data-testid="stSidebar"]').is_visible()
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("path", ["predict", "attention"])
def test_typing_a_new_sentence_changes_the_chart(server, path):
    with browser_page() as page:
        open_page(page, server, path)
        page.wait_for_selector(CHART, timeout=30_000)
        before = page.locator(CHART).first.inner_html()
        box = page.get_by_label("Sentence A")
        box.fill("i went to the [MASK] to deposit money .")
        box.press("Control+Enter")
        wait_idle(page)
        page.wait_for_selector(CHART, timeout=30_000)
        after = page.locator(CHART).first.inner_html()
        assert after != before
        assert "deposit" in page.locator(CHART).first.inner_html() or "bank" in after
        assert page.locator(EXCEPTION).count() == 0


def test_a_deep_link_as_the_first_request_gets_the_apps_menu():
    """A bookmarked page opened right after the server starts must not fall into the pages/-folder menu."""
    with streamlit_server() as url, browser_page() as page:
        open_page(page, url, "attention")
        wait_idle(page)
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Mask & predict" in nav and "app" not in nav.split()
        lines = nav.splitlines()
        assert [s for s in lines if s in by_section()] == list(by_section())  # the menu's sections, in order
        page.wait_for_selector(CHART, timeout=30_000)
        assert page.locator(EXCEPTION).count() == 0


def test_the_csv_button_downloads_the_matrix_on_show(server):
    """The CSV is made when the button is clicked (not on every redraw), and it is the model's matrix."""
    from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
    from bertviz_lab.ui.shell.state import Attention
    from bertviz_lab.views import inputs

    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, Attention.SENTENCES.text_a.default)
    expected = inputs.attention_matrices(inputs.run(ckpt.model, encoding, trace=True))[0, 0]
    with browser_page() as page:
        open_page(page, server, "attention")
        page.wait_for_selector(CHART, timeout=30_000)
        with page.expect_download(timeout=30_000) as info:
            page.get_by_role("button", name="Download this matrix (CSV)").click()
        download = info.value
        rows = list(csv.reader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert download.suggested_filename == "attention_L0_H0.csv"
    assert rows[0][0] == "query \\ key" and [r[0] for r in rows[1:]] == [f"{i} {t}" for i, t in enumerate(encoding.tokens)]
    np.testing.assert_allclose(np.array([[float(x) for x in r[1:]] for r in rows[1:]]), expected, atol=1e-6)


def test_every_representations_tab_draws_its_charts(server):
    """Each tab computes when opened (the bank with a progress bar the first time) and draws without an exception."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(height=1700) as page:
        open_page(page, server, "representations")
        for n, tab in enumerate(REPRESENTATION_TABS):
            page.get_by_role("tab", name=tab).click()
            wait_idle(page, 180_000)
            panel = page.locator('[role="tabpanel"]:visible')
            panel.locator(CHART).first.wait_for(timeout=60_000)
            assert page.locator(EXCEPTION).count() == 0, tab
            assert panel.locator(CHART).count() >= 1, tab
            page.screenshot(path=str(SHOTS / f"representations_{n}.png"), full_page=True)
        page.get_by_role("tab", name="Same word, different contexts").click()
        wait_idle(page)
        box = page.get_by_label("Word to follow")
        box.fill("money")
        box.press("Enter")
        wait_idle(page)
        assert "does not contain the word" in page.locator('[data-testid="stAlert"]').first.inner_text()
        assert page.locator(EXCEPTION).count() == 0
