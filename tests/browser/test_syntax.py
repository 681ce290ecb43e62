"""Syntax across a corpus in headless Chromium: the page opens from a link that picks the story world's smallest
sample, the Run button runs the analysis with a live progress bar, and each of the four tabs draws its chart with
no exception. Leaves syntax_relations.png, syntax_search.png, syntax_probe.png and syntax_agreement.png (the whole
page, each tab open) in test-artifacts/screenshots/; with BERTVIZ_DOCS_SCREENSHOTS=1 it writes them into docs/ for
docs/reference.md too, the random-weights control run beside the probe (twice the time)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
DOCS = ROOT / "docs"
FOR_DOCS = os.environ.get("BERTVIZ_DOCS_SCREENSHOTS") == "1"
LAPTOP = (1366, 900)
TABS = {"Relations by head": "syntax_relations", "Search by a head": "syntax_search",
        "Structural probe": "syntax_probe", "Agreement": "syntax_agreement"}
TITLES = {"Relations by head": "nsubj, dependent → head: each head's accuracy", "Search by a head": "L0 H0's picks by",
          "Structural probe": "The structural probe, layer by layer", "Agreement": "Right form scored higher"}


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_syntax.log") as url:
        yield url


def shoot_whole(page, name: str) -> None:
    """The whole page in one picture (Streamlit scrolls its main block: the window is made as tall as it first),
    into test-artifacts/screenshots/ and, with BERTVIZ_DOCS_SCREENSHOTS=1, into docs/."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": LAPTOP[0], "height": height})
    page.wait_for_timeout(1_000)  # plotly redraws the charts at the new size
    for folder in (SHOTS, DOCS) if FOR_DOCS else (SHOTS,):
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})


def test_the_analysis_runs_and_every_tab_draws(server):
    with browser_page(*LAPTOP) as page:
        # the docs' pictures show the default corpus, the one docs/reference.md's tables measure; the test a quick one
        open_page(page, server, "syntax" if FOR_DOCS else "syntax?sentences=100")
        assert page.get_by_role("heading", name="Syntax across a corpus").count() == 1
        assert page.locator(CHART).count() == 0  # nothing runs before the button
        if not FOR_DOCS:
            page.get_by_text("Also train the probe on random weights").click()  # half the time
            wait_idle(page)
        page.get_by_role("button", name="Run the analysis").click()
        page.locator('[data-testid="stProgress"]').first.wait_for(timeout=60_000)  # the live progress bar
        page.wait_for_selector(CHART, timeout=600_000)
        wait_idle(page)
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
        for tab, name in TABS.items():
            page.get_by_role("tab", name=tab).click()
            wait_idle(page)
            page.wait_for_selector(CHART, timeout=120_000)
            wait_idle(page)
            assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
            titles = page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()
            assert any(t.startswith(TITLES[tab]) for t in titles), titles
            shoot_whole(page, name)
