"""Regenerate the screenshots of README and docs/: start the app, open each page in headless Chromium, save docs/*.png.

    .venv/bin/python -m docs.make_screenshots                          (from the repository root)
    .venv/bin/python -m docs.make_screenshots attention attention_layer   (only these pictures)

`timelapse.gif` is the Time-lapse page's first row (every head's attention on "the cat sat on the mat .",
the guesses at [MASK] and the loss) at each step of the shipped model's history, one picture per frame.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from PIL import Image

from bertviz_lab.pretrain import runs
from tests.browser.harness import (
    CHART,
    browser_page,
    open_page,
    pick,
    streamlit_server,
    wait_idle,
)

DOCS = Path(__file__).resolve().parent
PAGES = [("home", ""), ("predict", "predict"), ("attention", "attention"), ("why", "why"),
         ("representations", "representations"), ("timelapse", "timelapse"), ("losses", "losses"), ("worked", "worked")]
# Pages that show runs, from the runs folder ($BERTVIZ_RUNS or runs/): (file name, page path, the run kind);
# skipped when that folder has no finished run of that kind (start one on the page first).
RUN_PAGES = [("pretrain", "pretrain", "pretrain"), ("finetune", "finetune", "finetune")]
# Close-ups of one section of a page: (file name, page path, the tab that holds it, the section's subheader). The
# section runs from its subheader to the last chart on the page, so it must be the page's last section.
SECTIONS = [("attention_layer", "attention", "The rest of the layer",
             "After attention: the rest of the layer for this query")]
# Pages seen on a 1366 x 768 laptop, scrolled to a heading: (file name, page path and query, the heading).
LAPTOP = [("patching", "patching", "Copy one activation across, and see how much of the answer moves"),
          ("neurons", "neurons", "Two thirds of BERT's weights")]
# Close-ups of a runs page's overlay, every finished run of the kind picked: (file name, page path, kind,
# the section's subheader, the multiselect's label). Skipped without two finished runs.
OVERLAYS = [("finetune_compare", "finetune", "finetune", "Compare runs", "Overlay runs")]
# Projector view on a 1024 x 768 projector: (file name, page path and query, the heading to scroll to or None).
PROJECTOR = [("projector", "attention?projector=1", None),
             ("projector_chart", "attention?projector=1", "Layer 0 · head 0"),
             ("patching_projector", "patching?projector=1", "Copy one activation across"),
             ("neurons_projector", "neurons?projector=1", "Two thirds of BERT's weights")]
MAIN = '[data-testid="stMainBlockContainer"]'


def main(only: list[str] | None = None) -> None:
    """Every picture, or only those named in `only` (file names without .png)."""
    with streamlit_server() as url, browser_page(width=1400, height=1700) as page:
        for name, path in PAGES:
            if only and name not in only:
                continue
            open_page(page, url, path)
            if name == "losses":  # the stepper starts at step 1; show every step for the picture
                page.get_by_text("Show all steps").click()
                wait_idle(page)
            if path:
                page.wait_for_selector(CHART, timeout=30_000)
            page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)
            print("wrote", DOCS / f"{name}.png")
        for name, path, kind in RUN_PAGES:
            if only and name not in only:
                continue
            if not any(r.status == "finished" for r in runs.list_runs(kind=kind)):
                print(f"skipped {name}: no finished {kind} run in {runs.runs_root()}")
                continue
            open_page(page, url, path)
            page.wait_for_selector(CHART, timeout=60_000)
            wait_idle(page, 120_000)
            page.screenshot(path=str(DOCS / f"{name}.png"), full_page=True)
            print("wrote", DOCS / f"{name}.png")
        for name, path, kind, heading, label in OVERLAYS:
            if only and name not in only:
                continue
            finished = [r.name for r in runs.list_runs(kind=kind) if r.status == "finished"]
            if len(finished) < 2:
                print(f"skipped {name}: fewer than two finished {kind} runs in {runs.runs_root()}")
                continue
            open_page(page, url, path)
            pick(page, label, finished)
            section(page, heading, DOCS / f"{name}.png")
            print("wrote", DOCS / f"{name}.png")
        for name, path, tab, heading in SECTIONS:
            if only and name not in only:
                continue
            open_page(page, url, path)
            page.get_by_role("tab", name=tab).click()
            wait_idle(page)
            section(page, heading, DOCS / f"{name}.png")
            print("wrote", DOCS / f"{name}.png")
        for name, path, heading in LAPTOP:
            if only and name not in only:
                continue
            laptop(page, url, path, heading, DOCS / f"{name}.png")
            print("wrote", DOCS / f"{name}.png")
        if not only or "timelapse_gif" in only:
            heads_forming(page, url, DOCS / "timelapse.gif")
            print("wrote", DOCS / "timelapse.gif")
        if not only or "lesson" in only:
            lesson(page, url, DOCS / "lesson.png")
            print("wrote", DOCS / "lesson.png")
        projector(page, url, only)


def lesson(page, url: str, path: Path) -> None:
    """The Lesson at its [MASK] step, after the class guessed "mat" and pressed Reveal."""
    open_page(page, url, "lesson?step=guess")
    page.locator('[data-testid="stButtonGroup"]').get_by_text("mat", exact=True).click()  # the guess (pills)
    wait_idle(page)
    page.get_by_role("button", name="Reveal").click()
    wait_idle(page)
    page.wait_for_selector(CHART, timeout=30_000)
    page.screenshot(path=str(path), full_page=True)


def laptop(page, url: str, path: str, heading: str, picture: Path) -> None:
    """The page as a 1366 x 768 laptop shows it, scrolled to `heading` once its charts are drawn."""
    page.set_viewport_size({"width": 1366, "height": 768})
    open_page(page, url, path)
    page.wait_for_selector(CHART, timeout=60_000)
    wait_idle(page)
    page.get_by_text(heading).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    page.screenshot(path=str(picture))
    page.set_viewport_size({"width": 1400, "height": 1700})


def projector(page, url: str, only: list[str] | None) -> None:
    """Projector view as a 1024 x 768 projector shows it: the top of the page, then scrolled to a chart."""
    page.set_viewport_size({"width": 1024, "height": 768})
    for name, path, heading in PROJECTOR:
        if only and name not in only:
            continue
        open_page(page, url, path)
        page.wait_for_selector(CHART, timeout=30_000)
        if heading:
            page.get_by_text(heading).first.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(500)
        page.screenshot(path=str(DOCS / f"{name}.png"))
        print("wrote", DOCS / f"{name}.png")


def heads_forming(page, url: str, path: Path, width: int = 960, ms: int = 900) -> None:
    """One picture per frame of the shipped history, from the Frame caption to the bottom of the first row."""
    open_page(page, url, "timelapse")
    thumb = page.get_by_role("slider")
    caption = page.get_by_text(re.compile(r"^Frame \d+ of \d+")).first
    frames = int(re.match(r"Frame \d+ of (\d+)", caption.inner_text()).group(1))
    thumb.focus()
    page.keyboard.press("Home")
    wait_idle(page)
    pictures = []
    for n in range(frames):
        page.get_by_text(f"Frame {n + 1} of {frames}").wait_for()
        wait_idle(page)
        top = caption.bounding_box()
        charts = page.locator('[data-testid="stPlotlyChart"]')
        bottom = max(charts.nth(i).bounding_box()["y"] + charts.nth(i).bounding_box()["height"] for i in range(3))
        main = page.locator(MAIN).bounding_box()
        clip = dict(x=main["x"], y=top["y"] - 8, width=main["width"], height=bottom - top["y"] + 16)
        picture = Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB")
        pictures.append(picture.resize((width, round(picture.height * width / picture.width)), Image.LANCZOS))
        thumb.focus()
        page.keyboard.press("ArrowRight")
    palette = [p.quantize(colors=128, method=Image.Quantize.MEDIANCUT) for p in pictures]
    palette[0].save(path, save_all=True, append_images=palette[1:], loop=0, optimize=True,
                    duration=[ms] * (len(palette) - 1) + [ms * 3])


def section(page, heading: str, path: Path, pad: int = 16) -> None:
    """Scroll `heading` to the top and save the strip from it down to the page's last chart."""
    title = page.get_by_role("heading", name=heading)
    title.evaluate("e => e.scrollIntoView({block: 'start'})")  # the app scrolls inside its main container
    shown = page.locator('[data-testid="stPlotlyChart"]:visible')  # a page's other tabs hold charts too
    shown.last.wait_for(timeout=30_000)
    page.wait_for_timeout(500)
    top, main = title.bounding_box(), page.locator(MAIN).bounding_box()
    last = shown.last.bounding_box()
    y0, y1 = max(top["y"] - pad, 0), last["y"] + last["height"] + pad
    page.screenshot(path=str(path), clip=dict(x=main["x"], y=y0, width=main["width"], height=y1 - y0))


if __name__ == "__main__":
    main(sys.argv[1:])
