"""Snapshots: what a model makes of the probe set at one step, small enough to keep for every checkpoint.

The pretraining loop takes one each time it writes a checkpoint (the 1-2-5 series of steps, the
regular ones and the last), and the trainer's process appends it to RUN/snapshots.jsonl, so the
Time-lapse page can scrub through a run without loading a single checkpoint. One record:

    {"kind": "snapshot", "step": 200, "layers": L, "heads": H,
     "probes": [{"text", "tokens": [T], "attention": L x H x T x T,          (the sentence as written)
                 "masked": word, "top": [[token, p], ...]}, ...],           (that word as [MASK])
     "roles": {"previous": L x H, "next": ..., "det_noun": ..., ...},        (see head_roles.py)
     "chance": {"previous": score, ...},              (each role's score if every head attended uniformly)
     "words": {"words": [W], "groups": [W], "xy": W x 2, "explained": share}}  (token embeddings, PCA)

Numbers are rounded to 4 decimals. A snapshot of bertviz-mini (4 layers x 4 heads, 6 probe
sentences of 9 to 15 tokens) is one line of 114-115 kB: 113,628 to 115,066 bytes over the 19
records of its shipped history, 2.17 MB in all (`awk '{ print length($0) }'
checkpoints/bertviz-mini/history/snapshots.jsonl`; the file is ASCII, so characters are bytes).
Nearly all of it is the attention weights, L x H x T x T numbers per sentence. On resume the
process drops the records past the checkpoint's step, as it does for the metrics.

Caps: a run keeps MAX_FRAMES snapshots and MAX_FILE_BYTES at most (`shrink`: the last, the 1-2-5 series
and the others evenly spread). The default run (tiny 2 x 2, 600 steps) writes 13 frames of 31 kB (405 kB),
the shipped mini's 5,000 steps 19 of 115 kB (2.17 MB); 128 frames is a 5,000-step run with a checkpoint
every 40 steps, and 64 MiB holds 128 frames of a model with four times mini's heads. Readers index
the lines of a file's last two caps by the step at their start (`SnapshotLog`) and parse only the frames
they keep (a 200 MB file costs the Time-lapse page's first read under a second, not a quarter of a minute; measured
by python -m bench.run_records, figures in docs/benchmarks.md, "Run records a hostile user could leave"); a frame of
another model shape than the run's (`Shape`) is left out with a note. The writer's rewrites read the whole file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertviz_lab import atomic, files
from bertviz_lab.corpus.probes import PROBES, WORD_GROUPS
from bertviz_lab.errors import InputError, LabError
from bertviz_lab.metrics import SNAPSHOT
from bertviz_lab.pretrain import head_roles, records
from bertviz_lab.pretrain.checkpoints import on_series
from bertviz_lab.pretrain.config import TrainConfig

FILE = "snapshots.jsonl"
TOP_K = 5
DECIMALS = 4
MAX_FILE_BYTES = 64 * 2**20  # what a run writes at most, and parses for a page (a reader reads its last 2 caps)
MAX_FRAMES = 128  # snapshots a run keeps, and a reader parses
MAX_LINE = 16 * 2**20  # a longer line is not a snapshot (24 layers x 64 heads, the largest shape, make 11 MB)
STEP = re.compile(rb'\{\s*"kind":\s*"snapshot",\s*"step":\s*(\d{1,15})\s*[,}]')  # how every record begins


def _rounded(array) -> list:
    return np.round(np.asarray(array, dtype=np.float64), DECIMALS).tolist()


@torch.no_grad()
def _top(model, tokenizer, encodings) -> list[list]:
    """The top-k guesses at each masked encoding's [MASK], as [[token, p], ...] per encoding."""
    device = next(model.parameters()).device
    tops = []
    for enc in encodings:
        where = torch.tensor([[tok == "[MASK]" for tok in enc.tokens]], device=device)
        out = model(torch.tensor([enc.ids], device=device), torch.tensor([enc.segment_ids], device=device),
                    masked_positions=where)
        p = out.mlm_logits[0].float().softmax(-1)
        values, ids = p.topk(min(TOP_K, p.numel()))
        tops.append([[tokenizer.id_to_token(int(i)), round(float(v), DECIMALS)] for v, i in zip(values, ids)])
    return tops


