"""Pretraining runs as background processes: start, list, read, stop, resume, delete.

A run is a folder (RUNS/NAME) and a process running the same command a user would type:
`python -m bertviz_lab train --run-dir RUNS/NAME ...`. The process writes everything (see `process.py`);
this module starts it, reads its files and signals it, so the app can be refreshed or closed without
harming it. RUN/.lock is held by the folder's one trainer for its whole life (and briefly by whoever
launches or deletes it); RUN/lock_holder.json says who, for the message that refuses a second one. A
run's files are data, not trusted: a status.json or run.json not of the expected types reads as
"unreadable", and a pid is signalled only if that process started when the run recorded it.
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
import shutil
import signal
import subprocess
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import filelock
import psutil

from bertviz_lab import atomic, files, settings
from bertviz_lab.errors import ConfigError, InputError, LabError
from bertviz_lab.files import data_root
from bertviz_lab.pretrain import checkpoints, records
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.process import (LAB_COMMAND, OWNER, PRETRAIN, check_settings, child_env, hold,
                                         recorded_device, start_time, verified)
from bertviz_lab.pretrain.resources import check_corpus, check_resources, gpu_env, place


def runs_root() -> Path:
    """Where runs live: $BERTVIZ_RUNS (a ConfigError sentence where the lab could not write there, settings.py), or
    runs/ in the checkout, or in the user's data folder when the lab is installed with pip (files.data_root)."""
    return settings.folder(settings.RUNS, data_root() / "runs")

ACTIVE = ("starting", "running")
STATUSES = (*ACTIVE, "finished", "stopped", "diverged", "failed")
UNREADABLE = "unreadable"  # a status of our own: the run's files could not be read
LINKED = "run {!r} is a link to a folder elsewhere, and the lab changes only folders inside the runs folder"
KINDS = ("pretrain", "finetune")
RESUMABLE = ("stopped", "failed", "diverged")  # with a checkpoint: diverged ones restart from the last good one
STOP_MARKER, UPLOADS = "stop_requested", "uploads"
read_metrics = records.read_metrics  # only for older callers: call records.read_metrics
MAX_COUNT = 10**12  # steps and pids beyond this are not real
_children: dict[int, subprocess.Popen] = {}  # processes this Python started: polled, so none is left a zombie


@dataclass
class RunInfo:
    name: str
    path: Path
    status: str  # starting, running, finished, stopped, diverged, failed, unreadable
    message: str = ""
    step: int = 0
    total_steps: int = 0
    pid: int | None = None
    config: dict = field(default_factory=dict)
    created: float = 0.0
    updated: float = 0.0
    started_by: str = OWNER  # OWNER or "visitor <address>" (classroom mode)
    pid_started: float | None = None  # the trainer's process start time: tells it from a reused pid
    kind: str = PRETRAIN.kind  # "pretrain" or "finetune" (run.json says; older runs are pretraining)
    device: str = ""  # and the autocast ("bf16", "fp16", "off"): as the trainer said ("" before, and older runs)
    autocast: str = ""

    @functools.cached_property
    def checkpoint(self) -> Path | None:
        """The last good checkpoint when this record was read (read once: pages ask several times)."""
        return checkpoints.latest(self.path)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def resumable(self) -> bool:
        return self.status in RESUMABLE and self.checkpoint is not None


