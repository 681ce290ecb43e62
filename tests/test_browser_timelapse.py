"""Time-lapse in headless Chromium: the Pretrain page's button opens a finished run's history, Play steps
through the frames with no further click, Pause stops it, and the diff tables are drawn."""

import re
from pathlib import Path

import pytest
from browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

from bertviz_lab.pretrain import process
from bertviz_lab.pretrain.config import TrainConfig

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                                     reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
TINY = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=100, lr=5e-3, warmup=3,
            eval_every=10, eval_batches=1, checkpoint_every=50, device="cpu", threads=1)


def frame_number(page) -> int:
    text = page.get_by_text(re.compile(r"^Frame \d+ of \d+")).first.inner_text()
    return int(re.match(r"Frame (\d+)", text).group(1))


def test_play_steps_through_a_runs_frames_by_itself(tmp_path):
    assert process.execute(tmp_path / "lapse", TrainConfig(**TINY), resume=False, command=["train"]) == 0
    with streamlit_server(env={"BERTVIZ_RUNS": str(tmp_path)}) as url, browser_page(1400, 2600) as page:
        open_page(page, url, "pretrain")
        page.get_by_role("button", name="Open its time-lapse").click()
        wait_idle(page)
        page.wait_for_url(re.compile(r"/timelapse(\?|$)"))  # the link names the run it opened
        page.get_by_text("Frame 8 of 8 · step 100 of 100").wait_for()  # the run's series: 0 1 2 5 10 20 50 100
        assert page.locator(EXCEPTION).count() == 0
        assert page.locator(CHART).count() >= 4  # attention grid, guesses, loss, role scores, word map

        page.get_by_role("button", name="Play").click()  # from the last frame: back to step 0, then onwards
        page.get_by_text(re.compile(r"^Frame [3-8] of 8")).wait_for(timeout=30_000)  # ticking with no click
        page.get_by_role("button", name="Pause").click()
        wait_idle(page)
        paused = frame_number(page)
        page.wait_for_timeout(3000)
        assert frame_number(page) == paused and page.get_by_role("button", name="Play").count() == 1
        assert page.get_by_text(re.compile(r"of 6 top guesses changed")).count() == 1
        assert page.locator(EXCEPTION).count() == 0
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "timelapse.png"), full_page=True)
