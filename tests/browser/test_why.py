"""Why this guess? in headless Chromium: the page opens from the menu's address on the shipped model, draws the
strips, the agreement matrix and the causal check with no exception, and a chosen attention layer redraws the
strips. Leaves why.png (the whole page) in test-artifacts/screenshots/, copied to docs/ by hand for README and docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
LAPTOP = (1366, 900)


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_why.log") as url:
        yield url


def shoot_whole(page, path: Path) -> None:
    """The whole page in one picture: Streamlit scrolls its main block, not the document, so the window is made
    as tall as that block first."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": LAPTOP[0], "height": height})
    page.wait_for_timeout(1_000)  # plotly redraws the charts at the new size
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def test_the_page_draws_strips_agreement_and_the_causal_check(server):
    with browser_page(*LAPTOP) as page:
        open_page(page, server, "why")
        page.wait_for_selector(CHART, timeout=60_000)
        wait_idle(page)
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
        assert page.get_by_role("heading", name="Why this guess?").count() == 1
        titles = page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()
        assert any(t.startswith("Each method's answer, token by token") for t in titles), titles
        assert any(t.startswith("Do the methods rank the tokens alike?") for t in titles), titles
        assert any(t.startswith("p(mat) after each removal") for t in titles), titles
        strips = page.locator('[data-testid="stPlotlyChart"]').first.inner_text()
        assert all(name in strips for name in ("attention", "rollout", "occlusion", "6 [MASK]"))
        page.get_by_text("F = logit(mat)").wait_for(timeout=10_000)
        shoot_whole(page, SHOTS / "why.png")
        page.set_viewport_size({"width": LAPTOP[0], "height": LAPTOP[1]})

        page.locator(".st-key-why-layer button").get_by_text("0", exact=True).click()  # the strip's layer 0
        wait_idle(page)
        titles = page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()
        assert any("(attention at layer 0, mean over heads)" in t for t in titles), titles
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()
