"""Drive the real app in headless Chromium: start it as `./lab.sh app` does on a loopback port,
open pages, wait for scripts to finish, take screenshots. Used by the browser tests and by
docs/make_screenshots.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from bench.common import free_port, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
CHART = '[data-testid="stPlotlyChart"] .main-svg'
EXCEPTION = '[data-testid="stException"]'
# Resolves once nothing in the app has changed for `quiet` ms (at most `most` ms): the script's end is not the page's.
# A table's grid and a chart are components loaded on first use, drawn a few frames after the script ends, and a
# slow machine (an AMD EPYC 2.7 times slower than the docs' machine, or Chromium throttled 8 times) draws them
# seconds later: a test that looked then found no table on a page that has three.
# An element drawn as a placeholder (a skeleton) until its code has loaded.
DRAWN_JS = "() => !document.querySelector('[data-testid=\"stSkeleton\"]')"
QUIET_JS = """([quiet, most]) => new Promise(done => {
  const start = performance.now(); let timer = null;
  const observer = new MutationObserver(() => { clearTimeout(timer); wait(); });
  const finish = () => { observer.disconnect(); done(performance.now() - start); };
  const wait = () => { timer = setTimeout(finish, Math.max(0, Math.min(quiet, most - (performance.now() - start)))); };
  observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
  wait(); })"""


NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # torch in the server (and in the runs it starts) sees no CUDA GPU


@contextlib.contextmanager
def streamlit_server(env: dict | None = None, *args: str, address: str = "127.0.0.1", script: str = "app.py",
                     log: Path | None = None, gpu: bool = False):
    """Yield the base URL (on 127.0.0.1) of a fresh server for `script`, run from the repository root so
    .streamlit/config.toml applies; extra `args` go to streamlit; its output goes to `log` if given.
    app.py is served as `./lab.sh app` serves it (bertviz_lab.ui.shell.serve). The server is stopped afterwards.
    Unless `gpu`, the server sees no GPU (NO_GPU): the sidebar's device picker starts on "auto", which would run
    the model on a GPU where there is one, and the tests check what it shows against numbers computed on the CPU."""
    port = free_port()
    serve = ["-m", "bertviz_lab.ui.shell.serve"] if script == "app.py" else ["-m", "streamlit", "run", script]
    cmd = [sys.executable, *serve, "--server.headless", "true",
           "--server.address", address, "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", *args]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", "BERTVIZ_CLASSROOM"))}
    if log is not None:  # test-artifacts/ may not exist yet: a browser test run alone, on a fresh clone
        log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the server writes it
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**clean, **({} if gpu else NO_GPU), **(env or {})}, stdout=out,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield url
    finally:
        stop(proc)
        if log is not None:
            out.close()


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script has started and finished (a rerun flips the state to running first), no element waits
    for its code (DRAWN_JS), nothing has changed since (QUIET_JS: 400 ms without a change, at most 15 s), and the
    script is still idle then."""
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_function(DRAWN_JS, timeout=timeout_ms)
    page.evaluate(QUIET_JS, [400, 15_000])
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def open_page(page, url: str, path: str = "") -> None:
    page.goto(f"{url}/{path}")
    wait_idle(page)


def pick(page, label: str, names: list[str]) -> None:
    """Choose `names` in the multiselect labelled `label` (typing opens the list on the match; Enter picks it)."""
    box = page.get_by_role("combobox", name=label)  # the multiselect's input
    for name in names:
        box.click()
        box.fill(name)
        page.get_by_role("option", name=name).first.wait_for(timeout=30_000)
        box.press("Enter")
        wait_idle(page)
    page.keyboard.press("Escape")
    wait_idle(page, 120_000)
