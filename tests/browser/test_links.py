"""Links and projector view in headless Chromium: the address bar follows the view, pasting it into a new
browser restores the same view, projector view fits 1024 x 768, a hostile address falls back with a note."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from tests.browser.harness import CHART, CHROMIUM, EXCEPTION, ROOT, browser_page, open_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs it)")]
SHOTS = ROOT / "test-artifacts" / "screenshots"
HEATMAP = '[data-testid="stPlotlyChart"]'
NOTE = "This link asked for something this view cannot show"


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


def query(page) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlsplit(page.url).query).items()}


def first_chart(page) -> str:
    """The first chart's title and cell values as drawn: equal views draw equal text."""
    page.wait_for_selector(CHART, timeout=30_000)
    return page.locator(HEATMAP).first.inner_text()


def click_segment(page, key: str, value: str) -> None:
    """Click `value` in the segmented control whose session key is `key` (Streamlit marks it st-key-...)."""
    page.locator(f".st-key-{key.replace('.', '-')} button").get_by_text(value, exact=True).click()
    wait_idle(page)


def sidebar_folded(page) -> bool:
    return page.locator('[data-testid="stSidebar"]').get_attribute("data-collapsed") == "true"


def test_a_pasted_link_restores_the_same_view(server):
    with browser_page() as page:
        open_page(page, server, "attention")
        box = page.get_by_label("Sentence A")
        box.fill("the dog went to the bank because it was hungry .")
        box.press("Control+Enter")
        wait_idle(page)
        click_segment(page, "attn.layer", "2")
        click_segment(page, "attn.head", "3")
        page.get_by_text("Hide [CLS], [SEP]").click()
        wait_idle(page)
        link, shown = page.url, first_chart(page)
        assert query(page)["a"] == "the dog went to the bank because it was hungry ."
        assert (query(page)["layer"], query(page)["head"], query(page)["hide"]) == ("2", "3", "1")
        assert "Layer 2 · head 3" in shown

    with browser_page() as fresh:  # another browser: a new session that has only the link
        fresh.goto(link)
        wait_idle(fresh)
        assert first_chart(fresh) == shown
        assert fresh.get_by_label("Sentence A").input_value() == "the dog went to the bank because it was hungry ."
        assert query(fresh) == query(page)
        assert fresh.get_by_text(NOTE).count() == 0 and fresh.locator(EXCEPTION).count() == 0


def test_projector_view_fits_a_1024_by_768_screen(server):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(1024, 768) as page:
        open_page(page, server, "attention?projector=1")
        page.wait_for_selector(CHART, timeout=30_000)
        assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "22px"
        assert sidebar_folded(page)
        assert page.locator('[data-testid="stTopNav"]').is_visible()  # the page menu moved to the top
        assert page.get_by_role("button", name="Leave projector view").is_visible()
        width = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollWidth")
        assert width <= 1024  # nothing runs off the right edge
        caption = page.locator('.stMain [data-testid="stCaptionContainer"]').first
        assert caption.evaluate("e => getComputedStyle(e).opacity") == "1"  # captions are not greyed
        page.screenshot(path=str(SHOTS / "projector_attention.png"))

        click_segment(page, "attn.layer", "1")  # controls still work, and the link keeps projector view
        assert query(page)["projector"] == "1" and query(page)["layer"] == "1"
        page.get_by_role("button", name="Leave projector view").click()
        wait_idle(page)
        assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "16px"
        assert "projector" not in query(page)
        assert not sidebar_folded(page)


def test_the_share_box_shows_the_link_and_its_qr_code(server):
    with browser_page() as page:
        open_page(page, server, "attention?layer=3")
        page.get_by_text("Share this view").click()
        code = page.locator('[data-testid="stSidebar"] [data-testid="stCode"]').first.inner_text()
        assert code.startswith(server + "/attention?layer=3")
        qr = page.locator('[data-testid="stSidebar"] [data-testid="stImage"]')
        qr.first.wait_for(timeout=30_000)  # the expander draws its content after the click
        assert qr.count() == 1


TYPED = '<img src=x onerror="window.__hacked=1">'
HOSTILE = (f"a={quote(TYPED)}&layer=-1&head=zz&tau=NaN&range=9-2&off=L0+H0&off=%00"
           "&query=99999&bogus=1&model=%2Fetc%2Fpasswd&" + "&".join(f"x{i}=1" for i in range(20)))


def test_a_hostile_address_gets_the_defaults_and_a_note(server):
    with browser_page() as page:
        open_page(page, server, f"attention?{HOSTILE}")
        page.wait_for_selector(CHART, timeout=30_000)
        note = page.get_by_text(NOTE).inner_text()
        for said in ("layer=-1 is not between 0 and 999", "head=zz is not a whole number", "tau=NaN is not a number",
                     "model=/etc/passwd could not be opened", "no settings called bogus"):
            assert said in note
        assert page.locator(EXCEPTION).count() == 0
        assert page.evaluate("window.__hacked === undefined")
        assert page.get_by_label("Sentence A").input_value() == TYPED  # as text, never as HTML
        assert "Layer 0 · head 0" in first_chart(page)
        assert "layer" not in query(page) and "bogus" not in query(page)  # the address now says what is shown
