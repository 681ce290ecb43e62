"""Fine-tune in headless Chromium, with two finished tiny runs present: the page draws its curves, the
confusion matrix, Try it and the before/after picture without an exception, and overlays both runs."""

import time
from pathlib import Path

import pytest

from bertviz_lab.finetune import runs as ft_runs
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.pretrain import runs
from tests.browser.harness import CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, pick, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
TINY = dict(task="coherence", scratch="tiny", layers=2, heads=2, hidden=32, seq_len=48, steps=30, batch_size=16,
            eval_every=5, threads=1, device="cpu")
PANEL = '[role="tabpanel"]:visible'


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def charts_in(page, where: str, count: int = 1) -> int:
    """How many charts are drawn in `where`, once at least `count` are."""
    page.locator(f'{where} [data-testid="stPlotlyChart"]').nth(count - 1).locator(".main-svg").first.wait_for(
        timeout=60_000)
    return page.locator(f'{where} [data-testid="stPlotlyChart"]').count()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    started = [ft_runs.start(FinetuneConfig(**TINY), name="tiny-coherence", root=root),
               ft_runs.start(FinetuneConfig(**TINY, freeze_encoder=True), name="tiny-probe", root=root)]
    deadline = time.time() + 180
    while any(runs.read(r.path).active for r in started) and time.time() < deadline:
        time.sleep(0.5)
    assert [runs.read(r.path).status for r in started] == ["finished", "finished"]
    return root


def test_the_page_draws_a_finished_run_its_results_and_the_overlay(finished):
    with streamlit_server(env={"BERTVIZ_RUNS": str(finished)}) as url, browser_page(1400, 3600) as page:
        open_page(page, url, "finetune")
        page.get_by_text("Run", exact=True).wait_for(timeout=30_000)
        main = '[data-testid="stMainBlockContainer"]'
        assert charts_in(page, main, 3) >= 3  # loss, accuracy, the confusion matrix
        assert page.locator(EXCEPTION).count() == 0
        assert page.get_by_text("The dev examples it still gets wrong").count() == 1
        shoot(page, "finetune")

        page.get_by_role("tab", name="Try it").click()
        wait_idle(page)
        assert charts_in(page, PANEL) == 1  # the class-probability bars
        box = page.get_by_label("Sentence A")
        box.fill("")
        box.press("Enter")
        wait_idle(page)
        assert "the text is empty" in page.locator(f"{PANEL} [data-testid='stAlert']").first.inner_text()
        assert page.locator(EXCEPTION).count() == 0
        box.fill("the cat sat on the mat .")
        box.press("Enter")
        wait_idle(page)
        shoot(page, "finetune_try")

        page.get_by_role("tab", name="Before and after").click()
        wait_idle(page, 120_000)
        assert charts_in(page, PANEL) == 1
        assert page.locator(f"{PANEL} .scatterlayer .point").count() >= 2 * 400  # every dev example, twice
        assert page.locator(EXCEPTION).count() == 0
        shoot(page, "finetune_before_after")

        pick(page, "Overlay runs", ["tiny-coherence", "tiny-probe"])
        overlay = page.locator('.js-plotly-plot').filter(has_text="Dev accuracy")
        overlay.first.wait_for(timeout=30_000)
        assert overlay.first.locator(".scatterlayer .trace").count() == 2
        assert page.locator(EXCEPTION).count() == 0
        shoot(page, "finetune_compare")
