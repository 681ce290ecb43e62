"""A run's checkpoints on disk: complete step folders plus an atomically updated pointer.

    RUN/checkpoints/step-000100/   config.json, model.safetensors, vocab.txt, ... trainer_state.pt
    RUN/checkpoint.json            {"step": 100, "path": "checkpoints/step-000100"}

A step folder is written under a temporary name and renamed into place when
complete; only then does the pointer move. A crash or kill at any moment leaves
the previous checkpoint intact and pointed to. trainer_state.pt (optimizer,
scheduler, RNG) is read back with `torch.load(weights_only=True)`.

Which folders stay: the newest two (a resume uses the newest), and the steps of the
1-2-5 series (0, 1, 2, 5, 10, 20, 50, 100, ...), for looking back at how the model
learned. A series folder that is no longer among the newest two keeps its weights and
drops trainer_state.pt (the optimizer's moments, twice the weights' size), and the
series folders together stay under SERIES_CAP_BYTES: once a run's series would pass it,
later series steps are not kept (the early ones, where most changes, stay).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from bertviz_lab import atomic, files
from bertviz_lab.bert.checkpoint import CARD_FILE, load_checkpoint, save_checkpoint
from bertviz_lab.bert.device import gpu_index
from bertviz_lab.bert.precision import AUTOCAST_DTYPES
from bertviz_lab.errors import CheckpointError, LabError

POINTER = "checkpoint.json"
STATE_FILE = "trainer_state.pt"
KEEP = 2  # step folders kept: the newest and one before it
SERIES_CAP_BYTES = 256 * 2**20  # per run, for the 1-2-5 series folders beyond the newest two


def on_series(step: int) -> bool:
    """True for 0 and the 1-2-5 series: 1, 2, 5, 10, 20, 50, 100, ..."""
    if step < 0:
        return False
    while step >= 10 and step % 10 == 0:
        step //= 10
    return step in (0, 1, 2, 5)


def series(total: int) -> list[int]:
    """The series steps of a run of `total` steps (its last step is saved too, though it may not be one)."""
    steps = [0] + [d * 10**k for k in range(len(str(total))) for d in (1, 2, 5)]
    return sorted(s for s in steps if s <= total)


def save(run_dir, model, tokenizer, optimizer, scheduler, *, step: int, elapsed: float, card: dict,
         scaler: torch.amp.GradScaler | None = None, threads_used: list[int] | None = None) -> Path:
    """threads_used: the CPU thread counts the run has used so far (threads.py), kept for its resume's card."""
    run_dir = Path(run_dir)
    folder = run_dir / "checkpoints" / f"step-{step:06d}"
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_checkpoint(model, tokenizer, tmp, card=card)
    state = {"step": step, "elapsed": elapsed, "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state()}
    device = device_of(model)
    if device.type == "cuda":  # the run's own GPU's generator: the only one its dropout draws from
        state["cuda_rng"] = torch.cuda.get_rng_state(device)
    if scaler is not None and scaler.is_enabled():
        state["scaler"] = scaler.state_dict()
    if threads_used:
        state["cpu_threads"] = list(threads_used)
    torch.save(state, tmp / STATE_FILE)
    shutil.rmtree(folder, ignore_errors=True)  # only when re-saving the same step (a resumed stop)
    os.replace(tmp, folder)
    atomic.write_json(run_dir / POINTER, {"step": step, "path": f"checkpoints/{folder.name}"})
    _prune(run_dir / "checkpoints", keep=folder.name)
    return folder


def step_of(folder: Path) -> int | None:
    """The step of a folder named step-000100, or None."""
    name = Path(folder).name
    digits = name[5:] if name.startswith("step-") else ""
    return int(digits) if digits.isdigit() else None


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def _prune(checkpoints: Path, keep: str) -> None:
    """Keep the newest KEEP folders and the series folders that fit the cap; series folders lose
    their trainer state once they are no longer among the newest."""
    folders = sorted(p for p in checkpoints.glob("step-*") if p.is_dir() and step_of(p) is not None)
    newest = {p.name for p in folders[-KEEP:]} | {keep}
    used = 0
    for folder in folders:
        if folder.name in newest:
            continue
        if on_series(step_of(folder)):
            (folder / STATE_FILE).unlink(missing_ok=True)
            used += _size(folder)
            if used <= SERIES_CAP_BYTES:
                continue
        shutil.rmtree(folder, ignore_errors=True)


def kept(run_dir) -> list[tuple[int, Path]]:
    """The run's checkpoint folders, (step, folder) in step order."""
    folders = (p for p in (Path(run_dir) / "checkpoints").glob("step-*") if p.is_dir())
    return sorted((step_of(p), p) for p in folders if step_of(p) is not None)


def latest(run_dir) -> Path | None:
    """The folder of the run's last good checkpoint, or None."""
    try:  # size-capped, regular files only: a FIFO or a huge file planted here cannot hang a page
        data = files.read_json(Path(run_dir) / POINTER)
        folder = (Path(run_dir) / data["path"]).resolve()
    except (LabError, OSError, ValueError, KeyError, TypeError):
        return None
    inside = Path(run_dir).resolve() in folder.parents
    return folder if inside and folder.is_dir() else None


def load_latest(run_dir, model, optimizer, scheduler, loaded=None,
                scaler: torch.amp.GradScaler | None = None) -> dict:
    """Restore weights, optimizer, scheduler, fp16 loss scale and RNG from the last checkpoint; returns step,
    time and the CPU thread counts used so far. loaded: that checkpoint, when the caller has already loaded
    it (for its tokenizer and shape)."""
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
    try:  # a state file that unpickles but holds the wrong things (damaged, or planted) is one sentence too
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        device = device_of(model)
        if device.type == "cuda" and (saved := own_cuda_rng(state.get("cuda_rng"), gpu_index(device))) is not None:
            torch.cuda.set_rng_state(saved, device)
        if scaler is not None and scaler.is_enabled() and "scaler" in state:
            scaler.load_state_dict(state["scaler"])
        used = state.get("cpu_threads")  # only what the card shows: anything odd here is dropped, not refused
        used = [n for n in used if type(n) is int and 0 < n <= 4096] if isinstance(used, list) else []
        return {"step": int(state["step"]), "elapsed": float(state["elapsed"]), "cpu_threads": used}
    except (KeyError, IndexError, RuntimeError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"cannot resume: {folder.name}/{STATE_FILE} does not hold a trainer's state "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None


def recorded_autocast(run_dir, device: torch.device) -> str | None:
    """The autocast ("bf16", "fp16" or "off") the last checkpoint's card says its run trained under, where that
    was on a device of `device`'s kind; None where the card does not say (older runs) or another kind trained."""
    folder = latest(run_dir)
    try:
        card = files.read_json(folder / CARD_FILE) if folder else None
    except (LabError, OSError):
        return None
    if not isinstance(card, dict) or not isinstance(card.get("device"), str):
        return None
    same_kind = card["device"].split(":")[0] == device.type
    return card.get("autocast") if same_kind and card.get("autocast") in AUTOCAST_DTYPES else None


def device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def own_cuda_rng(saved, index: int) -> torch.Tensor | None:
    """The saved generator state of the run's GPU: the one saved (a tensor), or, from a checkpoint that kept every
    visible GPU's (a list), the run's GPU's entry if that machine had it. A run saved with 4 GPUs visible resumes
    on 2, or on another numbering, without an IndexError; the other GPUs' generators are nothing the run drew."""
    if isinstance(saved, torch.Tensor):
        return saved
    if isinstance(saved, (list, tuple)) and index < len(saved) and isinstance(saved[index], torch.Tensor):
        return saved[index]
    return None
