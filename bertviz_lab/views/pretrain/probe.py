"""A probe sentence read by a training run's latest checkpoint: top guesses and attention.

While a run trains it writes a checkpoint every few steps (see `checkpoints.py`); the
Pretrain page runs one fixed sentence through the newest one, so a class watches the
guesses for a [MASK] and the attention heads change as the model learns. Loaded
checkpoints are cached by (folder, modification time), so polling every second costs
one small forward pass, and a checkpoint being replaced or pruned at that instant
falls back to the last one that loaded instead of failing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bertviz_lab.bert.checkpoint import Checkpoint, load_checkpoint
from bertviz_lab.errors import InputError, LabError
from bertviz_lab.pretrain import checkpoints
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.predict.guesses import MaskPrediction, NothingMasked

DEFAULT_SENTENCE = "the cat sat on the [MASK] ."
CACHE_SIZE = 4  # checkpoints kept in memory: a few runs' newest ones
_cache: OrderedDict[tuple[str, int], Checkpoint] = OrderedDict()
_last_good: dict[str, tuple[str, int]] = {}  # run folder -> cache key of its newest checkpoint that loaded
_lock = threading.Lock()  # app sessions poll from several threads


@dataclass(frozen=True)
class Probe:
    """What the checkpoint made of the sentence; `ok` is False (with `message`) when there is nothing to show."""
    message: str = ""  # why nothing is shown, or a note (e.g. no [MASK] in the sentence)
    checkpoint: Path | None = None
    step: int | None = None  # training step of the checkpoint
    tokens: list[str] = field(default_factory=list)  # (T,)
    predictions: list[MaskPrediction] = field(default_factory=list)  # one per [MASK], top-k each
    attention: np.ndarray | None = None  # (L, H, T, T) softmax weights; each row sums to 1

    @property
    def ok(self) -> bool:
        return self.attention is not None


def _key(folder: Path) -> tuple[str, int]:
    return str(folder), (folder / "model.safetensors").stat().st_mtime_ns


def _load(key: tuple[str, int]) -> Checkpoint:
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    ckpt = load_checkpoint(key[0])  # outside the lock: a big model takes a while
    with _lock:
        _cache[key] = ckpt
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return ckpt


def latest_checkpoint(run_dir) -> tuple[Checkpoint | None, str]:
    """The run's newest loadable checkpoint, or None and why. Never raises for a folder mid-write."""
    run_dir = str(Path(run_dir))
    folder = checkpoints.latest(run_dir)
    if folder is not None:
        try:
            key = _key(folder)
            ckpt = _load(key)
            _last_good[run_dir] = key
            return ckpt, ""
        except (OSError, LabError, ValueError, RuntimeError):
            pass  # replaced or pruned while we read it: use the one before
    previous = _last_good.get(run_dir)
    if previous is not None:
        with _lock:
            if previous in _cache:
                return _cache[previous], ""
    if folder is None:
        return None, "No checkpoint yet: the first one is written as soon as training starts."
    return None, "The newest checkpoint is being written; it will show in a moment."


def probe_checkpoint(ckpt: Checkpoint, text: str, top_k: int = 5) -> Probe:
    """Predictions for every [MASK] and all attention weights of `text` under `ckpt`."""
    try:
        encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text)
    except InputError as exc:
        return Probe(message=str(exc), checkpoint=ckpt.path, step=checkpoints.step_of(ckpt.path))
    if len(encoding.ids) <= 2:
        return Probe(message="Type a probe sentence.", checkpoint=ckpt.path, step=checkpoints.step_of(ckpt.path))
    attention = inputs.attention_matrices(inputs.run(ckpt.model, encoding, trace=True))
    message, predictions = "", []
    try:
        top_k = min(top_k, ckpt.tokenizer.vocab_size)
        predictions = vpr.predict_masks(ckpt.model, ckpt.tokenizer, encoding, top_k=top_k).masks
    except NothingMasked:
        message = "The sentence has no [MASK]: write [MASK] where the model should guess a word."
    except InputError as exc:
        message = str(exc)
    return Probe(message, ckpt.path, checkpoints.step_of(ckpt.path), list(encoding.tokens), predictions, attention)


def probe_run(run_dir, text: str = DEFAULT_SENTENCE, top_k: int = 5) -> Probe:
    """The probe on the run's latest checkpoint; a Probe with ok False and a message if there is none."""
    ckpt, why = latest_checkpoint(run_dir)
    if ckpt is None:
        return Probe(message=why)
    return probe_checkpoint(ckpt, text, top_k)
