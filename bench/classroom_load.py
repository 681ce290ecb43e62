"""A classroom typing at once: N sessions on one real app server, half on Mask & predict and half on
Attention, each submitting several distinct sentences of its own.

Starts the app as `./lab.sh app` does (bertviz_lab.ui.shell.serve: the repo's .streamlit config; headless,
127.0.0.1, file watcher off), opens every session at the same time, then releases them together. A session submits
a sentence, waits until the run is over and checks that the page shows the answer computed here for that
sentence (the filled sentence on Mask & predict, the top guess and its probability on Attention), and
submits the next one after reading it and typing (--think, 3 s on average; 0: at once). The first
sentences go all at once in every case: the whole class pressing Ctrl+Enter together.

Two drivers:
  - protocol (default): each session is a websocket speaking Streamlit's own protocol (bench.streamlit_client),
    as a browser does, but costing the machine almost nothing: in a classroom every student's browser runs
    on the student's own machine, so the server's 2 cores are the server's;
  - browser: one headless Chromium, one browser context per student, on the same cores as the server (under
    `nice`, --browser-nice, default 19); the end-to-end check, which also pays for drawing N pages.

Two times per redraw:
  - server: the app script's run on the server (timed inside the server around Streamlit's script execution,
    matched to the sentence), which is what the goal is about;
  - client: from the submit to the answer (protocol: the script_finished message; browser: the answer drawn
    on the page), what a student waits, less (protocol) or plus (browser) the drawing.
Every session must get the right answer for every sentence, with no error box, and the model must be loaded
once (the server log's "loading model ... on ..." lines).

    .venv/bin/python -m bench.classroom_load [--sessions 30] [--sentences 5] [--think 3] [--driver browser]
                                             [--reveal 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import os
import platform
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import free_port, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"]
PAGES = {"predict": "Mask & predict", "attention": "Attention"}  # URL path -> page title
TEXT_KEYS = {"predict": "predict.text_a", "attention": "attn.text_a"}  # each page's Sentence A widget
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
LOAD_LINE = re.compile(r"loading model (\S+) on (\w+)")
# a script run: its seconds, page, sentence digest, its thread's CPU seconds, the server's CPU seconds so far,
# and its session
RUN_LINE = re.compile(r"classroom_load run ([0-9.]+) (\w+) ([0-9a-f]{12}) cpu ([0-9.]+) ([0-9.]+) session (\S+)")
PROBLEMS = ('[data-testid="stException"], [data-testid="stAlertContentError"], '
            '[data-testid="stAlertContentWarning"]')
# True once the app is idle and shows this sentence's answer (or an error box); fresh elements only.
ANSWERED = """([page, answer]) => {
  if (document.querySelector('%s')) return true;
  if (!document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')) return false;
  const fresh = '[data-testid="stElementContainer"][data-stale="false"] ';
  if (page === "predict") {
    return [...document.querySelectorAll(fresh + '[data-testid="stCode"]')]
      .some(e => e.innerText.replace(/\\s+/g, " ").trim() === answer);
  }
  const [want, wantToken, wantP] = answer.split("|");
  return [...document.querySelectorAll(fresh + '[data-testid="stDataFrame"] tbody tr:first-child')].some(row => {
    const [where, rank, token, p] = [...row.children].map(c => c.innerText.trim());
    return where === want && rank === "1" && token === wantToken && Math.abs(Number(p) - Number(wantP)) < 1e-3;
  });
}""" % PROBLEMS.replace("'", '"')  # noqa: UP031 - JavaScript: braces everywhere, one %s
ATTENTION_TAB = "Switch heads off"  # the Attention page's tab that holds the predictions table
TAB_OPEN = """(name) => document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')
  && [...document.querySelectorAll('[role="tab"][aria-selected="true"]')].some(t => t.innerText.trim() === name)
  && document.querySelector('[data-testid="stElementContainer"][data-stale="false"] [data-testid="stDataFrame"]')"""
POLL_MS = 50  # how often each page checks for its answer: finer polling costs Chromium CPU the server shares
FIRST_VIEW_TIMEOUT_S = 600  # N pages opening at once on 2 cores: Chromium parses Streamlit's JS N times
FIRST_VIEW = """() => document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')
  && document.querySelector('textarea[aria-label="Sentence A"]')
  && document.querySelector('[data-testid="stPlotlyChart"] .main-svg')"""


@dataclass(frozen=True)
class Job:
    """One sentence one session submits, and the answer the page must then show."""

    page: str  # "predict" or "attention"
    text: str
    answer: str  # predict: the filled sentence; attention: "<position> [MASK]|<top token>|<its probability>"


@dataclass(frozen=True)
class Redraw:
    session: int
    job: Job
    browser_s: float | None  # None: no answer came
    problem: str = ""  # an error box's text, or why no answer came


def digest(text: str) -> str:
    """What the server logs in place of a sentence."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def masked_sentences(n: int, seed: int) -> list[str]:
    """`n` distinct story sentences of 5+ words with one word replaced by [MASK]."""
    from bertviz_lab.corpus import generate_documents

    rng, out, seen = random.Random(seed), [], set()
    for document in generate_documents(20 + 2 * n, seed=seed):
        for line in document:
            words = line.split()
            if len(words) < 5 or line in seen:
                continue
            seen.add(line)
            words[rng.randrange(1, len(words) - 1)] = "[MASK]"
            out.append(" ".join(words))
            if len(out) == n:
                return out
    raise RuntimeError(f"the story generator gave fewer than {n} distinct sentences")


def answer(ckpt, page: str, text: str) -> str | None:
    """What the page shows for `text`, computed in this process; None when the top two guesses are too
    close to call (another process may sum in another order and swap them)."""
    from bertviz_lab.views import inputs
    from bertviz_lab.views.predict import guesses as vpr

    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text)
    report = vpr.explore_masks(ckpt.model, ckpt.tokenizer, encoding, top_k=2)
    mask = report.independent.masks[0]
    first, second = mask.candidates
    if first.prob - second.prob < 1e-3:
        return None
    if page == "predict":
        return report.independent_text
    return f"{mask.position} [MASK]|{first.token}|{first.prob:.6f}"


