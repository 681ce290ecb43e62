"""Projector view at 1024 x 768 in headless Chromium: the Share popover shows its whole QR code, "Full screen"
shows it at least 500 px wide over the page, and on every page, at 1024 x 768 (projector view) and 1366 x 768,
every table either fits its box or shows a horizontal scrollbar with a visible thumb (tables.SCROLL_CUE).

Playwright starts headless Chromium with --hide-scrollbars; a person's Chromium draws them, so these tests
start it without that switch. One server and one browser for the module."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from bertviz_lab.ui.shell.share import QR_IN_POPOVER
from tests.browser.harness import CHROMIUM, CHROMIUM_ARGS, EXCEPTION, ROOT, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")]
SHOTS = ROOT / "test-artifacts" / "screenshots"  # copied to docs/ by hand for README and docs
PAGES = ["", "lesson", "predict", "attention", "representations", "pretrain", "timelapse", "finetune", "losses",
         "worked"]
SIZES = [(1024, 768, "?projector=1"), (1366, 768, "")]
GRID = '[data-testid="stDataFrame"]'
# One table: does the grid fit its scroller, and how the scroller's horizontal bar is drawn; measured once the grid
# has stopped changing (the same numbers over 5 animation frames in a row, fonts loaded): a grid sizes its columns
# and draws its bar a few frames after the script ends, later on a slow machine, and a measure taken between the two
# reads a wide table with no bar yet.
SETTLE_JS = """async (df, measure) => { await document.fonts.ready; let last = '', same = 0, now = null;
  for (let frame = 0; frame < 600 && same < 5; frame++) {
    await new Promise(done => requestAnimationFrame(done)); now = measure(df);
    const key = JSON.stringify(now); same = key === last ? same + 1 : 0; last = key; }
  return now; }"""
MEASURE_JS = """df => { const s = df.querySelector('.dvn-scroller'); const style = getComputedStyle(s);
  return {scroll: s.scrollWidth, width: s.clientWidth, bar: s.offsetHeight - s.clientHeight,
          colour: style.scrollbarColor}; }"""
SHOWN_JS = "df => df.getBoundingClientRect().width > 0 && df.closest('details:not([open])') === null"


def settled(grid, measure_js: str):
    """`measure_js` on the grid once its result has held still (SETTLE_JS)."""
    return grid.evaluate(f"df => ({SETTLE_JS})(df, {measure_js})")


def tables(page) -> list[dict]:
    """Every table on the page that is laid out (not in a closed expander or tab), each scrolled into view first:
    a grid draws its scroller only once it is on screen."""
    found = []
    for grid in page.locator(GRID).all():
        if not settled(grid, SHOWN_JS):
            continue
        grid.scroll_into_view_if_needed()
        grid.locator(".dvn-scroller").wait_for(state="attached", timeout=15_000)
        found.append(settled(grid, MEASURE_JS))
    return found


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """(the server's URL, a function that opens a page of the given size)."""
    from playwright.sync_api import sync_playwright

    runs = tmp_path_factory.mktemp("runs")
    with streamlit_server({"BERTVIZ_RUNS": str(runs)}) as url, sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
                                     ignore_default_args=["--hide-scrollbars"])
        try:
            yield url, lambda w, h: contextlib.closing(chromium.new_page(viewport={"width": w, "height": h}))
        finally:
            chromium.close()


def thumb_visible(colour: str) -> bool:
    """scrollbar-color is 'auto' (the platform's dark thumb) or 'THUMB TRACK'; transparent thumbs do not count."""
    if colour == "auto":
        return True
    first = re.match(r"\s*(rgba?\([^)]*\)|\w+)", colour).group(1)
    return first != "transparent" and not re.fullmatch(r"rgba\([^)]*,\s*0\)", first)


def cue_shown(table: dict) -> bool:
    """A visible cue: the scroller draws a horizontal scrollbar (it takes height) with a thumb one can see."""
    return table["bar"] > 0 and thumb_visible(table["colour"])


