"""Pretraining runs as background processes: start, list, read, stop, resume.

A run is a folder (RUNS/NAME) and a process running the same command a user
would type: `python -m bertviz_lab train --run-dir RUNS/NAME ...`. The process
writes everything (see `process.py`); this module only starts it, reads its
files and signals it, so the app can be refreshed or closed without harming it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bertviz_lab import atomic
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.pretrain.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]  # the repository


def runs_root() -> Path:
    """Where runs live: $BERTVIZ_RUNS, or runs/ in the repository (read at each call, so tests can redirect)."""
    return Path(os.environ.get("BERTVIZ_RUNS", ROOT / "runs"))

ACTIVE = ("starting", "running")
STOP_MARKER = "stop_requested"
_children: dict[int, subprocess.Popen] = {}  # processes this Python started: polled, so none is left a zombie


@dataclass
class RunInfo:
    name: str
    path: Path
    status: str  # starting, running, finished, stopped, diverged, failed
    message: str = ""
    step: int = 0
    total_steps: int = 0
    pid: int | None = None
    config: dict = field(default_factory=dict)
    created: float = 0.0
    updated: float = 0.0

    @property
    def checkpoint(self) -> Path | None:
        return checkpoints.latest(self.path)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


def sanitize_name(name: str) -> str:
    """Letters, digits, '.', '_' and '-' only; never a path. Raises if nothing usable is left."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).strip(".-")[:64]
    if not cleaned:
        raise ConfigError(f"run name {name!r} has no usable characters (use letters, digits, - or _)")
    return cleaned


def new_name(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def cli_args(cfg: TrainConfig) -> list[str]:
    """The `train` flags that reproduce this config (only those that differ from the defaults)."""
    args, default = [], TrainConfig()
    for key, value in cfg.to_dict().items():
        if value == getattr(default, key):
            continue
        if key == "nsp":
            args.append("--no-nsp" if not value else "--nsp")
        else:
            args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def check_corpus(cfg: TrainConfig) -> None:
    """Fail now, with the reason, if a user corpus cannot be used (before any process starts)."""
    if cfg.corpus == "builtin":
        return
    from bertviz_lab import corpus

    path = Path(cfg.corpus).expanduser()
    if not path.is_file():
        raise InputError(f"corpus file not found: {path}")
    corpus.documents_from_text(corpus.read_text_file(path.read_bytes()))


def start(cfg: TrainConfig, name: str | None = None, root: Path | None = None) -> RunInfo:
    """Validate, create the run folder, and launch the training process in its own session."""
    check_corpus(cfg)
    root = Path(root) if root is not None else runs_root()
    run_dir = Path(root) / sanitize_name(name or new_name())
    Path(root).mkdir(parents=True, exist_ok=True)
    try:
        run_dir.mkdir()
    except FileExistsError:
        raise ConfigError(f"a run named {run_dir.name!r} already exists; pick another name") from None
    command = [sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(run_dir), *cli_args(cfg)]
    return _launch(run_dir, command, cfg.steps)


def resume(run_dir: Path) -> RunInfo:
    info = read(run_dir)
    if info.active:
        raise ConfigError(f"run {info.name!r} is still running")
    if info.checkpoint is None:
        raise ConfigError(f"run {info.name!r} has no checkpoint to resume from")
    command = [sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(run_dir), "--resume"]
    return _launch(Path(run_dir), command, info.total_steps)


def _launch(run_dir: Path, command: list[str], steps: int) -> RunInfo:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(run_dir / "log.txt", "ab") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    _children[proc.pid] = proc
    previous = read(run_dir) if (run_dir / "status.json").exists() else None
    # The process replaces this as soon as it is up; until then the run reads as starting.
    atomic.write_json(run_dir / "status.json", {
        "status": "starting", "message": "starting the training process", "pid": proc.pid,
        "step": previous.step if previous else 0, "total_steps": steps,
        "created": previous.created if previous else time.time(), "updated": time.time()})
    return read(run_dir)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    if pid in _children:
        return _children[pid].poll() is None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:  # a zombie answers kill(0) but is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def read(run_dir) -> RunInfo:
    run_dir = Path(run_dir)
    try:
        status = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        status = {"status": "failed", "message": "status.json is missing or unreadable"}
    try:
        config = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("config", {})
    except (OSError, ValueError):
        config = {}
    info = RunInfo(name=run_dir.name, path=run_dir, status=status.get("status", "failed"),
                   message=status.get("message", ""), step=int(status.get("step", 0)),
                   total_steps=int(status.get("total_steps", config.get("steps", 0))), pid=status.get("pid"),
                   config=config, created=status.get("created", 0.0), updated=status.get("updated", 0.0))
    if info.active and not _alive(info.pid):
        if (run_dir / STOP_MARKER).exists():  # stopped before it could report (still starting up)
            info.status, info.message = "stopped", "stopped before training began"
        else:
            info.status = "failed"
            info.message = "the training process ended without reporting (killed or crashed); see log.txt"
    return info


def list_runs(root: Path | None = None) -> list[RunInfo]:
    """All runs under root (default `runs_root()`), newest first."""
    root = Path(root) if root is not None else runs_root()
    if not Path(root).is_dir():
        return []
    runs = [read(p) for p in Path(root).iterdir() if p.is_dir() and (p / "status.json").exists()]
    return sorted(runs, key=lambda r: r.created, reverse=True)


def read_metrics(run_dir, kind: str | None = None) -> list[dict]:
    """The records of metrics.jsonl (a half-written last line is skipped)."""
    records = []
    try:
        lines = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if kind is None or record.get("kind") == kind:
            records.append(record)
    return records


def stop(run_dir, timeout: float = 0.0) -> bool:
    """Ask the run to stop (SIGTERM: it saves a checkpoint and reports "stopped"); optionally wait."""
    info = read(run_dir)
    if not info.active or not _alive(info.pid):
        return False
    (Path(run_dir) / STOP_MARKER).touch()
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.time() + timeout
    while time.time() < deadline and _alive(info.pid):
        time.sleep(0.05)
    return True
