"""Inside the feed-forward layer in headless Chromium: the page opens from the menu's address on the shipped model and
draws its activations, top neurons and factors with no exception; One neuron shows its top contexts with the firing
token marked and its switch-off; the page looks right on a 1366 x 768 laptop and in projector view on a 1024 x 768
projector. Leaves neurons_laptop.png, neurons_neuron.png and neurons_projector.png in test-artifacts/screenshots/
(docs/make_screenshots.py writes docs/neurons*.png)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
MAIN = '[data-testid="stMainBlockContainer"]'


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_neurons.log") as url:
        yield url


def titles(page) -> list[str]:
    return page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()


def no_exception(page) -> None:
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()


def visible_charts(page) -> int:
    """The charts whose box lies at least partly inside the viewport, and whose title fits the chart's width."""
    return page.evaluate("""() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(c => {
        const box = c.getBoundingClientRect(), title = c.querySelector('.gtitle');
        const fits = !title || title.getBoundingClientRect().right <= box.right + 1;
        return box.width > 0 && box.bottom > 0 && box.top < innerHeight && fits; }).length""")


def test_the_page_draws_its_sections_on_a_laptop_and_a_projector(server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(1366, 768) as page:
        open_page(page, server, "neurons")
        page.wait_for_selector(CHART, timeout=60_000)
        wait_idle(page)
        no_exception(page)
        assert page.get_by_role("heading", name="Inside the feed-forward layer").count() == 1
        shown = titles(page)
        assert any(t.startswith("Layer 3: activations") for t in shown), shown
        assert any(t.startswith("The most active neurons of layer 3") for t in shown), shown
        assert any(t.endswith("as 4 factors") for t in shown), shown
        page.locator(MAIN).get_by_role("tab", name="One sentence").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        assert visible_charts(page) >= 1
        page.screenshot(path=str(SHOTS / "neurons_laptop.png"))

        page.get_by_role("tab", name="One neuron").click()
        wait_idle(page, 120_000)
        no_exception(page)
        page.get_by_text("Where it fires").first.wait_for(timeout=60_000)
        assert page.locator('[data-testid="stMetric"]').count() == 3  # as it is, switched off, at its corpus mean
        page.get_by_text("Where it fires").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        page.screenshot(path=str(SHOTS / "neurons_neuron.png"))

        page.set_viewport_size({"width": 1024, "height": 768})
        open_page(page, server, "neurons?projector=1")
        page.wait_for_selector(CHART, timeout=60_000)
        wait_idle(page)
        no_exception(page)
        page.locator(MAIN).get_by_role("tab", name="One sentence").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        assert visible_charts(page) >= 1
        page.screenshot(path=str(SHOTS / "neurons_projector.png"))
