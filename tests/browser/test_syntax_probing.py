"""The Syntax page's "Probing, carefully" tab in headless Chromium: a link opens the tab on the story world's smallest
sample, nothing runs before its button, the button runs the probes with a live progress bar and every section draws
with no exception; the amnesic button shows "Found by a probe" beside "Used by the model". The page looks right on a
1366-wide laptop and in projector view on a 1024 x 768 projector. Leaves syntax_probing_laptop.png (the whole tab),
syntax_probing_amnesic.png and syntax_probing_projector.png in test-artifacts/screenshots/."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from bertviz_lab.ui.shell.state_probing import TAB
from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
LAPTOP = (1366, 900)
LINK = f"syntax?sentences=100&tab={quote(TAB)}"
TITLES = ("The linear probe's accuracy by hidden state", "Where each task is read", "The scalar mix's weights",
          "Part of speech: task and control task", "Selectivity", "Online codelength of part of speech")


@pytest.fixture(scope="module")
def server():
    with streamlit_server(log=ROOT / "test-artifacts" / "browser_syntax_probing.log") as url:
        yield url


def no_exception(page) -> None:
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).all_inner_texts()


def titles(page) -> list[str]:
    return page.locator('[data-testid="stPlotlyChart"] .gtitle').all_text_contents()


def shoot_whole(page, name: str, width: int) -> None:
    """The whole page in one picture (Streamlit scrolls its main block: the window is made as tall as it first)."""
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": width, "height": height})
    page.wait_for_timeout(1_000)  # plotly redraws the charts at the new size
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_the_tab_runs_its_probes_and_its_amnesic_probe(server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(*LAPTOP) as page:
        open_page(page, server, LINK)
        no_exception(page)
        assert page.get_by_role("tab", name=TAB, selected=True).count() == 1
        assert page.locator(CHART).count() == 0  # nothing runs before the button
        page.get_by_role("button", name="Run the probes").click()
        page.locator('[data-testid="stProgress"]').first.wait_for(timeout=60_000)  # the live progress bar
        page.get_by_role("heading", name="1 · Layer by layer").wait_for(timeout=600_000)
        wait_idle(page, 120_000)
        no_exception(page)
        shown = titles(page)
        for title in TITLES:
            assert any(t.startswith(title) for t in shown), (title, shown)
        assert page.get_by_text("Not probed: pronoun and referent:").count() == 1  # too few pronouns in 100 sentences: said once
        page.get_by_role("button", name="Remove it and measure").click()
        page.get_by_text("Found by a probe").first.wait_for(timeout=300_000)
        wait_idle(page, 120_000)
        no_exception(page)
        assert page.get_by_text("Used by the model").count() == 1
        assert any(t.startswith("Agreement by attractors") for t in titles(page))
        page.get_by_text("Found by a probe").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(800)
        page.screenshot(path=str(SHOTS / "syntax_probing_amnesic.png"))
        shoot_whole(page, "syntax_probing_laptop", LAPTOP[0])

        page.set_viewport_size({"width": 1024, "height": 768})
        open_page(page, server, LINK + "&projector=1")  # the class's results are there at once: nothing runs again
        page.get_by_role("heading", name="1 · Layer by layer").wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        no_exception(page)
        page.get_by_role("heading", name="1 · Layer by layer").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(800)
        page.screenshot(path=str(SHOTS / "syntax_probing_projector.png"))
        shoot_whole(page, "syntax_probing_projector_whole", 1024)