def plan(ckpt, sessions: int, per_session: int, seed: int = 0) -> list[list[Job]]:
    """Sentences for each session, all distinct; even sessions on Mask & predict, odd ones on Attention."""
    texts = iter(masked_sentences(3 * sessions * per_session, seed))
    plans = []
    for session in range(sessions):
        page, jobs = ("predict", "attention")[session % 2], []
        while len(jobs) < per_session:
            text = next(texts)
            found = answer(ckpt, page, text)
            if found is not None and (not jobs or found.split("|")[:2] != jobs[-1].answer.split("|")[:2]):
                jobs.append(Job(page, text, found))  # never the previous answer again: a stale page can't pass
        plans.append(jobs)
    return plans


def timed_streamlit() -> None:
    """The app as `./lab.sh app` serves it (bertviz_lab.ui.shell.serve), logging each script run's seconds and the
    sentence it drew (by digest) to stderr."""
    from streamlit.runtime.scriptrunner import script_runner

    from bertviz_lab.ui.shell import serve

    inner = script_runner.exec_func_with_error_handling

    def timed(func, ctx):
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return inner(func, ctx)
        finally:
            seconds, own = time.perf_counter() - start, time.thread_time() - cpu
            for page, key in TEXT_KEYS.items():
                with contextlib.suppress(Exception):
                    text = ctx.session_state[key]
                    sys.stderr.write(f"classroom_load run {seconds:.4f} {page} {digest(text)} cpu {own:.4f} "
                                     f"{time.process_time():.3f} session {ctx.session_id[:8]}\n")  # one write:
                    sys.stderr.flush()  # print() writes the newline apart, and two threads' lines could merge
                    break

    script_runner.exec_func_with_error_handling = timed
    serve.main(sys.argv[1:])


@contextlib.contextmanager
def server(port: int, log: Path, cpus: set[int] | None = None, threads: int = 0):
    """The app on 127.0.0.1:`port`, its stdout and stderr in `log`; stopped afterwards.

    `cpus`: the cores it may use (default: all); `threads`: torch's threads per forward (0: torch's default).
    """
    cmd = [sys.executable, "-c", "from bench.classroom_load import timed_streamlit; timed_streamlit()",
           "--server.headless", "true", "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.fileWatcherType", "none"]
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
        env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=pin)
        try:
            wait_healthy(url, proc, log)
            yield url
        finally:
            stop(proc)


