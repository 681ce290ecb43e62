"""The Lesson's tiny training run (issue 32): how long it takes on one and two CPU threads, and how fast a page's
work stays while the run trains in the background the way the app runs it (ui/shell/once.py's daemon thread).

A page's work is timed two ways, idle and then while the tiny run trains in a `Once` slot's thread (runs one
after another until enough samples): the Attention page's forward pass (the shipped model, traced, on the lesson's
attention sentence), each in a new thread as Streamlit runs each script run in a new thread; and a whole redraw of
the Attention page after a new sentence (AppTest, server time). torch loads with the server's OpenMP settings
(ui/shell/serve.py).

    .venv/bin/python -m bench.lesson_run [--rounds 2] [--redraws 20]

Prints the run's seconds on 1 and 2 threads (each round runs both, back to back); for the run on 1 and on 2 threads,
the forward's median and 90th percentile in ms, idle and during the run, and how long the run took; then the same
for the Attention page's redraws (the runs one after another until there are as many samples as idle).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bertviz_lab.ui.shell.serve import openmp_settings

with openmp_settings():  # torch's threads as the server sets them (./lab.sh app)
    import torch

from bertviz_lab.bert.checkpoint import load_checkpoint  # noqa: E402
from bertviz_lab.ui.shell import once  # noqa: E402
from bertviz_lab.views.lesson import runs as lesson_runs  # noqa: E402

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "bertviz-mini"
SENTENCE = "the animal did not cross the street because it was too tired ."


@contextmanager
def tiny_threads(n: int) -> Iterator[None]:
    old, lesson_runs.TINY_THREADS = lesson_runs.TINY_THREADS, n
    try:
        yield
    finally:
        lesson_runs.TINY_THREADS = old


def run_seconds(threads: int) -> float:
    start = time.perf_counter()
    with tiny_threads(threads):
        lesson_runs.train_tiny(0)
    return time.perf_counter() - start


def page_ms(forward) -> float:
    """One forward in a new thread, as a Streamlit script run; its wall time in ms."""
    took = []
    thread = threading.Thread(target=lambda: took.append(forward()))
    thread.start()
    thread.join()
    return took[0]


def sample(measure, until) -> list[float]:
    times = []
    while not until():
        times.append(measure())
    return times


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    return (f"median {statistics.median(ordered):.0f} ms, p90 {ordered[int(0.9 * (len(ordered) - 1))]:.0f} ms "
            f"(n={len(ordered)})")


def during_runs(measure, n: int) -> tuple[list[float], list[float], list[float]]:
    """n samples of `measure()` idle, then n while tiny runs train in a Once slot's thread; and each run's seconds."""
    idle = [measure() for _ in range(n)]
    busy, took = [], []
    while len(busy) < n:
        slot: once.Once = once.Once("The tiny training run")
        start = time.perf_counter()
        job, _ = slot.start(lambda report: lesson_runs.train_tiny(0, report))
        busy += sample(measure, job.done.is_set)
        took.append(time.perf_counter() - start)
    return idle, busy, took


def attention_redraws(n: int) -> None:
    from streamlit.testing.v1 import AppTest

    from bench.app_latency import sentences

    at = AppTest.from_file(str(SHIPPED.parents[1] / "pages" / "attention.py"), default_timeout=120).run()
    texts = (text for seed in itertools.count(1) for text in sentences(50, 12, seed=seed))  # each one new

    def redraw() -> float:
        at.text_area("attn.text_a").set_value(next(texts))
        start = time.perf_counter()
        at.run()
        assert not at.exception, at.exception
        return (time.perf_counter() - start) * 1000

    for _ in range(3):
        redraw()
    for threads in (1, 2):
        with tiny_threads(threads):
            idle, busy, took = during_runs(redraw, n)
        print(f"Attention redraw idle: {summary(idle)}; during runs on {threads} thread(s): {summary(busy)}; "
              f"the runs took {', '.join(f'{t:.1f}' for t in took)} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redraws", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    run_seconds(1)  # the corpus and the tokenizer load once
    for _ in range(args.rounds):
        print(f"tiny run: {run_seconds(1):.2f} s on 1 thread, {run_seconds(2):.2f} s on 2")
    ckpt = load_checkpoint(SHIPPED)
    encoding = ckpt.tokenizer.encode(SENTENCE)
    ids, segments = torch.tensor([encoding.ids]), torch.tensor([encoding.segment_ids])

    @torch.no_grad()
    def forward() -> float:
        start = time.perf_counter()
        ckpt.model.eval()(ids, segments, trace=True)
        return (time.perf_counter() - start) * 1000

    for _ in range(args.rounds):
        for threads in (1, 2):
            end = time.perf_counter() + 3
            idle = sample(lambda: page_ms(forward), lambda end=end: time.perf_counter() > end)
            slot: once.Once = once.Once("The tiny training run")
            start = time.perf_counter()
            with tiny_threads(threads):
                job, _ = slot.start(lambda report: lesson_runs.train_tiny(0, report))
                busy = sample(lambda: page_ms(forward), job.done.is_set)
            took = time.perf_counter() - start
            print(f"run on {threads} thread(s): page forward idle {summary(idle)}; during the run {summary(busy)}; "
                  f"the run took {took:.2f} s")
    attention_redraws(args.redraws)


if __name__ == "__main__":
    main()
