"""Learning speed of the classroom preset: seconds from a fresh init until the held-out
MLM loss falls below half of its starting value, on CPU.

The classroom preset is `TrainConfig()`'s defaults (what the Pretrain page starts
with). The clock includes everything a class waits for: building the corpus and
model, training steps and the periodic held-out evaluations. Several seeds; prints
each and the median.

    .venv/bin/python -m bench.learning_speed [--seeds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import pin_threads
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer


def seconds_to_half(seed: int, threads: int, limit_s: float) -> tuple[float, int, float, float]:
    """(seconds, step, start loss, loss reached) for one fresh run."""
    start = time.perf_counter()
    trainer = Trainer(TrainConfig(seed=seed, threads=threads, device="cpu"))
    first = last = None
    for record in trainer.run():
        if record["kind"] != "eval":
            continue
        first = record["mlm_loss"] if first is None else first
        last = record["mlm_loss"]
        elapsed = time.perf_counter() - start
        if last < first / 2 or elapsed > limit_s:
            return elapsed, record["step"], first, last
    return float("inf"), trainer.step, first, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=float, default=300.0, help="give up after this many seconds")
    args = parser.parse_args()
    pin_threads(args.threads)
    cfg = TrainConfig()
    print(f"classroom preset: {cfg.preset} (layers/heads/hidden from the preset), batch {cfg.batch_size} x "
          f"{cfg.seq_len}, lr {cfg.lr}, {args.threads} threads")
    results = []
    for seed in range(args.seeds):
        seconds, step, first, reached = seconds_to_half(seed, args.threads, args.limit)
        results.append(seconds)
        print(f"  seed {seed}: {seconds:6.1f} s  (step {step}: held-out MLM loss {first:.3f} -> {reached:.3f})")
    median = statistics.median(results)
    print(f"median {median:.1f} s to halve the held-out MLM loss (target < 60 s)")


if __name__ == "__main__":
    main()