async def _session(browser, url: str, index: int, jobs: list[Job], everyone: asyncio.Barrier, timeout_s: float,
                   think: float):
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page, redraws = await context.new_page(), []
    try:
        start = time.perf_counter()
        try:
            await page.goto(f"{url}/{jobs[0].page}")
            await page.wait_for_function(FIRST_VIEW, polling=250, timeout=FIRST_VIEW_TIMEOUT_S * 1000)
        except BaseException:
            await everyone.abort()  # the others would wait for this one forever
            raise
        if jobs[0].page == "attention":  # the predictions with heads switched off: the answer checked (ANSWERED)
            await page.get_by_role("tab", name=ATTENTION_TAB).click()  # a keyed tab: the page reruns, and keeps it
            await page.wait_for_function(TAB_OPEN, arg=ATTENTION_TAB, polling=250,
                                         timeout=FIRST_VIEW_TIMEOUT_S * 1000)
        first = time.perf_counter() - start
        await everyone.wait()  # every session has its page: everyone types at once
        box = page.get_by_label("Sentence A")
        rng = random.Random(index)
        for n, job in enumerate(jobs):
            await asyncio.sleep(rng.uniform(0, 2 * think) if n else 0)  # reading the answer, typing the next
            await box.fill(job.text)
            start = time.perf_counter()
            await box.press("Control+Enter")
            try:
                await page.wait_for_function(ANSWERED, arg=[job.page, job.answer], polling=POLL_MS,
                                             timeout=timeout_s * 1000)
                seconds, problem = time.perf_counter() - start, ""
            except Exception as exc:  # a Playwright timeout: say which, keep the other sessions going
                tab = await page.locator('[role="tab"][aria-selected="true"]').all_inner_texts()
                seconds, problem = None, f"no answer within {timeout_s:g} s ({type(exc).__name__}; open tab {tab})"
            boxes = await page.locator(PROBLEMS).all_inner_texts()
            if await page.evaluate("() => document.body.innerText.includes('Traceback')"):
                boxes.append("a traceback on the page")
            if boxes:
                problem = " / ".join(b.strip().splitlines()[0] for b in boxes if b.strip()) or "an empty error box"
                seconds = None
            redraws.append(Redraw(index, job, seconds, problem))
        return first, redraws
    finally:
        await context.close()


async def _drive(url: str, plans: list[list[Job]], timeout_s: float, nice: int, think: float, tmp: str):
    from playwright.async_api import async_playwright

    executable = Path(tmp) / "chromium"  # Chromium under `nice`: the server comes first on shared cores
    executable.write_text(f'#!/bin/sh\nexec nice -n {nice} {shlex.quote(CHROMIUM)} "$@"\n')
    executable.chmod(0o755)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            everyone = asyncio.Barrier(len(plans))
            results = await asyncio.gather(*(_session(browser, url, i, jobs, everyone, timeout_s, think)
                                             for i, jobs in enumerate(plans)))
        finally:
            await browser.close()
    return [first for first, _ in results], [r for _, redraws in results for r in redraws]


def shows_answer(job: Job, run) -> bool:
    """The protocol driver's check of a finished run, the same as ANSWERED's in the browser."""
    import pyarrow as pa

    if job.page == "predict":
        return any(" ".join(code.code_text.split()) == job.answer for code in run.of("code"))
    want, token, p = job.answer.split("|")
    for frame in run.of("dataframe"):
        table = pa.ipc.open_stream(frame.arrow_data.data).read_all()
        if "[MASK] at" in table.column_names and table.num_rows:
            row = table.slice(0, 1).to_pylist()[0]
            return (row["[MASK] at"] == want and row["rank"] == 1 and row["all heads"] == token
                    and abs(row["p (all heads)"] - float(p)) < 1e-3)
    return False


async def _protocol_session(url: str, index: int, jobs: list[Job], everyone: asyncio.Barrier, timeout_s: float,
                            think: float):
    from bench.streamlit_client import Session

    start = time.perf_counter()
    try:
        session, run = await Session.open(url, jobs[0].page, FIRST_VIEW_TIMEOUT_S)
        box = session.widget_id(run, "text_area", "Sentence A")
    except BaseException:
        await everyone.abort()  # the others would wait for this one forever
        raise
    first, redraws = time.perf_counter() - start, []
    await everyone.wait()  # every session has its page: everyone types at once
    rng = random.Random(index)
    try:
        for n, job in enumerate(jobs):
            await asyncio.sleep(rng.uniform(0, 2 * think) if n else 0)  # reading the answer, typing the next
            try:
                run = await session.rerun({box: job.text}, timeout_s)
            except TimeoutError:  # the stream now holds that run's late messages: this session stops here
                redraws += [Redraw(index, j, None, f"no answer within {timeout_s:g} s") for j in jobs[n:]]
                break
            problems = run.problems() or ([] if shows_answer(job, run) else ["the page shows another answer"])
            redraws.append(Redraw(index, job, None if problems else run.seconds, " / ".join(problems)))
    finally:
        await session.close()
    return first, redraws


