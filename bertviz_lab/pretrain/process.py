"""The training process and its run folder: the `train` command's body, the folder lock that makes
it the folder's one trainer, how another process tells it from a reused pid, and its metrics file.

    RUN/run.json           the training config, the command's arguments (after `python -m bertviz_lab`)
                           and who started the run
    RUN/metrics.jsonl      one JSON record per line, flushed as it comes; thinned past its cap (records.py)
    RUN/snapshots.jsonl    the probe set at each checkpoint step (see pretrain/snapshots.py)
    RUN/status.json        running / finished / stopped / diverged / failed, with a message, the pid and
                           that process's start time (atomic)
    RUN/.lock              held by the trainer from before it writes anything until it exits
    RUN/lock_holder.json   who holds the lock: pid, host, since when, doing what
    RUN/checkpoints/       see pretrain/checkpoints.py

SIGTERM or Ctrl-C asks the trainer to stop: between micro-batches in one process, at the next step
boundary under torchrun; it saves a checkpoint and the status becomes "stopped". Rank 0 alone locks
and writes under torchrun.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock
import psutil
import torch
import torch.distributed as dist

from bertviz_lab import atomic, files, settings
from bertviz_lab.errors import ConfigError, LabError
from bertviz_lab.metrics import END, SNAPSHOT, TRAIN
from bertviz_lab.pretrain import batch_cache, records, snapshots, threads
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer

STATUS_EVERY_S = 1.0  # how often train records refresh status.json
SAY_EVERY_S = 10.0  # how often it says on stderr which step it is at (its setup: each part as it begins)
LOCK, HOLDER = ".lock", "lock_holder.json"
OWNER = "owner"  # who started a run on the machine itself (the app's own user or the command line)
STARTED_BY_ENV = settings.STARTED_BY  # how the app tells the trainer who asked for it


@dataclass(frozen=True)
class Job:
    """What a run folder's process does: its kind, the CLI command that runs it, its settings and its loop."""
    kind: str  # "pretrain" or "finetune", as run.json records it
    command: str  # the `python -m bertviz_lab` command: train or finetune
    settings: type  # TrainConfig or FinetuneConfig: from_dict, to_dict and steps
    loop: Callable  # (settings, run_dir, resume=...) -> a pretrain.loop.Loop


PRETRAIN = Job("pretrain", "train", TrainConfig, Trainer)
COMMANDS = ("train", "finetune")  # the commands a run's process is started with


# How the app runs `bertviz_lab train|finetune`: -P keeps the working folder off the import path (`-m` would put it
# first, and a bertviz_lab folder there would run instead of this copy); child_env puts a checkout's own on it.
LAB_COMMAND = (sys.executable, "-P", "-m", "bertviz_lab")


def child_env(started_by: str) -> dict[str, str]:
    """The environment of a trainer the app starts. It imports the same copy of the lab as this process: a
    checkout's own (not on the path by itself) or the installed package (already on it); no empty entry, which
    would put the working folder on the path."""
    paths = [str(files.PACKAGE.parent)] if files.CHECKOUT else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return {**env, STARTED_BY_ENV: started_by, **({"PYTHONPATH": os.pathsep.join(paths)} if paths else {})}


def check_settings(kind: str) -> None:
    """A trainer's BERTVIZ_* settings, checked before its folder is made: a ConfigError, not a run that fails."""
    threads.fixed_count()
    if kind == PRETRAIN.kind:
        batch_cache.folder()


# --- The folder lock -----------------------------------------------------------------------------
def hold(run_dir, doing: str, wait_for_parent: bool = False) -> filelock.FileLock:
    """Take the run folder's lock at once and record who holds it; a ConfigError names the holder.
    wait_for_parent: a trainer waits (30 s at most) while its parent, the app, holds it to launch it."""
    run_dir = Path(run_dir)
    lock = filelock.FileLock(run_dir / LOCK)
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            if not (wait_for_parent and _holder(run_dir).get("pid") == os.getppid()):
                raise
            lock.acquire(timeout=30)
    except filelock.Timeout:
        raise ConfigError(f"run {run_dir.name!r} is in use: {describe_holder(run_dir)}") from None
    except OSError as exc:
        raise ConfigError(f"cannot lock run folder {run_dir}: {exc.strerror or exc}") from None
    atomic.write_json(run_dir / HOLDER, {"pid": os.getpid(), "host": socket.gethostname(),
                                         "since": time.time(), "doing": doing})
    return lock


def _holder(run_dir: Path) -> dict:
    try:
        record = files.read_json(run_dir / HOLDER)
    except LabError:
        return {}
    return record if isinstance(record, dict) else {}