def test_thumb_visible_tells_a_transparent_thumb_from_a_dark_one():
    assert thumb_visible("rgb(95, 95, 95) rgb(228, 228, 228)") and thumb_visible("auto")
    assert not thumb_visible("rgba(0, 0, 0, 0) rgba(0, 0, 0, 0)") and not thumb_visible("transparent transparent")


def test_the_share_popover_shows_its_whole_qr_code_and_full_screen_shows_it_large(browser):
    url, new_page = browser
    with new_page(1024, 768) as page:
        open_page(page, url, "attention?projector=1")
        page.get_by_role("button", name="Share this view").click()
        body = page.locator('[data-testid="stPopoverBody"]')
        qr = body.locator('[data-testid="stImage"] img')
        qr.wait_for(timeout=30_000)
        page.wait_for_timeout(300)
        shown, code = body.bounding_box(), qr.bounding_box()
        assert code["width"] == pytest.approx(QR_IN_POPOVER, abs=2)
        assert shown["y"] <= code["y"] and code["y"] + code["height"] <= shown["y"] + shown["height"]
        assert shown["x"] <= code["x"] and code["x"] + code["width"] <= shown["x"] + shown["width"]
        assert shown["y"] + shown["height"] <= 768 and body.get_by_role("button", name="Full screen").is_visible()
        page.screenshot(path=str(SHOTS / "share_projector.png"))

        body.get_by_role("button", name="Full screen").click()
        wait_idle(page)
        big = page.get_by_test_id("stDialog").locator('[data-testid="stImage"] img')
        big.wait_for(timeout=30_000)
        page.wait_for_timeout(300)
        box = big.bounding_box()
        assert box["width"] >= 500 and abs(box["width"] - box["height"]) < 2
        assert box["y"] >= 0 and box["y"] + box["height"] <= 768 and box["x"] + box["width"] <= 1024  # all on screen
        assert body.count() == 0 or not body.is_visible()  # the popover closed: it would cover the dialog
        assert page.locator(EXCEPTION).count() == 0
        page.screenshot(path=str(SHOTS / "share_fullscreen.png"))


def test_on_every_page_a_table_fits_its_box_or_shows_its_scrollbar(browser):
    url, new_page = browser
    seen, cut, shot = [], [], False
    for width, height, view in SIZES:
        with new_page(width, height) as page:
            for path in PAGES:
                open_page(page, url, path + view)
                for i, table in enumerate(tables(page)):
                    seen.append((width, path, table))
                    wide = table["scroll"] > table["width"] + 1
                    if wide and not cue_shown(table):
                        cut.append((width, path or "home", table))
                    if wide and width == 1024 and not shot:
                        page.locator(GRID).nth(i).scroll_into_view_if_needed()
                        page.mouse.move(0, 0)  # nobody hovers on a projector
                        page.screenshot(path=str(SHOTS / "wide_table_cue.png"))
                        shot = True
                assert page.locator(EXCEPTION).count() == 0, path
    assert len({path for _, path, _ in seen}) >= 3  # the walk met tables on several pages
    assert cut == []


WIDE = """import pandas as pd
import streamlit as st
from bertviz_lab.ui.shell import projector
projector.apply()
st.dataframe(pd.DataFrame({f"column {i}": ["a long cell of text"] * 3 for i in range(12)}), hide_index=True)
"""


def test_a_table_wider_than_its_box_draws_its_scrollbar_without_a_hover(browser, tmp_path):
    """The cue itself, on a table that cannot fit: twelve long columns at 1024 x 768."""
    _, new_page = browser
    script = tmp_path / "wide.py"
    script.write_text(WIDE)
    with streamlit_server(script=str(script)) as url, new_page(1024, 768) as page:
        open_page(page, url)
        page.mouse.move(0, 0)
        page.locator(GRID).wait_for(timeout=30_000)
        (table,) = tables(page)
        assert table["scroll"] > table["width"] + 1 and cue_shown(table)