async def _drive_protocol(url: str, plans: list[list[Job]], timeout_s: float, think: float, reveal: int = 0):
    """The typing sessions, and `reveal` Lesson sessions pressing Reveal on the training step as they start."""
    from bench import lesson_reveal

    everyone = asyncio.Barrier(len(plans) + reveal)
    results = await asyncio.gather(*(_protocol_session(url, i, jobs, everyone, timeout_s, think)
                                     for i, jobs in enumerate(plans)),
                                   *(lesson_reveal.session(url, i, everyone, timeout_s, FIRST_VIEW_TIMEOUT_S)
                                     for i in range(reveal)))
    typing, lessons = results[:len(plans)], results[len(plans):]
    return ([first for first, _ in typing], [r for _, redraws in typing for r in redraws],
            [answer for _, answer in lessons])


def drive(url: str, plans: list[list[Job]], timeout_s: float = 120.0, nice: int = 0, think: float = 0.0,
          driver: str = "browser", reveal: int = 0):
    """Run every session's jobs at once, `think` s apart on average; (first-view seconds, every redraw), and
    with `reveal` (protocol driver only) every Lesson session's Reveal too."""
    if driver == "protocol":
        firsts, redraws, reveals = asyncio.run(_drive_protocol(url, plans, timeout_s, think, reveal))
        return (firsts, redraws, reveals) if reveal else (firsts, redraws)
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_drive(url, plans, timeout_s, nice, think, tmp))


def model_loads(log: str) -> list[str]:
    """The "loading model <path> on <device>" lines the server wrote: one per model load."""
    return [f"{m.group(1)} on {m.group(2)}" for m in LOAD_LINE.finditer(log)]


def server_seconds(log: str, jobs: list[Job], column: int = 1) -> dict[str, list[float]]:
    """Per page, the server's script-run seconds of the runs that drew one of `jobs`' sentences
    (`column` 4: the CPU seconds of the run's own thread instead)."""
    wanted = {(job.page, digest(job.text)) for job in jobs}
    out: dict[str, list[float]] = {page: [] for page in PAGES}
    for m in RUN_LINE.finditer(log):
        if (m.group(2), m.group(3)) in wanted:
            out[m.group(2)].append(float(m.group(column)))
    return out


def server_cpu_per_redraw(log: str, jobs: list[Job]) -> float | None:
    """The server process's CPU seconds (every thread: scripts, event loop, torch's workers) from the end of
    the last run before the first job's to the end of the last job's, per job run."""
    wanted = {(job.page, digest(job.text)) for job in jobs}
    before, after, n = None, None, 0
    for m in RUN_LINE.finditer(log):
        if (m.group(2), m.group(3)) in wanted:
            after, n = float(m.group(5)), n + 1
        elif n == 0:
            before = float(m.group(5))
    return None if before is None or not n else (after - before) / n