def sanitize_name(name: str) -> str:
    """Letters, digits, '.', '_' and '-' only; never a path. Raises if nothing usable is left."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip(".-")[:64]
    if not cleaned:
        raise ConfigError(f"run name {str(name)[:80]!r} has no usable characters (use letters, digits, - or _)")
    if cleaned == UPLOADS:
        raise ConfigError(f"the run name {UPLOADS!r} is reserved for uploaded text; pick another name")
    return cleaned


def new_name(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def cli_args(cfg: TrainConfig) -> list[str]:
    """The `train` flags that reproduce this config (only those that differ from the defaults)."""
    args, default = [], TrainConfig()
    for key, value in cfg.to_dict().items():
        if value == getattr(default, key):
            continue
        args += (["--nsp" if value else "--no-nsp"] if key == "nsp" else [f"--{key.replace('_', '-')}", str(value)])
    return args


# --- Start, resume ------------------------------------------------------------------------------
def start(cfg: TrainConfig, name: str | None = None, root: Path | None = None, started_by: str = OWNER,
          max_active: int | None = None) -> RunInfo:
    """Validate, create the run folder, and launch the training process in its own session (on the freest of
    several GPUs: `place`). max_active: refuse while that many runs are active (counted and launched under one lock)."""
    placed = place(cfg.device)
    check_corpus(cfg)  # the text is usable, and the run fits this machine's memory
    check_resources(cfg, placed)
    return launch_new(PRETRAIN.kind, cfg.to_dict(), ["train", *cli_args(cfg)], cfg.steps, name, root, started_by,
                      max_active, placed)


def launch_new(kind: str, config: dict, command: list[str], steps: int, name: str | None = None,
               root: Path | None = None, started_by: str = OWNER, max_active: int | None = None,
               placed: int | None = None) -> RunInfo:
    """Create a run folder and its run.json, and start `python -m bertviz_lab COMMAND --run-dir RUN ...` there
    (command: e.g. ["finetune", "--task", "coherence", ...], checked by the caller), on the GPU `placed`."""
    check_settings(kind)
    root = Path(root) if root is not None else runs_root()
    run_dir = root / sanitize_name(name or new_name("finetune" if kind != PRETRAIN.kind else "run"))
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file or a link to nothing there, or no right to make it
        raise ConfigError(f"cannot make the runs folder {root}: {exc.strerror or exc}") from None
    gate = filelock.FileLock(root / ".start.lock", timeout=30) if max_active is not None else nullcontext()
    with gate:
        active = sum(r.active for r in list_runs(root)) if max_active is not None else 0
        if max_active is not None and active >= max_active:
            raise ConfigError(f"{active} runs are training and this server allows {max_active} at once; "
                              "wait for one to finish")
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise ConfigError(f"a run named {run_dir.name!r} already exists; pick another name") from None
        full = [*LAB_COMMAND, command[0], "--run-dir", str(run_dir), *command[1:]]
        try:
            lock = hold(run_dir, f"launching it for {started_by}")
            try:  # run.json now, not when the trainer is up: readers see the settings (and the text) in use
                atomic.write_json(run_dir / "run.json", {"kind": kind, "config": config, "command": full[3:],
                                                         "started_by": started_by})
                return _launch(run_dir, full, steps, started_by, placed)
            finally:
                lock.release()
        except BaseException:
            shutil.rmtree(run_dir, ignore_errors=True)  # no half-made run is left listed
            raise


def resume(run_dir) -> RunInfo:
    """Continue a stopped, failed or diverged run from its last good checkpoint (in the background).
    Checked and launched under the folder lock, the run reads as "starting" before the lock is let
    go: a second click a moment later is refused instead of starting a second trainer."""
    run_dir = Path(run_dir)
    lock = hold(_inside(run_dir), "resuming it")
    try:
        info = read(run_dir)
        if info.status == UNREADABLE:
            raise ConfigError(f"run {info.name!r} cannot be resumed: {info.message}")
        if info.active:
            raise ConfigError(f"run {info.name!r} is already {info.status}")
        if info.status not in RESUMABLE:
            raise ConfigError(f"run {info.name!r} has {info.status} all its steps; start a new run to train longer")
        if info.checkpoint is None:
            raise ConfigError(f"run {info.name!r} has no checkpoint to resume from")
        check_settings(info.kind)  # a bad BERTVIZ_THREADS: the sentence here, not a run that fails as it starts
        command = [*LAB_COMMAND, "finetune" if info.kind == "finetune" else "train", "--run-dir", str(run_dir), "--resume"]
        return _launch(run_dir, command, info.total_steps, info.started_by, place(recorded_device(run_dir)))
    finally:
        lock.release()


def _inside(run_dir: Path) -> Path:
    """`run_dir` if it is a folder inside its runs folder (checked resolved); a link (to anywhere) is refused
    before any lock file could be written through it."""
    if run_dir.is_symlink() or run_dir.resolve().parent != run_dir.parent.resolve():
        raise ConfigError(LINKED.format(run_dir.name))
    return run_dir


def _launch(run_dir: Path, command: list[str], steps: int, started_by: str, placed: int | None) -> RunInfo:
    env = {**child_env(started_by), **gpu_env(placed)}
    previous = read(run_dir) if (run_dir / "status.json").exists() else None
    with open(run_dir / "log.txt", "ab") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _children[proc.pid] = proc
    # The process replaces this as soon as it is up; until then the run reads as starting.
    atomic.write_json(run_dir / "status.json", {
        "status": "starting", "message": "starting the training process", "pid": proc.pid, "started_by": started_by,
        "pid_started": start_time(proc.pid), "step": previous.step if previous else 0, "total_steps": steps,
        "created": previous.created if previous and previous.created else time.time(), "updated": time.time()})
    return read(run_dir)


def trainer(info: RunInfo):
    """The run's live trainer (a psutil.Process), verified (see `process.verified`); None if there is none.
    Our own child that has exited, or is exiting (`verified` counts a zombie main thread as dead), is reaped."""
    child = _children.get(info.pid)
    proc = verified(info.pid, info.pid_started, info.name)
    if child is not None and (proc is None or child.poll() is not None):
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
            del _children[info.pid]
        return None
    return proc


# --- Reading a run -------------------------------------------------------------------------------
STATUS_FIELDS = {"status": str, "message": str, "step": int, "total_steps": int, "pid": int, "device": str,
                 "pid_started": float, "created": float, "updated": float, "started_by": str, "autocast": str}
def _records(run_dir: Path) -> tuple[dict, dict]:
    """(status.json, run.json) checked; a missing run.json is an empty record (the run is starting)."""
    status = files.typed_fields(files.read_json(run_dir / "status.json", error=InputError), "status.json",
                                STATUS_FIELDS, MAX_COUNT, InputError)
    if status.get("status") not in STATUSES:
        raise InputError(f"status.json: unknown status {str(status.get('status'))[:40]!r}")
    run = {}
    if (run_dir / "run.json").exists() or (run_dir / "run.json").is_symlink():
        run = files.typed_fields(files.read_json(run_dir / "run.json", error=InputError), "run.json",
                                 {"started_by": str, "config": dict, "kind": str}, MAX_COUNT, InputError)
        if run.get("kind", PRETRAIN.kind) not in KINDS:
            raise InputError(f"run.json: unknown kind {run['kind'][:40]!r}")
    return status, run


def read(run_dir) -> RunInfo:
    run_dir = Path(run_dir)
    if run_dir.is_symlink():  # listed, so it can be told apart, but never read, resumed, stopped or deleted
        return RunInfo(name=run_dir.name, path=run_dir, status=UNREADABLE, message=LINKED.format(run_dir.name))
    if not (run_dir / "status.json").exists():
        return RunInfo(name=run_dir.name, path=run_dir, status="failed", message="status.json is missing")
    try:
        status, run = _records(run_dir)
    except LabError as exc:
        try:
            created = run_dir.stat().st_mtime
        except OSError:
            created = 0.0
        return RunInfo(name=run_dir.name, path=run_dir, status=UNREADABLE, message=str(exc), created=created)
    config = run.get("config", {})
    steps = config.get("steps")
    info = RunInfo(name=run_dir.name, path=run_dir, status=status["status"], message=status.get("message", ""),
                   step=status.get("step", 0), pid=status.get("pid"), config=config,
                   total_steps=status.get("total_steps", steps if type(steps) is int and steps >= 0 else 0),
                   created=float(status.get("created", 0.0)), updated=float(status.get("updated", 0.0)),
                   started_by=run.get("started_by", status.get("started_by", OWNER)),
                   pid_started=status.get("pid_started"), kind=run.get("kind", PRETRAIN.kind),
                   **{k: status.get(k, "") for k in ("device", "autocast")})
    if info.active and trainer(info) is None:
        if (run_dir / STOP_MARKER).exists():  # stopped before it could report (still starting up)
            info.status, info.message = "stopped", "stopped before training began"
        else:
            info.status = "failed"
            info.message = "the training process ended without reporting (killed or crashed); see log.txt"
    return info


def list_runs(root: Path | None = None, kind: str | None = None) -> list[RunInfo]:
    """All runs under root (default `runs_root()`), newest first; an unreadable one is listed as such.
    kind: only "pretrain" or only "finetune" runs (an unreadable run is listed under both)."""
    root = Path(root) if root is not None else runs_root()
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and (p / "status.json").exists()]
    except OSError:
        return []
    return sorted((r for r in map(read, folders) if kind is None or r.kind == kind or r.status == UNREADABLE),
                  key=lambda r: r.created, reverse=True)


def find(name: str, root: Path | None = None) -> Path:
    """The folder of the run called `name` (for the command line); ConfigError if there is none."""
    root = Path(root) if root is not None else runs_root()
    if name not in {r.name for r in list_runs(root)}:
        raise ConfigError(f"no run named {str(name)[:80]!r} in {root}")
    return root / name


# --- Stop, delete --------------------------------------------------------------------------------
def stop(run_dir, timeout: float = 0.0) -> bool:
    """Ask the run to stop (SIGTERM: it saves a checkpoint and reports "stopped"); optionally wait.
    False, and no signal sent, unless the recorded pid is verified to be this run's live trainer."""
    info = read(run_dir)
    proc = trainer(info) if info.active else None
    if proc is None:
        return False
    (Path(run_dir) / STOP_MARKER).touch()
    try:
        proc.send_signal(signal.SIGTERM)  # psutil refuses if the pid was reused since `trainer` checked
    except psutil.Error:
        return False
    deadline = time.time() + timeout
    while time.time() < deadline and trainer(info) is not None:
        time.sleep(0.05)
    return True


