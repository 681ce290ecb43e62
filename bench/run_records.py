"""Run records a hostile user left: how long the pages' first read of a 200 MB metrics.jsonl and a 200 MB
snapshots.jsonl takes, how much memory it needs, and what a refresh after a few appended lines costs.

Builds one run folder in a temp dir: run.json (the shipped bertviz-mini's training config), metrics.jsonl
(train records of every step, an evaluation every 250, 200 MB) and snapshots.jsonl (the shipped history's
first line again and again with its step changed, 200 MB). Each measurement runs in a fresh Python process
(the modules imported first, so their memory is not counted):
  - pretrain: what the Pretrain page reads for a run's curves (views.pretrain.live.read_curves, records.metrics_note)
  - timelapse: what the Time-lapse page reads (views.timelapse.history.from_run: curves and frames)
first load, then 5 metrics lines (and for timelapse 1 snapshot) appended and the same call again. Memory:
the growth of the process's peak RSS (ru_maxrss) over the load, and, in a second process, the peak that
tracemalloc sees (Python's allocations only). `--before` also runs the code of git HEAD~N (the reader
before this change: read_metrics and snapshots.read that read a file whole), untraced.

    .venv/bin/python -m bench.run_records [--rounds 3] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
SIZE = 200 * 10**6
TRAIN = (b'{"kind": "train", "step": %d, "mlm_loss": 1.0686412334442139, "mlm_acc": 0.7197265625, "lr": 0.0007, '
         b'"grad_norm": 0.5312, "tokens_per_s": 6815.768212332765, "elapsed": %d.712968976999946, '
         b'"nsp_loss": 0.1858, "nsp_acc": 0.939453125}\n')
EVAL = (b'{"kind": "eval", "step": %d, "mlm_loss": 1.07, "mlm_top1": 0.72, "mlm_top5": 0.84, "nsp_loss": 0.19, '
        b'"nsp_acc": 0.94}\n')


def build(run: Path) -> None:
    run.mkdir(parents=True, exist_ok=True)
    card = json.loads((SHIPPED / "model_card.json").read_text())
    (run / "run.json").write_text(json.dumps({"kind": "pretrain", "config": card["train_config"], "command": []}))
    with open(run / "metrics.jsonl", "wb") as out:
        size, step = 0, 0
        while size < SIZE:
            step += 1
            block = b"".join(TRAIN % (s, s // 5) + (EVAL % s if s % 250 == 0 else b"")
                             for s in range(step, step + 10_000))
            out.write(block)
            size, step = size + len(block), step + 9_999
    line = (SHIPPED / "history" / "snapshots.jsonl").read_bytes().split(b"\n", 1)[0] + b"\n"
    rest = line[line.index(b", ", line.index(b'"step"')):]
    with open(run / "snapshots.jsonl", "wb") as out:
        for step in range(SIZE // len(line)):
            out.write(b'{"kind": "snapshot", "step": %d' % step + rest)


def child(page: str, run: str, traced: bool, before: str) -> None:
    """One measurement in this (fresh) process: prints a JSON line."""
    import tracemalloc

    from bertviz_lab.pretrain import process, records, snapshots
    from bertviz_lab.views.pretrain import live as vp
    from bertviz_lab.views.timelapse import history as vt

    if before:  # the reader of an earlier commit: its read_metrics and snapshots.read, nothing else
        for module, path in ((process, "bertviz_lab/pretrain/process.py"),
                             (snapshots, "bertviz_lab/pretrain/snapshots.py")):
            source = subprocess.run(["git", "show", f"{before}:{path}"], cwd=ROOT, capture_output=True, text=True,
                                    check=True).stdout
            space = dict(vars(module))
            exec(compile(source, path, "exec"), space)  # noqa: S102 - our own file at another commit
            if module is process:
                records.read_metrics = space["read_metrics"]
            else:
                snapshots.read = space["read"]
        records.metrics_note = lambda run_dir: ""
        vt._snapshots = lambda path, shape, settings: (vt._frames(snapshots.read(path)), "", "")

    def load():
        if page == "pretrain":
            curves = vp.read_curves(run)
            return {"rows": len(curves.train) + len(curves.eval), "note": records.metrics_note(run)}
        lapse = vt.from_run(run)
        return {"rows": len(lapse.train) + len(lapse.eval), "frames": len(lapse.frames), "note": lapse.note}

    out = {}
    for phase in ("first", "refresh"):
        if phase == "refresh":
            with open(Path(run) / "metrics.jsonl", "ab") as f:
                f.write(b"".join(TRAIN % (10**7 + s, 0) for s in range(5)))
            if page == "timelapse":
                line = (SHIPPED / "history" / "snapshots.jsonl").read_bytes().split(b"\n", 1)[0] + b"\n"
                with open(Path(run) / "snapshots.jsonl", "ab") as f:
                    f.write(b'{"kind": "snapshot", "step": 10000000' + line[line.index(b", ", line.index(b'"step"')):])
        if traced:
            tracemalloc.start()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        seen = load()
        out[phase] = {"s": time.perf_counter() - start, **seen,
                      "rss_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024}
        if traced:
            out[phase]["traced_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
    print(json.dumps(out))


def measure(page: str, run: Path, traced: bool, before: str = "") -> dict:
    sizes = {f: (run / f).stat().st_size for f in ("metrics.jsonl", "snapshots.jsonl")}
    try:
        done = subprocess.run([sys.executable, "-m", "bench.run_records", "--child", page, str(run)]
                              + (["--traced"] if traced else []) + (["--before", before] if before else []),
                              cwd=ROOT, capture_output=True, text=True, check=True)
    finally:
        for f, size in sizes.items():
            os.truncate(run / f, size)  # the appended lines go: every round reads the same files
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default="", help="a git revision whose reader to measure too")
    parser.add_argument("--child", nargs=2, metavar=("PAGE", "RUN"))
    parser.add_argument("--traced", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.traced, args.before)
        return
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "hostile"
        build(run)
        print(f"metrics.jsonl {(run / 'metrics.jsonl').stat().st_size / 1e6:.0f} MB, snapshots.jsonl "
              f"{(run / 'snapshots.jsonl').stat().st_size / 1e6:.0f} MB; median of {args.rounds} rounds")
        for before in ([args.before] if args.before else []) + [""]:
            for page in ("pretrain", "timelapse"):
                rounds = [measure(page, run, False, before) for _ in range(args.rounds)]
                traced = [] if before else [measure(page, run, True) for _ in range(args.rounds)]
                for phase in ("first", "refresh"):
                    s = statistics.median(r[phase]["s"] for r in rounds)
                    rss = statistics.median(r[phase]["rss_mb"] for r in rounds)
                    peak = (f", traced peak {statistics.median(r[phase]['traced_mb'] for r in traced):.0f} MB"
                            if traced else "")
                    print(f"{before or 'now'} {page} {phase}: {s:.2f} s, peak RSS +{rss:.0f} MB{peak} "
                          f"({ {k: v for k, v in rounds[-1][phase].items() if k not in ('s', 'rss_mb')} })")


if __name__ == "__main__":
    main()