def word_positions(model, tokenizer) -> dict:
    """The WORD_GROUPS words that are one token of the vocabulary: their token embeddings' first two
    principal components (with the share of variance they explain)."""
    words, groups, ids = [], [], []
    for group, members in WORD_GROUPS.items():
        for word in members:
            i = tokenizer.token_to_id(word)
            if i is not None:
                words.append(word)
                groups.append(group)
                ids.append(i)
    if len(ids) < 3:
        return {"words": [], "groups": [], "xy": [], "explained": 0.0}
    vectors = model.bert.embeddings.word_embeddings.weight[ids].detach().float().cpu().numpy().astype(np.float64)
    centred = vectors - vectors.mean(0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    explained = float((s[:2] ** 2).sum() / max((s**2).sum(), 1e-30))
    return {"words": words, "groups": groups, "xy": _rounded(u[:, :2] * s[:2]), "explained": round(explained, 4)}


def take(model, tokenizer, step: int) -> dict | None:
    """The snapshot of `model` at `step`; None when no probe sentence fits the model."""
    limit = model.config.max_tokens
    probes, plain, masked = [], [], []
    for probe in PROBES:
        try:
            encodings = head_roles.encode(tokenizer, limit, probe.text), head_roles.encode(tokenizer, limit, probe.masked())
        except InputError:
            continue  # longer than this model reads
        probes.append(probe)
        plain.append(encodings[0])
        masked.append(encodings[1])
    if not probes:
        return None
    training = model.training
    model.eval()
    try:
        weights = head_roles.attention(model, plain)
        tops = _top(model, tokenizer, masked) if getattr(model, "has_mlm", False) else [[] for _ in probes]
        words = word_positions(model, tokenizer)
    finally:
        model.train(training)
    roles = head_roles.roles_of(weights, plain, probes)
    uniform = head_roles.uniform_scores(plain, probes)
    return {"kind": SNAPSHOT, "step": int(step), "layers": model.config.num_hidden_layers,
            "heads": model.config.num_attention_heads,
            "probes": [{"text": p.text, "tokens": list(e.tokens), "attention": _rounded(w),
                        "masked": p.words[p.mask], "top": top}
                       for p, e, w, top in zip(probes, plain, weights, tops)],
            "roles": {role: _rounded(s) for role, s in roles.items()},
            "chance": {role: round(float(s[0, 0]), DECIMALS) for role, s in uniform.items()}, "words": words}


# --- Reading -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """The model a run's snapshots must come from: a frame of any other shape is not this run's."""
    layers: int
    heads: int
    max_tokens: int  # the model's longest input: no probe sentence of its snapshots is longer

    @classmethod
    def of_run(cls, config: dict) -> Shape | None:
        """From run.json's training config; None when it does not load."""
        try:
            model = TrainConfig.from_dict(config).model_config(vocab_size=100)
        except (LabError, TypeError, ValueError):
            return None
        return cls(model.num_hidden_layers, model.num_attention_heads, model.max_tokens)

    @classmethod
    def of_model(cls, config: dict) -> Shape | None:
        """From a model folder's config.json (Hugging Face names); None when it lacks them."""
        try:
            shape = cls(*(config[k] for k in ("num_hidden_layers", "num_attention_heads", "max_position_embeddings")))
        except (KeyError, TypeError):
            return None
        ok = all(type(v) is int and 0 < v <= 4096 for v in (shape.layers, shape.heads, shape.max_tokens))
        return shape if ok else None

    @property
    def max_line(self) -> int:
        """The longest line a snapshot of this shape can be: 8 characters a number ('0.1234, ')."""
        numbers = self.layers * self.heads * (len(PROBES) * self.max_tokens**2 + 4 * len(head_roles.ROLE_NAMES))
        return min(MAX_LINE, 64 * 1024 + 8 * numbers + 64 * len(PROBES) * self.max_tokens)

    def fits(self, record: dict) -> bool:
        return ((record.get("layers"), record.get("heads")) == (self.layers, self.heads)
                and all(isinstance(p, dict) and isinstance(p.get("tokens"), list)
                        and len(p["tokens"]) <= self.max_tokens for p in record["probes"]))

    def __str__(self) -> str:
        return (f"{_count(self.layers, 'layer')} × {_count(self.heads, 'head')}, inputs of "
                f"{_count(self.max_tokens, 'token')} at most")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def choose(sizes: dict[int, int], max_frames: int = MAX_FRAMES, max_bytes: int = MAX_FILE_BYTES) -> list[int]:
    """The steps to keep of `sizes` (step -> bytes), ascending: the last, the 1-2-5 series (evenly spread if
    they are too many) and the others evenly spread over their steps; max_frames and max_bytes at most."""
    steps, n = sorted(sizes), max_frames
    while True:
        if len(steps) <= n:
            picked = steps
        else:
            series = [s for s in steps[:-1] if on_series(s)]
            series = [series[i] for i in records.spread(range(len(series)), n - 1)]
            rest = [s for s in steps[:-1] if not on_series(s)]
            rest = [rest[i] for i in records.spread(rest, n - 1 - len(series))]
            picked = sorted([*series, *rest, steps[-1]])
        if n <= 1 or sum(sizes[s] for s in picked) <= max_bytes:
            return picked
        n = len(picked) - max(1, len(picked) // 8)


class SnapshotLog(records.Tail):
    """A snapshots.jsonl read as it grows: where each step's last line is (from the line's start alone), and
    the frames chosen (`choose`) parsed once each. shape: the run's model (other frames are left out);
    convert: record -> frame, or None for a record that does not add up (default: the record as it is).
    cap: the bytes of frames chosen (`choose`); window: the file's last bytes read (records.Tail)."""

    def __init__(self, path, shape: Shape | None = None, convert: Callable[[dict], object] | None = None,
                 cap: int = MAX_FILE_BYTES, max_frames: int = MAX_FRAMES, window: int | None = None):
        super().__init__(path, cap, shape.max_line if shape else MAX_LINE, keep=128, window=window)
        self.shape, self.convert, self.max_frames = shape, convert, max_frames
        self.restart()

    def restart(self) -> None:
        self.index: dict[int, tuple[int, int]] = {}  # step -> (offset, length) of the last line for it
        self.parsed: dict[int, object] = {}  # offset -> its frame, or None (chosen, read, not a frame)
        self.misfits: set[int] = set()  # offsets of records of another shape
        self.dropped = 0  # steps indexed, then left out to stay within max_frames

    def add(self, offset: int, head: bytes, length: int) -> None:
        found = STEP.match(head)
        if found is None:
            return
        self.index[int(found[1])] = (offset, length)
        if len(self.index) > 2 * self.max_frames:  # a long or forged file: the index stays small too
            keep = choose(self.sizes(), self.max_frames, self.cap)
            self.dropped += len(self.index) - len(keep)
            self.index = {s: self.index[s] for s in keep}

    def sizes(self) -> dict[int, int]:
        return {step: length for step, (_, length) in self.index.items()}

    def measure(self) -> int:
        return sum(length for offset, length in self.index.values() if self.parsed.get(offset) is not None)

    def frames(self) -> list:
        """The frames of the chosen steps, by step; a line read and parsed only the first time it is chosen."""
        with self.lock:
            try:
                return self._frames()
            finally:
                self._weight = self.measure()

    def _frames(self) -> list:
        self.refresh()
        chosen = choose(self.sizes(), self.max_frames, self.cap)
        wanted = {self.index[s][0]: s for s in chosen}
        if any(o not in self.parsed for o in wanted):
            try:
                with open(self.path, "rb") as f:
                    if records.identity(f) != self._identity:
                        return []  # replaced since the refresh: the next one reads the new file
                    for offset in (o for o in wanted if o not in self.parsed):
                        f.seek(offset)
                        self.parsed[offset] = self._parse(f.read(self.index[wanted[offset]][1]), wanted[offset])
            except OSError:
                return []
        self.parsed = {o: v for o, v in self.parsed.items() if o in wanted}
        self.misfits &= set(wanted)
        return [self.parsed[self.index[s][0]] for s in chosen if self.parsed[self.index[s][0]] is not None]

    def _parse(self, line: bytes, step: int):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not (isinstance(record, dict) and record.get("kind") == SNAPSHOT and record.get("step") == step
                and type(record["step"]) is int and isinstance(record.get("probes"), list)
                and isinstance(record.get("roles"), dict)):
            return None
        if self.shape is not None and not self.shape.fits(record):
            self.misfits.add(self.index[step][0])
            return None
        return record if self.convert is None else self.convert(record)

    def notes(self) -> str:
        """How the file was read: above its cap, steps not chosen (`choose`); empty for a file a run wrote."""
        with self.lock:
            left, total = self.dropped + len(self.index) - len(self.parsed), self.dropped + len(self.index)
            notes = [self.note] if self.note else []
            if left > 0:
                notes.append(f"{left:,} of {_count(total, 'snapshot')} {'was' if left == 1 else 'were'} left out: "
                             f"at most {self.max_frames:,} ({files.describe_bytes(self.cap)}) are read, the last, "
                             "the 1-2-5 series and the others evenly spread.")
            return " ".join(notes)

    def refused(self) -> str:
        """Why steps chosen by the last `frames()` are not among its frames, as one clause ('2 do not fit the
        run's model (…) and 1 cannot be read'); empty when all are."""
        with self.lock:
            misfits = len(self.misfits)
            broken = sum(v is None for v in self.parsed.values()) - misfits  # not a snapshot that adds up
            parts = []
            if misfits:
                parts.append(f"{misfits:,} {'does' if misfits == 1 else 'do'} not fit the run's model ({self.shape})")
            if broken > 0:
                parts.append(f"{broken:,} cannot be read")
            return " and ".join(parts)


def read(path) -> list[dict]:
    """The snapshot records of a snapshots.jsonl, one per step (the last written wins), by step (MAX_FRAMES
    at most, see `choose`). A line that is not a snapshot record is skipped; a missing file reads as none."""
    return SnapshotLog(path).frames()


def load(path, shape: Shape, convert: Callable[[dict], object]) -> tuple[list, str, str]:
    """(frames, note, refused) of a run's snapshots for a page: shape-checked, converted, read incrementally by
    a reader kept for the next call (see records.cached); note and refused as SnapshotLog's."""
    key = ("snapshots", str(Path(path).absolute()), shape, convert)
    log = records.cached(key, lambda: SnapshotLog(path, shape, convert))
    with log.lock:  # one call's frames and the notes about them
        return log.frames(), log.notes(), log.refused()


def _rewrite(log: SnapshotLog, steps: list[int], target) -> None:
    """Write the lines of `steps` (as they are in the log's file) to `target`, whole or not at all."""
    with open(log.path, "rb") as f, atomic.atomic_path(target) as tmp, open(tmp, "wb") as out:
        if records.identity(f) != log._identity:
            raise OSError(f"{log.path} changed while it was rewritten")
        for step in steps:
            offset, length = log.index[step]
            f.seek(offset)
            out.write(f.read(length))


def _whole(path, cap: int) -> SnapshotLog:
    """A run's own snapshots file indexed from its first line (WHOLE caps at most: a file from before the caps),
    for a rewrite: its earliest frames, the 1-2-5 series, are the ones a rewrite must never lose."""
    log = SnapshotLog(path, cap=cap, max_frames=MAX_FRAMES, window=records.WHOLE * cap)
    log.refresh()
    return log


def keep_until(path, step: int, cap: int = MAX_FILE_BYTES) -> None:
    """On resume: drop the records past `step` (they belong to the steps about to be redone)."""
    log = _whole(path, cap)
    if Path(path).is_file():
        _rewrite(log, [s for s in sorted(log.index) if s <= step], path)


def shrink(path, cap: int = MAX_FILE_BYTES) -> None:
    """The writer's thinning (records.CappedFile, past `cap` bytes or MAX_FRAMES lines): keep three quarters
    of MAX_FRAMES and half of `cap` at most, chosen as the readers choose."""
    log = _whole(path, cap)
    _rewrite(log, choose(log.sizes(), MAX_FRAMES * 3 // 4, cap // 2), path)


def copy(path, target, cap: int = MAX_FILE_BYTES) -> int:
    """Copy the snapshots a reader would show into `target` (a published model's history); how many."""
    log = _whole(path, cap)
    steps = choose(log.sizes(), MAX_FRAMES, cap) if log.index else []
    if steps:
        _rewrite(log, steps, target)
    return len(steps)
