"""Learning speed of the classroom preset, as two numbers: the steps until the held-out MLM loss
falls below half of its starting value (an algorithmic figure no machine changes), and the
step rate as a ratio to `transformers` (a machine figure); plus the seconds this machine took.

The classroom preset is `TrainConfig()`'s defaults (what the Pretrain page starts with). The
clock includes everything a class waits for: building the corpus and model, the training
steps (each writing and tokenizing its own batch) and the held-out evaluations. Several
seeds; prints each, then `steps to half loss: N` and `median N s` (medians over the seeds).

The step rate: our `Trainer.train_step` against transformers' BertForPreTraining with the same
weights, config (dropout included), precision (the autocast the preset's "auto" picks here),
optimizer and gradient clipping, both fed the same pre-made batches, timed in interleaved rounds;
the figure is the median of per-round ratios.

    .venv/bin/python -m bench.learning_speed [--seeds 3] [--threads 2] [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import time


from bench.common import hf_adamw, hf_train_step, hf_twin, median_ratio, pin_threads
from bertviz_lab.metrics import EVAL
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer


def run_to_half(seed: int, threads: int, limit_s: float) -> tuple[float, int, float, float]:
    """(seconds, step, start loss, loss reached) for one fresh run of the preset."""
    start = time.perf_counter()
    trainer = Trainer(TrainConfig(seed=seed, threads=threads, device="cpu"))
    first = last = None
    for record in trainer.run():
        if record["kind"] != EVAL:
            continue
        first = record["loss"] if first is None else first
        last = record["loss"]
        elapsed = time.perf_counter() - start
        if last < first / 2 or elapsed > limit_s:
            return (elapsed if last < first / 2 else float("inf")), record["step"], first, last
    return float("inf"), trainer.step, first, last


def step_rate_ratio(threads: int, rounds: int, per_round: int = 4) -> tuple[float, float, float, str]:
    """(our ms per step, transformers' ms per step, median per-round ratio theirs / ours, the precision both
    ran in) on the preset."""
    cfg = TrainConfig(seed=0, threads=threads, device="cpu", steps=10**6)
    trainer = Trainer(cfg)
    batches = [trainer.batch(i) for i in range(per_round)]
    feed = iter(range(10**9))
    trainer.batch = lambda step, micro=0, stream=0: batches[next(feed) % per_round]
    hf = hf_twin(trainer.model, "sdpa").train()
    optimizer = hf_adamw(hf, cfg.weight_decay, cfg.lr)
    hf_step = lambda batch: hf_train_step(hf, optimizer, batch, cfg.grad_clip, trainer.amp_dtype)  # noqa: E731

    for i in range(2):  # warm up allocators and kernels
        trainer.train_step()
        hf_step(batches[i])
    ours, theirs = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(per_round):
            trainer.train_step()
        ours.append((time.perf_counter() - start) / per_round)
        start = time.perf_counter()
        for batch in batches:
            hf_step(batch)
        theirs.append((time.perf_counter() - start) / per_round)
    ratio = median_ratio(theirs, ours)
    precision = "fp32" if trainer.amp_dtype is None else f"{str(trainer.amp_dtype).removeprefix('torch.')} autocast"
    return statistics.median(ours) * 1000, statistics.median(theirs) * 1000, ratio, precision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the step-rate comparison")
    parser.add_argument("--limit", type=float, default=300.0, help="give up on a seed after this many seconds")
    args = parser.parse_args()
    pin_threads(args.threads)
    cfg = TrainConfig()
    shape = cfg.model_config(100)
    print(f"classroom preset: {cfg.preset} {shape.num_hidden_layers}x{shape.hidden_size}, batch {cfg.batch_size} x "
          f"{cfg.seq_len} tokens, lr {cfg.lr:g} (warmup {cfg.warmup} of {cfg.steps} steps), dropout {cfg.dropout:g}, "
          f"held-out loss every {cfg.eval_every} steps, {args.threads} threads")
    seconds, steps = [], []
    for seed in range(args.seeds):
        elapsed, step, first, reached = run_to_half(seed, args.threads, args.limit)
        seconds.append(elapsed)
        steps.append(step if elapsed != float("inf") else float("inf"))
        print(f"  seed {seed}: step {step:4d}, {elapsed:6.1f} s  (held-out MLM loss {first:.3f} -> {reached:.3f})")
    ours_ms, theirs_ms, ratio, precision = step_rate_ratio(args.threads, args.rounds)
    print(f"step rate ({precision} both sides, as precision 'auto' picks on this machine): ours {ours_ms:.0f} ms, "
          f"transformers (sdpa) {theirs_ms:.0f} ms per step; "
          f"ratio transformers / ours = {ratio:.2f} (median of {args.rounds} per-round ratios; "
          "above 1 = we are faster)")
    print(f"steps to half loss: {statistics.median(steps):.0f} (seeds: {', '.join(f'{s:.0f}' for s in steps)}; "
          "target < 300)")
    print(f"median {statistics.median(seconds):.1f} s to halve the held-out MLM loss (target < 60 s)")


if __name__ == "__main__":
    main()
