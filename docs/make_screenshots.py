"""Regenerate the README screenshots: start the app, open each page in headless Chromium, save docs/*.png.

    .venv/bin/python -m docs.make_screenshots      (from the repository root)
"""

from __future__ import annotations

from pathlib import Path

from tests.browser.harness import (
    CHART,
    browser_page,
    open_page,
    streamlit_server,
    wait_idle,
)

DOCS = Path(__file__).resolve().parent
PAGES = [("home", ""), ("predict", "predict"), ("attention", "attention"), ("losses", "losses"),
         ("worked", "worked")]


def main() -> None:
    with streamlit_server() as url, browser_page(width=1400, height=1700) as page:
        for name, path in PAGES:
            open_page(page, url, path)
            if name == "losses":  # the stepper starts at step 1; show every step for the picture
                page.get_by_text("Show all steps").click()
                wait_idle(page)
            if path:
                page.wait_for_selector(CHART, timeout=30_000)
            page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)
            print("wrote", DOCS / f"{name}.png")


if __name__ == "__main__":
    main()
