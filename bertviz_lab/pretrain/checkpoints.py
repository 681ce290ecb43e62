"""A run's checkpoints on disk: complete step folders plus an atomically updated pointer.

    RUN/checkpoints/step-000100/   config.json, model.safetensors, vocab.txt, ... trainer_state.pt
    RUN/checkpoint.json            {"step": 100, "path": "checkpoints/step-000100"}

A step folder is written under a temporary name and renamed into place when
complete; only then does the pointer move. A crash or kill at any moment leaves
the previous checkpoint intact and pointed to. trainer_state.pt (optimizer,
scheduler, RNG) is read back with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from bertviz_lab import atomic, files
from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.errors import CheckpointError, LabError

POINTER = "checkpoint.json"
STATE_FILE = "trainer_state.pt"
KEEP = 2  # step folders kept: the newest and one before it


def save(run_dir, model, tokenizer, optimizer, scheduler, *, step: int, elapsed: float, card: dict) -> Path:
    run_dir = Path(run_dir)
    folder = run_dir / "checkpoints" / f"step-{step:06d}"
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_checkpoint(model, tokenizer, tmp, card=card)
    state = {"step": step, "elapsed": elapsed, "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    torch.save(state, tmp / STATE_FILE)
    shutil.rmtree(folder, ignore_errors=True)  # only when re-saving the same step (a resumed stop)
    os.replace(tmp, folder)
    atomic.write_json(run_dir / POINTER, {"step": step, "path": f"checkpoints/{folder.name}"})
    _prune(run_dir / "checkpoints", keep=folder.name)
    return folder


def _prune(checkpoints: Path, keep: str) -> None:
    folders = sorted(p for p in checkpoints.glob("step-*") if p.is_dir())
    for old in folders[:-KEEP]:
        if old.name != keep:
            shutil.rmtree(old, ignore_errors=True)


def latest(run_dir) -> Path | None:
    """The folder of the run's last good checkpoint, or None."""
    try:  # size-capped, regular files only: a FIFO or a huge file planted here cannot hang a page
        data = files.read_json(Path(run_dir) / POINTER)
        folder = (Path(run_dir) / data["path"]).resolve()
    except (LabError, OSError, ValueError, KeyError, TypeError):
        return None
    inside = Path(run_dir).resolve() in folder.parents
    return folder if inside and folder.is_dir() else None


def load_latest(run_dir, model, optimizer, scheduler, loaded=None) -> dict:
    """Restore weights, optimizer, scheduler and RNG from the last checkpoint; returns step and time.
    loaded: that checkpoint, when the caller has already loaded it (for its tokenizer and shape)."""
    folder = latest(run_dir)
    if folder is None:
        raise CheckpointError(f"{run_dir} has no checkpoint to resume from")
    if loaded is None or Path(loaded.path).resolve() != folder.resolve():
        loaded = load_checkpoint(folder)
    model.load_state_dict(loaded.model.state_dict())
    try:
        state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable state file means "cannot resume"
        raise CheckpointError(f"cannot resume: {folder.name}/{STATE_FILE} is unreadable ({exc})") from None
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return {"step": int(state["step"]), "elapsed": float(state["elapsed"])}
