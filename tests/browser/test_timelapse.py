"""Time-lapse in headless Chromium: the Pretrain page's button opens a finished run's history, Play steps
through the frames with no further click, Pause stops it, and the diff tables are drawn; in projector view at
1024 x 768 (issue 33) the comparison of two steps fits its box, nothing scrolled out of sight to the right.
One 100-step run and one server for the module."""

import re
from pathlib import Path

import pytest

from bertviz_lab.pretrain import process
from bertviz_lab.pretrain.config import TrainConfig
from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                                     reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
TINY = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=100, lr=5e-3, warmup=3,
            eval_every=10, eval_batches=1, checkpoint_every=50, device="cpu", threads=1)
GRID = '[data-testid="stDataFrame"]'
# A grid's scroller (glide-data-grid's .dvn-scroller) once its content's width has held for two polls (the grid
# sizes its columns after it is first drawn): [its content's width, its visible width], in px.
SETTLED_JS = """s => { const width = s.scrollWidth, same = s.dataset.lastWidth === String(width);
    s.dataset.lastWidth = String(width);
    return width > 0 && s.clientWidth > 0 && same && [width, s.clientWidth]; }"""
IN_VIEW_JS = "el => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """The server's URL; its runs folder holds one finished 100-step run, `lapse` (frames 0 1 2 5 10 20 50 100)."""
    runs = tmp_path_factory.mktemp("runs")
    assert process.execute(runs / "lapse", TrainConfig(**TINY), resume=False, command=["train"]) == 0
    with streamlit_server(env={"BERTVIZ_RUNS": str(runs)}) as address:
        yield address


def frame_number(page) -> int:
    text = page.get_by_text(re.compile(r"^Frame \d+ of \d+")).first.inner_text()
    return int(re.match(r"Frame (\d+)", text).group(1))


def widths(page) -> list[list[int]]:
    """Every table's [content width, visible width], each scrolled into view first and measured once its scroller
    is drawn and settled: a grid draws its scroller only once it is on screen."""
    found = []
    for table in page.locator(GRID).all():
        table.scroll_into_view_if_needed()
        scroller = table.locator(".dvn-scroller")
        scroller.wait_for(state="attached", timeout=15_000)
        found.append(page.wait_for_function(SETTLED_JS, arg=scroller.element_handle(), polling=200,
                                            timeout=15_000).json_value())
    return found


def test_play_steps_through_a_runs_frames_by_itself(url):
    with browser_page(1400, 2600) as page:
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
        page.wait_for_timeout(3000)  # the time of two frames and more: none comes
        assert frame_number(page) == paused and page.get_by_role("button", name="Play").count() == 1
        assert page.get_by_text(re.compile(r"of 6 top guesses changed")).count() == 1
        assert page.locator(EXCEPTION).count() == 0
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "timelapse.png"), full_page=True)


def test_the_comparison_table_fits_a_projector(url):
    with browser_page(1024, 768) as page:
        open_page(page, url, "timelapse?projector=1&history=run%20lapse")
        page.wait_for_selector(CHART, timeout=30_000)
        assert page.get_by_text("of 6 top guesses changed").count() == 1
        heads, guesses = widths(page)
        assert page.locator(EXCEPTION).count() == 0
        assert 0 < guesses[0] <= guesses[1], guesses  # no column of the guesses hidden at the right
        assert 0 < heads[0] <= heads[1], heads  # nor of the heads that moved (long roles end in "…")
        if (ROOT / "checkpoints" / "bertviz-mini" / "history" / "snapshots.jsonl").is_file():
            open_page(page, url, "timelapse?projector=1&history=bertviz-mini")  # 5,000 steps: longer roles
            page.wait_for_selector(CHART, timeout=30_000)
            found = widths(page)
            assert len(found) == 2 and all(0 < content <= box for content, box in found), found
        table = page.locator(GRID).nth(1)
        table.evaluate("element => element.scrollIntoView({block: 'center'})")
        page.wait_for_function(IN_VIEW_JS, arg=table.element_handle(), timeout=15_000)
        table.locator(".dvn-scroller").wait_for(state="attached", timeout=15_000)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "timelapse_projector.png"))
