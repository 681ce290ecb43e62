"""The wait a class feels: the classroom preset's whole live pretraining run, and where its time goes.

    .venv/bin/python -m bench.class_wait [--runs 3] [--threads 2] [--steps 600]

`--threads 0` runs it as the Start button does: every core no other program is using (pretrain/threads.py).

1. `python -m bertviz_lab train --run-dir D --threads 2` (the classroom preset: 600 steps, 2 layers of
   128, batches of 128 pairs of 32 tokens) from a fresh folder, `--runs` times, each timed from the
   command's start to its exit, as a teacher sees it: `preset run: median N s`. Each run also gives the
   held-out loss at its last step, its checkpoints and snapshots, its peak memory and what it wrote.
2. The same run once more in this process, with each part of it timed (the Trainer's methods wrapped):
   the interpreter's start and the imports (each as its own `python -c`), the setup (corpus, tokenizer,
   model), the steps (and within them, making the batches), the evaluations, the checkpoint writes, the
   snapshots, and the rest (records and status).
Nothing here is asserted: it prints what it measured. Run on a quiet machine; figures move with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from bertviz_lab.metrics import EVAL
from bertviz_lab.pretrain import process, threads
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import TRAIN_STREAM, Trainer

GOAL_S = 20.0  # issue 39: the preset run end to end in 20 s or less on 2 cores


def command_run(threads: int, steps: int) -> dict:
    """One `train` command from a fresh folder: its wall time, peak memory, bytes written, last records."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(run_dir),
                                  "--threads", str(threads), "--steps", str(steps)], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise SystemExit(f"the train command failed (exit {child.returncode})")
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        evals = [r for r in records if r["kind"] == EVAL]
        return dict(seconds=seconds, peak_mb=usage.ru_maxrss / 1024, last_eval=evals[-1],
                    written_mb=sum(f.stat().st_size for f in run_dir.rglob("*") if f.is_file()) / 1e6,
                    checkpoints=len(list((run_dir / "checkpoints").iterdir())),
                    snapshots=sum(1 for _ in (run_dir / "snapshots.jsonl").open()))


def python_seconds(code: str, runs: int = 3) -> float:
    """Median wall time of `python -c code` in a fresh interpreter."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_phases(threads: int, steps: int) -> tuple[dict[str, float], float]:
    """The preset run in this process (process.execute, as the command runs it), with the seconds spent in
    each of the Trainer's methods; returns them and the whole run's seconds."""
    spent: dict[str, float] = defaultdict(float)
    originals = {}

    def wrap(name: str, phase: str) -> None:
        method = originals[name] = getattr(Trainer, name)

        def timed(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:  # a held-out batch is part of its evaluation, timed there
                if phase != "batches" or kwargs.get("stream", TRAIN_STREAM) == TRAIN_STREAM:
                    spent[phase] += time.perf_counter() - start
        setattr(Trainer, name, timed)

    for name, phase in (("__init__", "setup"), ("train_step", "steps"), ("batch", "batches"),
                        ("evaluate", "evaluation"), ("save", "checkpoints"), ("snapshot", "snapshots")):
        wrap(name, phase)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = TrainConfig(threads=threads, steps=steps)
            start = time.perf_counter()
            code = process.execute(Path(tmp) / "run", cfg, resume=False, command=["train"])
            total = time.perf_counter() - start
    finally:
        for name, method in originals.items():
            setattr(Trainer, name, method)
    if code:
        raise SystemExit(f"the run failed (exit {code})")
    return dict(spent), total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=TrainConfig().steps, help="fewer: a quick check of the bench")
    args = parser.parse_args()
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # the CPU, as a classroom laptop has it
    runs = [command_run(args.threads, args.steps) for _ in range(args.runs)]
    start = python_seconds("pass")
    imports = python_seconds("import bertviz_lab.cli, bertviz_lab.pretrain.process") - start
    if args.threads:
        torch.set_num_threads(args.threads)
    spent, total = timed_phases(args.threads, args.steps)
    steps = spent["steps"] - spent["batches"]
    fixed = os.environ.get(threads.FIXED_ENV)
    start_button = "" if args.threads else (f" (the Start button's; {threads.FIXED_ENV}={fixed} fixes it)" if fixed
                                            else " (the Start button's: every free core)")
    print(f"classroom preset, `python -m bertviz_lab train --run-dir D --threads {args.threads} --steps {args.steps}`"
          f"{start_button}, {args.runs} runs, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores")
    for i, run in enumerate(runs, 1):
        last = run["last_eval"]
        print(f"  run {i}: {run['seconds']:5.1f} s   held-out loss {last['loss']:.3f} at step {last['step']}   "
              f"{run['checkpoints']} checkpoints, {run['snapshots']} snapshots   peak {run['peak_mb']:.0f} MB   "
              f"wrote {run['written_mb']:.0f} MB")
    print("phases (one run in this process; the process start and the imports as their own commands):")
    phases = {"interpreter start": start, "imports": imports, "setup (corpus, tokenizer, model)": spent["setup"],
              "steps: the model": steps, "steps: making the batches": spent["batches"],
              "evaluation": spent["evaluation"], "checkpoint writes": spent["checkpoints"],
              "snapshots": spent["snapshots"]}
    phases["records, status and the rest"] = total - sum(list(phases.values())[2:])
    for name, seconds in phases.items():
        print(f"  {name:<34} {seconds:6.2f} s")
    median = statistics.median(run["seconds"] for run in runs)
    print(f"preset run: median {median:.1f} s (goal <= {GOAL_S:.0f} s: {'met' if median <= GOAL_S else 'MISSED'})")


if __name__ == "__main__":
    main()