def describe_holder(run_dir) -> str:
    """'process 4242 on lab-pc holds it since 14:02:11 (training, started by owner)'."""
    record = _holder(Path(run_dir))
    pid, host, since, doing = (record.get(k) for k in ("pid", "host", "since", "doing"))
    if not isinstance(pid, int) or isinstance(pid, bool):
        return "another process holds its lock"
    when = (f" since {time.strftime('%H:%M:%S', time.localtime(since))}"
            if isinstance(since, (int, float)) and 0 < since < 1e11 else "")
    return f"process {pid} on {str(host)[:80]} holds it{when}" + (f" ({str(doing)[:120]})" if doing else "")


# --- Which process is the trainer ----------------------------------------------------------------
def start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None if it is gone."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def verified(pid: int | None, started: float | None, name: str) -> psutil.Process | None:
    """Process `pid` if it is alive (not a zombie) and is the trainer of run `name`: it started at
    `started`, or (for a status that lacks the time) has `bertviz_lab train` (or finetune) and the run's name on
    its command line. None for a dead, zombie or reused pid."""
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if started is not None:
            return proc if abs(proc.create_time() - started) < 0.1 else None
        cmd = proc.cmdline()
        ours = "bertviz_lab" in cmd and any(c in cmd for c in COMMANDS) and any(name in arg for arg in cmd)
        return proc if ours else None
    except psutil.Error:
        return None


# --- The train command ---------------------------------------------------------------------------
def tune_allocator() -> bool:
    """Let glibc keep freed memory for reuse instead of returning it to the OS. Every training step frees and
    re-allocates the same multi-megabyte activations, and the next step would pay page faults and zeroing: steps
    about 15% faster on the 2-core CI machine (a training-process setting: the app and library are untouched)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))


class RunFiles:
    def __init__(self, run_dir: Path, cfg, created: float, started_by: str, command: str = PRETRAIN.command):
        self.run_dir, self.cfg, self.created, self.command = run_dir, cfg, created, command
        self.metrics = self.snapshots = None
        self.last_status, self.last_said, self.said = 0.0, 0.0, ""  # said: the first word of the last line said
        # facts that stay in every later status (the device); who we are, for `verified`
        self.sticky: dict = {"pid_started": start_time(os.getpid()), "started_by": started_by}

    def status(self, status: str, message: str = "", step: int = 0, **extra) -> None:
        self.sticky.update((k, v) for k, v in extra.items() if k in ("device", "autocast"))
        atomic.write_json(self.run_dir / "status.json", {
            "status": status, "message": message, "pid": os.getpid(), "step": step,
            "total_steps": self.cfg.steps, "created": self.created, "updated": time.time(),
            **self.sticky, **extra})
        self.last_status = time.time()

    def say(self, text: str) -> None:
        """What the run is doing, on stderr ("train: step 40 of 600"): the CLI's progress, and log.txt's."""
        print(f"{self.command}: {text}", file=sys.stderr, flush=True)
        self.last_said, self.said = time.monotonic(), text.split(" ", 1)[0]

    def open_metrics(self, keep_until: int | None) -> None:
        """Append to metrics.jsonl (and snapshots.jsonl); on resume first drop records past the checkpoint's step."""
        path = self.run_dir / records.METRICS
        if keep_until is not None:
            records.keep_until(path, keep_until)
            snapshots.keep_until(self.run_dir / snapshots.FILE, keep_until)
        self.metrics = records.CappedFile(path, records.METRICS_CAP, records.shrink_metrics)

    def record(self, record: dict) -> None:
        out = self.metrics
        if record.get("kind") == SNAPSHOT:  # opened with the first one: a fine-tuning run takes none
            if self.snapshots is None:
                self.snapshots = records.CappedFile(self.run_dir / snapshots.FILE, snapshots.MAX_FILE_BYTES,
                                                    snapshots.shrink, max_lines=snapshots.MAX_FRAMES)
            out = self.snapshots
        out.write(record)


def _resume_record(run_dir: Path, job: Job) -> tuple[object, float, str]:
    """(config, created, started_by) of a run to resume; ConfigError if its files do not say."""
    refused = ConfigError(f"{run_dir} is not a run folder that can be resumed")
    try:
        run = files.read_json(run_dir / "run.json", error=ConfigError)
        kind = run.get("kind", PRETRAIN.kind)
        if kind == job.kind:
            cfg = job.settings.from_dict(run["config"])
            started_by = run.get("started_by", OWNER)
            status = files.read_json(run_dir / "status.json", error=ConfigError)
            created = status.get("created", time.time()) if isinstance(status, dict) else time.time()
    except (LabError, KeyError, TypeError, AttributeError, ValueError):
        raise refused from None
    if kind != job.kind:
        raise ConfigError(f"{run_dir} is not a {job.kind} run; resume it with `runs resume`") if isinstance(
            kind, str) else refused
    ok = isinstance(created, (int, float)) and not isinstance(created, bool) and 0 < created < 1e11
    return cfg, float(created) if ok else time.time(), started_by if isinstance(started_by, str) else OWNER


