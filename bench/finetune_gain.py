"""What pretraining buys: fine-tune the shipped model and a random model of the same size on each
built-in task, with the same steps, and print dev accuracy for both.

The random model gets the pretrained one's recipe and, so the comparison is fair to it, also a
five-times larger learning rate (a random init usually wants one); the better of the two is
printed. Dev accuracy is measured on the whole dev set (400 examples) after the last step; the
clock includes building the task and the model, as a class waits for both.

    .venv/bin/python -m bench.finetune_gain [--steps 150] [--threads 2] [--tasks coherence ...]

The last line: `pair task: pretrained X% vs scratch Y% in N s` (N: the pretrained run, start to end).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.common import pin_threads
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.finetune import tasks
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import FineTuner
from bertviz_lab.metrics import EVAL

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "bertviz-mini"
TARGET = 0.85  # the pretrained pair task should pass this within a minute


def fine_tune(cfg: FinetuneConfig) -> dict:
    """Run to the end; the final dev accuracy, the seconds, and when dev accuracy first reached TARGET."""
    start = time.perf_counter()
    tuner = FineTuner(cfg)
    reached = None
    for record in tuner.run():
        if record["kind"] == EVAL and reached is None and record["acc"] >= TARGET:
            reached = (record["step"], time.perf_counter() - start)
    tuner.dev_set = tuner.encode_dev(len(tuner.task.dev))  # the whole dev set, once at the end
    final = tuner.evaluate()
    return {"acc": final.acc, "seconds": time.perf_counter() - start, "reached": reached}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=FinetuneConfig.steps)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=list(tasks.BUILTIN), choices=list(tasks.BUILTIN))
    parser.add_argument("--freeze-encoder", action="store_true", help="linear probes instead of full fine-tuning")
    args = parser.parse_args()
    pin_threads(args.threads)
    sys.stdout.reconfigure(line_buffering=True)  # each line as soon as its task is done
    shape = load_checkpoint(SHIPPED).config
    common = dict(steps=args.steps, threads=args.threads, device="cpu", freeze_encoder=args.freeze_encoder,
                  seq_len=shape.max_position_embeddings)
    scratch = dict(scratch="tiny", layers=shape.num_hidden_layers, heads=shape.num_attention_heads,
                   hidden=shape.hidden_size)
    lr = FinetuneConfig.lr
    mode = "linear probe" if args.freeze_encoder else "full fine-tuning"
    print(f"{mode}, {args.steps} steps, batch {FinetuneConfig.batch_size}, lr {lr:g}, {args.threads} threads; "
          f"pretrained = {SHIPPED.name}, scratch = the same shape, randomly initialized")
    pair = None
    for name in args.tasks:
        pre = fine_tune(FinetuneConfig(task=name, checkpoint=str(SHIPPED), lr=lr, **common))
        tries = {rate: fine_tune(FinetuneConfig(task=name, lr=rate, **common, **scratch)) for rate in (lr, 5 * lr)}
        best_lr, best = max(tries.items(), key=lambda item: item[1]["acc"])
        when = (f"{TARGET:.0%} at step {pre['reached'][0]} ({pre['reached'][1]:.0f} s)" if pre["reached"]
                else f"never reached {TARGET:.0%}")
        each = ", ".join(f"lr {rate:g}: {t['acc']:.1%}" for rate, t in tries.items())
        print(f"{name:<14} {tasks.BUILTIN[name].kind:<9} pretrained {pre['acc']:6.1%} ({pre['seconds']:5.1f} s; "
              f"{when})  scratch {best['acc']:6.1%} (lr {best_lr:g}; {each})  "
              f"gain {100 * (pre['acc'] - best['acc']):+.1f} points")
        if tasks.BUILTIN[name].kind == tasks.PAIR:
            pair = (pre, best)
    if pair is not None:
        pre, best = pair
        print(f"pair task: pretrained {pre['acc']:.1%} vs scratch {best['acc']:.1%} in {pre['seconds']:.0f} s")


if __name__ == "__main__":
    main()