def delete(run_dir) -> None:
    """Remove a run that is not training: its folder, and its uploaded or pasted text if no other run uses it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"no run folder {run_dir}")
    _inside(run_dir)
    try:
        lock = hold(run_dir, "deleting it")
    except ConfigError as exc:
        raise ConfigError(f"{exc}; stop it first") from None
    try:
        info = read(run_dir)
        if info.active:
            raise ConfigError(f"run {info.name!r} is {info.status}; stop it first")
        try:
            shutil.rmtree(run_dir)
        except OSError as exc:
            raise ConfigError(f"could not delete run {info.name!r}: {exc.strerror or exc}") from None
    finally:
        lock.release()
    drop_upload(run_dir.parent, info.config.get("corpus") or info.config.get("data"))  # a text or a CSV


def drop_upload(root: Path, corpus) -> None:
    """Delete `corpus` (a text or a CSV) if it is a file of the runs' uploads/ no remaining run uses (never another file)."""
    try:
        path = Path(corpus).resolve() if isinstance(corpus, str) else None
        if path is None or (root / UPLOADS).is_symlink() or path.parent != (root / UPLOADS).resolve():
            return
        used = {Path(c).resolve() for r in list_runs(root) for key in ("corpus", "data")
                if isinstance(c := r.config.get(key), str) and c}
        if path not in used:
            path.unlink(missing_ok=True)
    except (OSError, ValueError):
        return