def recorded_device(run_dir: str | Path) -> str:
    """The device a run to resume was started on, as its run.json says (a run.json from before the setting:
    "auto", as its config reads); "cpu" when that cannot be read (`execute` then refuses the folder, and a gloo
    group opens anywhere)."""
    try:
        config = files.read_json(Path(run_dir) / "run.json", error=ConfigError)["config"]
        device = config.get("device", "auto")
    except (LabError, KeyError, TypeError, AttributeError):
        return "cpu"
    return device if isinstance(device, str) else "cpu"


def refuse_used(run_dir: str | Path) -> None:
    """A new run goes into a new folder: one that already holds a run's records would mix two runs.
    (Under torchrun every rank checks before the process group forms, so before rank 0 writes.)"""
    if (Path(run_dir) / "metrics.jsonl").exists():
        raise ConfigError(f"{run_dir} already holds a run; resume it with --resume, or pick a new folder")


def execute(run_dir: str | Path, cfg, resume: bool, command: list[str], job: Job = PRETRAIN) -> int:
    """Run `job` (pretraining, or fine-tuning) for the CLI; returns the process exit code (0 finished or
    stopped, 1 crashed, 2 refused). cfg: the job's settings (None to resume)."""
    run_dir = Path(run_dir)
    rank = dist.get_rank() if dist.is_initialized() else 0
    lock = None
    try:
        if not resume:
            run_dir.mkdir(parents=True, exist_ok=True)
        elif not run_dir.is_dir():
            raise ConfigError(f"{run_dir} is not a run folder that can be resumed")
        started_by = settings.who(STARTED_BY_ENV, OWNER)  # the app's visitor, on one line
        if rank == 0:  # before anything is written: a second trainer on this folder stops here
            lock = hold(run_dir, f"training, started by {started_by}", wait_for_parent=True)
        if resume:
            cfg, created, started_by = _resume_record(run_dir, job)
        else:
            created = time.time()
            if rank == 0:
                atomic.write_json(run_dir / "run.json", {"kind": job.kind, "config": cfg.to_dict(),
                                                         "command": command, "started_by": started_by})
    except (LabError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        writer = RunFiles(run_dir, cfg, created, started_by, job.command) if rank == 0 else None
        return _train(run_dir, cfg, resume, writer, job)
    finally:
        if lock is not None:
            lock.release()


def _train(run_dir: Path, cfg, resume: bool, writer: RunFiles | None, job: Job) -> int:
    if writer:
        (run_dir / "stop_requested").unlink(missing_ok=True)
    trainer = None

    def request_stop(signum, frame):
        if trainer is not None:
            trainer.stop_requested = True
        else:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if writer:
            writer.status("running", "preparing the data and the model")
            writer.say("preparing the data, its tokenizer and the model")
        began = time.monotonic()
        trainer = job.loop(cfg, run_dir, resume=resume)
        if writer:
            first = "a first checkpoint and held-out evaluation, then " if trainer.step == 0 else ""
            writer.say(f"ready in {time.monotonic() - began:.1f} s on {trainer.device}: {first}steps "
                       f"{trainer.step + 1} to {trainer.cfg.steps}")
            writer.open_metrics(trainer.step if resume else None)
            writer.status("running", f"training on {trainer.device}", trainer.step, device=str(trainer.device),
                          autocast=trainer.autocast)
        return _loop(trainer, writer)
    except KeyboardInterrupt:
        if writer:
            writer.status("stopped", "stopped before training began")
        return 0
    except LabError as exc:
        if writer:
            writer.status("failed", str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except torch.OutOfMemoryError:
        step = trainer.step if trainer else 0
        message = (f"the GPU ran out of memory at step {step}: lower the batch size or the sequence length (or stop "
                   "other runs on it); the last good checkpoint is kept")
        if writer:
            writer.status("failed", message, step)
        print(f"error: {message}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a crash must still leave a readable status
        traceback.print_exc()
        if writer:
            writer.status("failed", f"{type(exc).__name__}: {exc}", trainer.step if trainer else 0)
        return 1
    finally:  # installed, the handler would keep the trainer, and under torchrun its process group, alive
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _loop(trainer, files: RunFiles | None) -> int:
    for record in trainer.run():
        if files is None:
            continue
        if record["kind"] == END:
            files.status(record["status"], record["message"], record["step"])
            files.say(record["message"])
            return 0 if record["status"] in ("finished", "stopped") else 1
        files.record(record)
        if record["kind"] == SNAPSHOT:
            continue
        if record["kind"] == TRAIN and (files.said != "step" or time.monotonic() - files.last_said > SAY_EVERY_S):
            files.say(f"step {trainer.step} of {trainer.cfg.steps}")
        if record["kind"] != TRAIN or time.time() - files.last_status > STATUS_EVERY_S:
            files.status("running", f"step {trainer.step} of {trainer.cfg.steps}", trainer.step,
                         device=str(trainer.device), tokens_per_s=record.get("tokens_per_s"))
    return 0
