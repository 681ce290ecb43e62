"""Syntax at every checkpoint of a rerun of the shipped model's training, for its history/syntax.jsonl.

The shipped model keeps no checkpoints, only its history; the Time-lapse's "Syntax as it forms" needs a model at each
step. README's command rerun into RUN_DIR (same settings, same seed) keeps the 1-2-5 series of checkpoints; this
measures each one as the Time-lapse's button does and writes the records next to the shipped history, but only when
the rerun's last weights are the shipped weights (the same training, step for step), unless --allow-other-run, in
which case the file says so in a note.

    python -m bench.syntax_history RUN_DIR [--to checkpoints/bertviz-mini] [--allow-other-run]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from bertviz_lab.pretrain.publish import HISTORY
from bertviz_lab.views import timelapse_syntax as vts
from bertviz_lab.views.timelapse_syntax_records import FILE

ROOT = Path(__file__).resolve().parents[1]


def same_weights(run_checkpoint: Path, shipped: Path) -> tuple[bool, float]:
    """Whether two model.safetensors hold the same tensors, and the largest difference."""
    a, b = load_file(run_checkpoint / "model.safetensors"), load_file(shipped / "model.safetensors")
    if set(a) != set(b):
        return False, float("inf")
    worst = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    return worst == 0.0, worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--to", type=Path, default=ROOT / "checkpoints" / "bertviz-mini")
    parser.add_argument("--allow-other-run", action="store_true")
    args = parser.parse_args(argv)
    steps = {int(p.name.split("-")[1]): p for p in sorted((args.run_dir / "checkpoints").glob("step-*"))
             if (p / "model.safetensors").is_file()}
    if not steps:
        print(f"no checkpoints in {args.run_dir}", file=sys.stderr)
        return 2
    same, worst = same_weights(steps[max(steps)], args.to)
    print(f"{len(steps)} checkpoints, steps {sorted(steps)}; the last one's weights "
          f"{'are the shipped weights' if same else f'differ from the shipped ones (max |diff| {worst:.3g})'}")
    if not same and not args.allow_other_run:
        return 1
    out = args.to / HISTORY / FILE
    torch.set_num_threads(1)
    history = vts.measure_checkpoints(steps, out, progress=lambda f, m: print(f"  {f:5.0%} {m}", file=sys.stderr),
                                      threads=1)
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
