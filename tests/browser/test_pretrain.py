"""Pretrain live in headless Chromium: start a run from the form, see the loss curve grow
with no click, reload and find the run still followed, stop it, see "stopped"."""

import shutil
import time
from pathlib import Path

import pytest

from bertviz_lab.pretrain import runs
from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
# Points of the live MLM-loss chart's train trace, read from plotly's own data on the page.
TRAIN_POINTS = """() => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')]
    .find(p => p.layout && p.layout.title && p.layout.title.text === 'MLM loss');
  const train = plot && plot.data.find(t => t.name === 'train');
  return train ? (train.x._inputArray || train.x).length : 0;  // plotly decodes base64 arrays into _inputArray
}"""


def fill(page, label: str, value) -> None:
    page.get_by_role("spinbutton", name=label, exact=True).fill(str(value))


def points(page) -> int:
    return page.evaluate(TRAIN_POINTS)


def wait_for(page, check, timeout_s: float = 60) -> None:
    for _ in range(int(timeout_s * 2)):
        if check():
            return
        page.wait_for_timeout(500)
    raise AssertionError("timed out waiting for the page to update")


def poll(check, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


def shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_run_started_from_the_page_updates_live_survives_a_reload_and_stops(tmp_path):
    with streamlit_server(env={"BERTVIZ_RUNS": str(tmp_path)}) as url, browser_page(1400, 3200) as page:
        try:
            open_page(page, url, "pretrain")
            fill(page, "Steps", 2000)  # long enough that only Stop can end it within the test
            fill(page, "Hidden size", 64)
            page.get_by_text("Advanced", exact=True).click()
            fill(page, "Evaluate every", 20)
            fill(page, "Checkpoint every", 25)
            page.get_by_role("button", name="Start training").click()
            wait_idle(page)
            (run,) = runs.list_runs(tmp_path)

            wait_for(page, lambda: points(page) > 0)  # no click: the live panel redraws itself
            first = points(page)
            wait_for(page, lambda: points(page) > first + 10)
            assert page.locator(EXCEPTION).count() == 0
            page.wait_for_selector('[data-testid="stPlotlyChart"] .heatmaplayer', timeout=30_000)  # the probe
            shoot(page, "pretrain")

            page.reload()  # a new session: it picks the newest active run and follows it
            wait_for(page, lambda: points(page) > 0, 30)
            again = points(page)
            assert page.get_by_text(run.name).count() >= 1
            wait_for(page, lambda: points(page) > again)
            shoot(page, "pretrain-reloaded")

            stop = page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Stop")  # not the header's
            for _ in range(3):  # on a loaded machine a click that lands mid-redraw can be lost: click again
                if runs.read(run.path).active:
                    stop.click()
                if poll(lambda: runs.read(run.path).status == "stopped", 20):
                    break
            wait_for(page, lambda: page.get_by_text("stopped", exact=True).count() > 0)
            assert runs.read(run.path).status == "stopped"
            assert page.get_by_role("button", name="Use this model").count() == 1
            assert page.locator(EXCEPTION).count() == 0
            assert page.locator(CHART).count() >= 6
            shoot(page, "pretrain-stopped")
            shutil.copy(SHOTS / "pretrain.png", "/tmp/pretrain.png")
        finally:
            for info in runs.list_runs(tmp_path):
                runs.stop(info.path, timeout=30)
