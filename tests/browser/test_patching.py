"""Where is the answer made? in headless Chromium: the page opens from the menu's address on the shipped model, runs
the default pair, draws its residual grid with the checks passed and no exception, switches to the heads grid, and
looks right on a 1366 x 768 laptop and in projector view on a 1024 x 768 projector. Leaves patching_laptop.png and
patching_projector.png in test-artifacts/screenshots/ (docs/make_screenshots.py writes docs/patching*.png)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_patching.log") as url:
        yield url


def titles(page) -> list[str]:
    return page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()


def no_exception(page) -> None:
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()


def test_the_page_runs_the_default_pair_and_shows_its_grids(server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(1366, 768) as page:
        open_page(page, server, "patching")
        page.wait_for_selector(CHART, timeout=60_000)
        wait_idle(page)
        no_exception(page)
        assert page.get_by_role("heading", name="Where is the answer made?").count() == 1
        assert any(t.startswith("The residual stream, depth by position") for t in titles(page)), titles(page)
        assert page.get_by_text("passed", exact=True).count() == 4 and page.get_by_text("failed", exact=True).count() == 0
        page.get_by_text("F = logit(were) - logit(was)").first.wait_for(timeout=10_000)
        page.get_by_role("heading", name="Copy one activation across").evaluate(
            "e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "patching_laptop.png"))

        page.locator(".st-key-patch-grid button").get_by_text("Heads", exact=True).click()
        wait_idle(page)
        no_exception(page)
        assert any(t.startswith("Every head's output, layer by head") for t in titles(page)), titles(page)

        page.set_viewport_size({"width": 1024, "height": 768})
        open_page(page, server, "patching?projector=1&grid=heads")
        page.wait_for_selector(CHART, timeout=60_000)
        wait_idle(page)
        no_exception(page)
        page.get_by_role("heading", name="Copy one activation across").evaluate(
            "e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "patching_projector.png"))
