"""Syntax at every checkpoint of a rerun of the shipped model's training, for its history/syntax.jsonl.

The shipped model keeps no checkpoints, only its history; the Time-lapse's "Syntax as it forms" needs a model at each
step. The shipped model's command (docs/training.md) rerun into RUN_DIR (same settings, same seed) keeps the 1-2-5 series of checkpoints; this
measures each one as the Time-lapse's button does and writes the records next to the shipped history. When the
rerun's last weights are not the shipped weights (the code has changed since the shipped run, and the smallest
floating-point difference grows over 5,000 steps) it stops, unless --allow-other-run: then the file's header says
what was measured (its "source"), and the Time-lapse shows that sentence above the charts.

A file measured before probing over training was added (its header's version 1) is not extended with another run's
probing: --fresh measures every step anew into it. --time CHECKPOINT measures one checkpoint as the button does and
prints the seconds of one core each part takes (the record as before, then its probing), writing nothing.

    python -m bench.syntax_history RUN_DIR [--to checkpoints/bertviz-mini] [--allow-other-run] [--fresh]
    python -m bench.syntax_history --time checkpoints/bertviz-mini
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

import torch
from safetensors.torch import load_file

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.metrics import EVAL
from bertviz_lab.pretrain.publish import HISTORY
from bertviz_lab.syntax.report import story_corpus
from bertviz_lab.views.timelapse import syntax as vts
from bertviz_lab.views.timelapse.syntax_file import FILE

ROOT = Path(__file__).resolve().parents[1]


def same_weights(run_checkpoint: Path, shipped: Path) -> tuple[bool, float]:
    """Whether two model.safetensors hold the same tensors, and the largest difference."""
    a, b = load_file(run_checkpoint / "model.safetensors"), load_file(shipped / "model.safetensors")
    if set(a) != set(b) or any(a[k].shape != b[k].shape for k in a):
        return False, float("inf")  # another shape (e.g. fewer positions): not the same model
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    return worst == 0.0, worst


def _loss(folder: Path, step: int) -> float:
    """The held-out MLM loss a run (or a shipped history) recorded at `step`, or nan."""
    for line in (folder / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == EVAL and record.get("step") == step:
            return float(record.get("loss", record.get("mlm_loss", "nan")))
    return float("nan")


def timed(checkpoint: Path) -> dict[str, float]:
    """Seconds of one core (process time, one torch thread) that measuring one checkpoint takes, part by part, as the
    Time-lapse's button measures it (SETTINGS)."""
    torch.set_num_threads(1)
    ckpt, settings = load_checkpoint(checkpoint), vts.SETTINGS
    corpus, out = story_corpus(settings.sentences, settings.seed), {}
    vts.measure_probing(ckpt.model, ckpt.tokenizer, corpus, settings.probing, settings.seed)  # imports, warm-up
    for part, work in (("the record (analyse)", lambda: vts.analyse(
            ckpt.model, ckpt.tokenizer, corpus, seed=settings.seed, control=False,
            agreement_pairs_per_count=settings.agreement_pairs, probe_steps=settings.probe_steps)),
                       ("its probing", lambda: vts.measure_probing(ckpt.model, ckpt.tokenizer, corpus,
                                                                   settings.probing, settings.seed))):
        start = time.process_time()
        work()
        out[part] = time.process_time() - start
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, nargs="?")
    parser.add_argument("--to", type=Path, default=ROOT / "checkpoints" / "bertviz-mini")
    parser.add_argument("--allow-other-run", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="measure every step anew: the file at --to is replaced")
    parser.add_argument("--source", default="", help="the sentence the page shows about the run measured")
    parser.add_argument("--time", type=Path, metavar="CHECKPOINT", help="time one checkpoint's measure; write nothing")
    args = parser.parse_args(argv)
    if args.time is not None:
        seconds = timed(args.time)
        print(f"{args.time}, {vts.SETTINGS}: " + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
              + f"; in all {sum(seconds.values()):.2f} s of one core")
        return 0
    if args.run_dir is None:
        parser.error("RUN_DIR is needed, unless --time")
    steps = {int(p.name.split("-")[1]): p for p in sorted((args.run_dir / "checkpoints").glob("step-*"))
             if (p / "model.safetensors").is_file()}
    if not steps:
        print(f"no checkpoints in {args.run_dir}", file=sys.stderr)
        return 2
    same, worst = same_weights(steps[max(steps)], args.to)
    print(f"{len(steps)} checkpoints, steps {sorted(steps)}; the last one's weights "
          f"{'are the shipped weights' if same else f'differ from the shipped ones (max |diff| {worst:.3g})'}")
    if not same and not args.allow_other_run:
        print("not written: pass --allow-other-run to measure it as a rerun of the recipe", file=sys.stderr)
        return 1
    out = args.to / HISTORY / FILE
    if out.exists() and args.fresh:
        out.unlink()
    elif out.exists() and vts.read(out).before_probing:
        print(f"not written: {out} was measured before probing over training was added, perhaps on another run; "
              "--fresh measures every step anew", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    source = "" if same else args.source or (
        f"Measured on a rerun of this model's training (the same settings and seed, {date.today():%Y-%m-%d}): the "
        f"shipped run kept no checkpoints, and a rerun is not the same model step for step (its held-out loss "
        f"at step {max(steps):,} is {_loss(args.run_dir, max(steps)):.3f}, this model's {_loss(args.to / HISTORY, max(steps)):.3f}), "
        f"so these curves show when the tree appears in this recipe, not in these exact weights.")
    history = vts.measure_checkpoints(steps, out, progress=lambda f, m: print(f"  {f:5.0%} {m}", file=sys.stderr),
                                      threads=1, source=source)
    for at in history.records:
        nsubj = at.relations.get("nsubj")
        print(f"step {at.step:>5}: best UUAS {at.best_uuas:.3f} (layer {at.best_layer}); nsubj "
              f"{'-' if nsubj is None else f'L{nsubj.layer} H{nsubj.head} {nsubj.accuracy:.2f} (offset {nsubj.baseline:.2f})'}"
              f"; agreement {', '.join(f'{k}: {v:.2f}' for k, v in at.agreement.items() if v is not None)}")
    print(vts.tree_sentence(history))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
