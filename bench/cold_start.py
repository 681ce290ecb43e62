"""Cold start: seconds from `./lab.sh app` until the first page shows its answer in a browser.

Each round starts a fresh server with `./lab.sh app --server.headless true --server.port PORT` (the venv
already installed), polls its health check every 50 ms, and the moment it answers opens the page in headless
Chromium (launched before the clock starts, as a teacher's browser is already open; a fresh browser context
each round, so no cached assets) and waits until the page shows its answer and its script has finished:
  - predict: /predict, the first page that shows a prediction (the guesses for the default sentence's mask)
  - home: the default page, the active model's card (the model loaded, no forward pass)
Then the breakdown: server process start to health OK and health to the page shown (from the rounds), and,
in a fresh Python process each round (torch's threads set as the server sets them), the work a first script
run needs: importing the modules app.py and the page import (Streamlit itself is loaded before the health
check), loading the shipped model, and the page's first forward pass. `./lab.sh app` starts that work in a
background thread as the server starts (bertviz_lab/ui/shell/serve.py). Goal: the prediction within 5 s on 2 cores.

    .venv/bin/python -m bench.cold_start [--rounds 5] [--pages predict home]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.common import free_port, stop
from bertviz_lab.ui.shell.serve import OPENMP

ROOT = Path(__file__).resolve().parents[1]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# page -> (URL path, its file, text that shows only once the page has its answer)
PAGES = {"predict": ("predict", "pages/predict.py", "The guess"),
         "home": ("", "pages/home.py", "Heads per layer")}
GOAL_S = 5.0

# What a first script run pays inside the server, each step timed in a fresh process; prints one JSON line.
INSIDE = """
import json, sys, time
t0 = time.perf_counter()
import streamlit
t1 = time.perf_counter()
for name in sys.argv[1:]:
    __import__(name)
t2 = time.perf_counter()
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.ui.shell.state import Model, Predict
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as predict
ckpt = load_checkpoint(Model.PATH.default)
t3 = time.perf_counter()
encoding = inputs.encode(ckpt.tokenizer, ckpt.model, Predict.SENTENCES.text_a.default)
predict.explore_masks(ckpt.model, ckpt.tokenizer, encoding, [], top_k=5)
t4 = time.perf_counter()
print(json.dumps({"streamlit import": t1 - t0, "app + page imports": t2 - t1, "model load": t3 - t2,
                  "first forward": t4 - t3}))
"""


def imported_modules(*files: str) -> list[str]:
    """The modules these files import at their top level, in order (what the first script run imports)."""
    names = []
    for file in files:
        for node in ast.parse((ROOT / file).read_text()).body:
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
    return list(dict.fromkeys(names))


def wait_health(url: str, proc, log: Path, timeout: float = 120) -> float:
    """perf_counter() when the server first answers its health check (polled every 50 ms)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).status == 200:
                return time.perf_counter()
        except OSError:
            pass
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the server stopped with exit code {proc.returncode}: {tail}")
        time.sleep(0.05)
    raise RuntimeError(f"the server did not answer within {timeout:.0f} s")


def one_round(browser, page_name: str, log: Path) -> tuple[float, float]:
    """(seconds from the server's start to health OK, from health OK to the page shown)."""
    path, _, text = PAGES[page_name]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", "BERTVIZ_"))}
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(["./lab.sh", "app", "--server.headless", "true", "--server.port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            healthy = wait_health(f"http://localhost:{port}", proc, log)
            page.goto(f"http://localhost:{port}/{path}", wait_until="commit")
            page.get_by_text(text, exact=False).first.wait_for(timeout=120_000)
            page.wait_for_selector(IDLE, timeout=120_000)
            shown = time.perf_counter()
            if page.locator('[data-testid="stException"]').count():
                raise RuntimeError(f"the {page_name} page shows an exception")
        finally:
            context.close()
            stop(proc)
    return healthy - start, shown - healthy


def inside_round(page_name: str) -> dict[str, float]:
    modules = imported_modules("app.py", PAGES[page_name][1])
    env = {**OPENMP, **os.environ}  # torch's threads as the server sets them
    out = subprocess.run([sys.executable, "-c", INSIDE, *modules], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", nargs="+", choices=list(PAGES), default=["predict", "home"])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.browser.harness import CHROMIUM, CHROMIUM_ARGS

    print(f"cold start, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for page_name in args.pages:
            totals, parts = [], {"server start -> health OK": [], "health OK -> page shown": []}
            for i in range(args.rounds):
                to_health, to_shown = one_round(browser, page_name, Path(tmp) / "server.log")
                totals.append(to_health + to_shown)
                parts["server start -> health OK"].append(to_health)
                parts["health OK -> page shown"].append(to_shown)
                print(f"  {page_name} round {i + 1}: {totals[-1]:.2f} s  (health {to_health:.2f} s, "
                      f"then {to_shown:.2f} s)", flush=True)
            for _ in range(args.rounds):  # the same work in a fresh process: where a first run spends it
                for step, seconds in inside_round(page_name).items():
                    parts.setdefault(f"  {step}", []).append(seconds)
            median = statistics.median(totals)
            print(f"{page_name}: median {median:.2f} s  ({'meets' if median < GOAL_S else 'MISSES'} < {GOAL_S:.0f} s)")
            for part, seconds in parts.items():
                print(f"  {part:<28} median {statistics.median(seconds):5.2f} s")
        browser.close()


if __name__ == "__main__":
    main()
