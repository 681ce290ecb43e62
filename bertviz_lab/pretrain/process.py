"""The `train` command's body: drive the Trainer and keep the run folder's files current.

    RUN/run.json        the training config and the command's arguments (after `python -m bertviz_lab`)
    RUN/metrics.jsonl   one JSON record per line, flushed as it comes
    RUN/status.json     running / finished / stopped / diverged / failed, with a message (atomic)
    RUN/checkpoints/    see pretrain/checkpoints.py

SIGTERM or Ctrl-C asks the trainer to stop at the next step boundary; it saves
a checkpoint and the status becomes "stopped". Rank 0 alone writes under torchrun.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import torch.distributed as dist

from bertviz_lab import atomic
from bertviz_lab.errors import LabError
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.pretrain.runs import read_metrics

STATUS_EVERY_S = 1.0  # how often train records refresh status.json


def tune_allocator() -> bool:
    """Let glibc keep freed memory for reuse instead of returning it to the OS.

    Every training step frees and re-allocates the same multi-megabyte activations;
    by default glibc hands them back and the next step pays page faults and zeroing.
    Raising the mmap and trim thresholds made steps about 15% faster on the 2-core
    CI machine (a training-process setting: the app and library imports are untouched).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))


class RunFiles:
    def __init__(self, run_dir: Path, cfg: TrainConfig, created: float):
        self.run_dir, self.cfg, self.created = run_dir, cfg, created
        self.metrics = None
        self.last_status = 0.0
        self.sticky: dict = {}  # facts that stay in every later status (the device)

    def status(self, status: str, message: str = "", step: int = 0, **extra) -> None:
        self.sticky.update((k, v) for k, v in extra.items() if k == "device")
        atomic.write_json(self.run_dir / "status.json", {
            "status": status, "message": message, "pid": os.getpid(), "step": step,
            "total_steps": self.cfg.steps, "created": self.created, "updated": time.time(),
            **self.sticky, **extra})
        self.last_status = time.time()

    def open_metrics(self, keep_until: int | None) -> None:
        """Append to metrics.jsonl; on resume first drop records past the checkpoint's step."""
        path = self.run_dir / "metrics.jsonl"
        if keep_until is not None:
            kept = [r for r in read_metrics(self.run_dir)
                    if r.get("kind") in ("train", "eval") and r.get("step", 0) <= keep_until]
            atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
        self.metrics = open(path, "a", encoding="utf-8")

    def record(self, record: dict) -> None:
        self.metrics.write(json.dumps(record) + "\n")
        self.metrics.flush()


def execute(run_dir: str | Path, cfg: TrainConfig | None, resume: bool, command: list[str]) -> int:
    """Run training for the CLI; returns the process exit code (0 finished/stopped, 1 otherwise)."""
    run_dir = Path(run_dir)
    rank = dist.get_rank() if dist.is_initialized() else 0
    if resume:
        try:
            cfg = TrainConfig.from_dict(json.loads((run_dir / "run.json").read_text())["config"])
            created = json.loads((run_dir / "status.json").read_text()).get("created", time.time())
        except (OSError, ValueError, KeyError, TypeError):
            print(f"error: {run_dir} is not a run folder that can be resumed", file=sys.stderr)
            return 2
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        created = time.time()
        if rank == 0:
            atomic.write_json(run_dir / "run.json", {"config": cfg.to_dict(), "command": command})
    files = RunFiles(run_dir, cfg, created) if rank == 0 else None
    if files:
        (run_dir / "stop_requested").unlink(missing_ok=True)
    trainer = None

    def request_stop(signum, frame):
        if trainer is not None:
            trainer.stop_requested = True
        else:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        if files:
            files.status("running", "preparing the corpus and the model")
        trainer = Trainer(cfg, run_dir, resume=resume)
        if files:
            files.open_metrics(trainer.step if resume else None)
            files.status("running", f"training on {trainer.device}", trainer.step, device=str(trainer.device))
        return _loop(trainer, files)
    except KeyboardInterrupt:
        if files:
            files.status("stopped", "stopped before training began")
        return 0
    except LabError as exc:
        if files:
            files.status("failed", str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a crash must still leave a readable status
        traceback.print_exc()
        if files:
            files.status("failed", f"{type(exc).__name__}: {exc}", trainer.step if trainer else 0)
        return 1


def _loop(trainer: Trainer, files: RunFiles | None) -> int:
    for record in trainer.run():
        if files is None:
            continue
        if record["kind"] == "end":
            files.status(record["status"], record["message"], record["step"])
            return 0 if record["status"] in ("finished", "stopped") else 1
        files.record(record)
        if record["kind"] != "train" or time.time() - files.last_status > STATUS_EVERY_S:
            files.status("running", f"step {trainer.step} of {trainer.cfg.steps}", trainer.step,
                         device=str(trainer.device), tokens_per_s=record.get("tokens_per_s"))
    return 0