def distribution(label: str, seconds: list[float]) -> str:
    if not seconds:
        return f"  {label:<26} n=0"
    ms = np.asarray(seconds) * 1000
    median, p90, p95 = np.percentile(ms, [50, 90, 95])
    return (f"  {label:<26} n={len(ms):<3} median {median:6.0f} ms  p90 {p90:6.0f} ms  p95 {p95:6.0f} ms  "
            f"max {ms.max():6.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30, help="sessions at once (half on each page)")
    parser.add_argument("--sentences", type=int, default=5, help="distinct sentences each session submits")
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    parser.add_argument("--seed", type=int, default=0, help="which story sentences")
    parser.add_argument("--server-cpus", default="", help="pin the server to these cores, e.g. 0,1 (Chromium "
                                                          "can then use the others, as students' own machines)")
    parser.add_argument("--server-threads", type=int, default=0, help="OMP_NUM_THREADS for the server "
                                                                     "(default: unset, torch uses every core)")
    parser.add_argument("--browser-nice", type=int, default=19, help="Chromium's niceness (default 19: on a "
                                                                     "machine it shares, it waits for the server)")
    parser.add_argument("--driver", choices=("protocol", "browser"), default="protocol",
                        help="protocol (default): websocket clients that cost the server's machine almost nothing, "
                             "as students' own browsers; browser: headless Chromium on the same cores")
    parser.add_argument("--think", type=float, default=3.0,
                        help="mean seconds between an answer and the next sentence, drawn from 0..2x (default 3: "
                             "reading the answer and typing the next; 0: no student ever pauses, the server at "
                             "full load, a test of its capacity)")
    parser.add_argument("--reveal", type=int, default=0, metavar="N",
                        help="also N Lesson sessions that press Reveal on the training step together as the typing "
                             "starts (protocol driver): the tiny run is trained once for all of them")
    args = parser.parse_args()
    if args.reveal and args.driver != "protocol":
        parser.error("--reveal needs the protocol driver")
    cpus = {int(c) for c in args.server_cpus.split(",")} if args.server_cpus else None
    busy = os.getloadavg()[0]  # other work on the machine before this run starts
    from bertviz_lab.bert.checkpoint import load_checkpoint

    plans = plan(load_checkpoint(SHIPPED), args.sessions, args.sentences, args.seed)
    jobs = [job for session in plans for job in session]
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        with server(args.port or free_port(), log_path, cpus, args.server_threads) as url:
            firsts, redraws, *lessons = drive(url, plans, nice=args.browser_nice, think=args.think,
                                              driver=args.driver, reveal=args.reveal)
        log = log_path.read_text(errors="replace")
    loads, served = model_loads(log), server_seconds(log, jobs)
    clients = "websocket clients" if args.driver == "protocol" else f"Chromium (nice {args.browser_nice})"
    where = f"server on cores {sorted(cpus)}" if cpus else f"server and {clients} share them"
    where += f", OMP_NUM_THREADS={args.server_threads}" if args.server_threads else ""
    print(f"{dt.date.today()} · {platform.node()} · {os.cpu_count()} cores, {where} · load average "
          f"before {busy:.1f} · {args.sessions} sessions x {args.sentences} sentences, all at once, think "
          f"{args.think:g} s, "
          f"model {SHIPPED.name}")
    print("server time (the app script's run for each new sentence, timed inside the server):")
    for page, title in PAGES.items():
        print(distribution(title, served[page]))
    print(distribution("overall", served["predict"] + served["attention"]))
    cpu = server_seconds(log, jobs, column=4)
    print("server CPU (the run's own thread; what the redraw costs, whatever the machine's load):")
    for page, title in PAGES.items():
        print(distribution(title, cpu[page]))
    per_redraw = server_cpu_per_redraw(log, jobs)
    if per_redraw is not None:
        print(f"  whole server process (every thread), per redraw: {per_redraw * 1000:.0f} ms of CPU")
    print("client time (submit to script_finished, over the websocket):" if args.driver == "protocol" else
          "browser time (Ctrl+Enter to the answer on the page; Chromium shares the same cores):")
    for page, title in PAGES.items():
        print(distribution(title, [r.browser_s for r in redraws if r.job.page == page and r.browser_s]))
    print(distribution("overall", [r.browser_s for r in redraws if r.browser_s]))
    print(distribution("first view (all at once)", firsts))
    failed = [r for r in redraws if r.browser_s is None]
    answered = len(redraws) - len(failed)
    print(f"answers: {answered} of {len(jobs)} right, no error box" if not failed else
          f"answers: {answered} of {len(jobs)} right; FAILED:")
    for r in failed:
        print(f"    session {r.session} ({PAGES[r.job.page]}) {r.job.text!r}: {r.problem}")
    print(f"model loads in the server log: {len(loads)} ({'; '.join(loads) or 'none'})"
          + ("" if len(loads) == 1 else "  <- must be 1"))
    unrevealed = reveal_report(lessons[0], log) if lessons else []
    print("goal: server p95 under 0.5 s for 30 sessions of the shipped model on 2 cores"
          + ("; with the class pressing Reveal: the last answer within 15 s, the typing pages' p95 under 1 s"
             if lessons else ""))
    sys.exit(0 if not failed and not unrevealed and len(loads) == 1 else 1)


def reveal_report(reveals, log: str) -> list:
    """Print the Lesson sessions' waits from Reveal to the revealed run; returns the ones that got none."""
    waited = [r.seconds for r in reveals if r.seconds is not None]
    print(f"Lesson, Reveal on the training step ({len(reveals)} sessions at once; press to the revealed run):")
    print(distribution("Reveal", waited))
    if waited:
        print(f"  last answer {max(waited):.1f} s; runs shown: {sorted({r.losses for r in reveals if r.losses})} "
              "(one run: every session the same)")
    trained = log.count("The tiny training run: computed")
    print(f"  tiny runs trained in the server: {trained}" + ("" if trained <= 1 else "  <- must be 1"))
    failed = [r for r in reveals if r.seconds is None]
    for r in failed:
        print(f"    lesson session {r.session}: {r.problem}")
    return failed + ([None] if trained > 1 else [])


if __name__ == "__main__":
    main()
