"""The training batches of a built-in-corpus run, kept on disk per seed: a class's run of a preset it has run
before starts with every batch already made.

A batch is a pure function of (seed, step, rank) and the settings that shape it (data.py). Making one is
pure Python, a third of a classroom-preset step on 2 cores (measured by python -m bench.class_wait; figures in
docs/benchmarks.md, "A whole live run"). A run of the
built-in corpus that began at step 0 writes the batches it made to `folder()` when it ends (finished,
stopped or diverged), one file per key: the seed, the rank, the batch settings and the tokenizer's
vocabulary. The next run with that key reads them instead of making them; the oldest files beyond
`MAX_FILES` are deleted. The lab ships the classroom preset's file (seed 0, checkpoints/batches/), so
even a machine's first run of it starts with its batches made (`python -m bertviz_lab.pretrain.ship_batches`
writes it anew, after a change to the story world, the tokenizer or the masking: tests/pretrain/test_batch_cache.py
says when).

A file is trusted only as far as it is checked. It is read by numpy with pickles refused, its arrays'
names, shapes, dtypes and ranges are checked, and three of its batches (the first the run needs, one
from the middle and the last) are made afresh and must match it exactly: a file from another version of
the story world or the tokenizer, or a damaged or hostile one, is set aside and the run makes its
batches itself (and writes the file anew at its end). A user's own corpus is not cached.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tokenizers
import torch

from bertviz_lab import atomic, settings
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.files import SHIPPED, data_root
from bertviz_lab.pretrain.data import Batch

FORMAT = 1
MAX_FILES = 8  # the classroom preset's 600 batches take 22 MB
MAX_BYTES = 64 << 20  # a run whose batches would take more is not cached (9 bytes a token)
CACHE_ENV = settings.BATCH_CACHE  # a folder for the files, instead of cache/batches in the data folder
FIELDS = ("ids", "segments", "lengths", "labels", "nsp", "tokens")


def folder() -> Path:
    """Where runs keep their batches: $BERTVIZ_BATCH_CACHE (a ConfigError sentence where no files can be kept
    there, settings.py), else cache/batches in the data folder."""
    return settings.folder(CACHE_ENV, data_root() / "cache" / "batches")


def find(name: str) -> Path | None:
    """The file called `name`: a run's own, else the one the lab ships; None when neither exists."""
    return next((p for p in (folder() / name, SHIPPED / "batches" / name) if p.is_file()), None)


@functools.lru_cache(maxsize=1)
def code() -> str:
    """A hash of the code a batch comes from: the story world, data.py, the masking, the tokenizer, and the
    versions of torch (its generator draws the masks) and tokenizers. Any change to these names another
    file, so no file outlives the code that made it (the shipped one is then written anew, see above)."""
    from bertviz_lab import corpus
    from bertviz_lab.bert import masking, tokenizer
    from bertviz_lab.pretrain import data

    digest = hashlib.sha256(f"{torch.__version__} {tokenizers.__version__}".encode())
    sources = [*sorted(Path(corpus.__file__).parent.glob("*.py")),
               *(Path(module.__file__) for module in (data, masking, tokenizer))]
    for source in sources:
        digest.update(source.name.encode() + source.read_bytes())
    return digest.hexdigest()


def key(*, seed: int, rank: int, vocabulary: list[str], **settings) -> str:
    """The file name for a run's training batches: what they depend on, hashed."""
    vocab = hashlib.sha256("\n".join(vocabulary).encode()).hexdigest()
    text = json.dumps(dict(format=FORMAT, code=code(), seed=seed, rank=rank, vocabulary=vocab, **settings),
                      sort_keys=True)
    return f"batches-{hashlib.sha256(text.encode()).hexdigest()[:24]}.npz"


def pack(batches: list[Batch], seq_len: int) -> dict[str, np.ndarray]:
    """Batches as arrays: (n, B, seq_len) ids, segments and labels padded past each batch's own length,
    (n, B) lengths and NSP labels, (n,) real tokens."""
    n, size = len(batches), len(batches[0].input_ids)
    wide = max(max(int(b.input_ids.max()), int(b.labels.max())) for b in batches) >= 2**15  # int16 where they fit
    ids = np.zeros((n, size, seq_len), np.int32 if wide else np.int16)
    labels = np.full((n, size, seq_len), IGNORE_INDEX, ids.dtype)
    segments, lengths = np.zeros((n, size, seq_len), np.int8), np.zeros((n, size), np.int32)
    nsp = np.full((n, size), -1, np.int8)
    for i, b in enumerate(batches):
        T = b.input_ids.shape[1]
        ids[i, :, :T], labels[i, :, :T], segments[i, :, :T] = b.input_ids, b.labels, b.token_type_ids
        lengths[i] = T if b.attention_mask is None else b.attention_mask.sum(1)
        if b.nsp_labels is not None:
            nsp[i] = b.nsp_labels
    tokens = np.array([b.tokens for b in batches], np.int64)
    return dict(ids=ids, segments=segments, lengths=lengths, labels=labels, nsp=nsp, tokens=tokens)


def unpack(arrays: dict[str, np.ndarray], i: int) -> Batch:
    """Batch i, as data.make_batch gave it."""
    lengths = torch.from_numpy(arrays["lengths"][i].astype(np.int64))  # (B,)
    T = int(lengths.max())
    attention = (torch.arange(T)[None, :] < lengths[:, None]).long()
    take = lambda name: torch.from_numpy(arrays[name][i, :, :T].astype(np.int64))  # noqa: E731
    nsp = arrays["nsp"][i]
    return Batch(take("ids"), take("segments"), attention if bool((lengths < T).any()) else None, take("labels"),
                 None if nsp[0] < 0 else torch.from_numpy(nsp.astype(np.int64)), int(arrays["tokens"][i]))


def fits(batches: int, batch_size: int, seq_len: int) -> bool:
    return batches * batch_size * seq_len * 9 <= MAX_BYTES


def save(path: Path, packed: list[dict[str, np.ndarray]], compressed: bool = False) -> None:
    """Write batches packed one by one (`pack([batch], ...)`) as one file (atomically), then delete the oldest
    files past MAX_FILES. A disk that refuses (full, read-only) loses only the time the next run could save.
    Uncompressed (11 MB for the classroom preset, written in a blink at the run's end) unless `compressed`
    (3 MB, half a second: the shipped file)."""
    arrays = {name: np.concatenate([p[name] for p in packed]) for name in FIELDS}  # int16 with int32: int32
    with contextlib.suppress(OSError):
        with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
            (np.savez_compressed if compressed else np.savez)(f, **arrays)
        kept = sorted(path.parent.glob("batches-*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[MAX_FILES:]:
            old.unlink(missing_ok=True)


def load(path: Path, make: Callable[[int], Batch], start: int, stop: int, *, seq_len: int, batch_size: int,
         vocab_size: int):
    """The arrays of a file holding batches start.. of `make` that pass the checks, else None."""
    try:
        with np.load(path, allow_pickle=False) as f:
            if sum(member.file_size for member in f.zip.infolist()) > 2 * MAX_BYTES:  # unpacked: no zip bomb
                return None
            arrays = {name: f[name] for name in FIELDS}
        sound = _sound(arrays, seq_len, batch_size, vocab_size)
    except Exception:  # noqa: BLE001  whatever a damaged or hostile file raises (a bad zip, a pickle refused)
        return None
    n = len(arrays["tokens"])
    if not sound or n <= start:
        return None
    last = min(n, stop) - 1
    for i in sorted({start, (start + last) // 2, last}):
        if not _same(unpack(arrays, i), make(i)):
            return None
    return arrays


def _sound(arrays: dict[str, np.ndarray], seq_len: int, batch_size: int, vocab_size: int) -> bool:
    """Every array of the expected dtype and shape, and every value one make_batch could give."""
    n = len(arrays["tokens"])
    grid, rows = (n, batch_size, seq_len), (n, batch_size)
    if n == 0 or batch_size == 0:
        return False
    wide = arrays["ids"].dtype
    dtypes = dict(ids=wide, segments=np.int8, lengths=np.int32, labels=wide, nsp=np.int8, tokens=np.int64)
    shapes = dict(ids=grid, segments=grid, lengths=rows, labels=grid, nsp=rows, tokens=(n,))
    if wide not in (np.int16, np.int32) or any(arrays[k].dtype != dtypes[k] or arrays[k].shape != shapes[k]
                                                for k in FIELDS):
        return False
    ids, labels, lengths, nsp = arrays["ids"], arrays["labels"], arrays["lengths"], arrays["nsp"]
    return bool(ids.min() >= 0 and ids.max() < vocab_size and lengths.min() >= 1 and lengths.max() <= seq_len
                and ((labels == IGNORE_INDEX) | ((labels >= 0) & (labels < vocab_size))).all()
                and ((arrays["segments"] == 0) | (arrays["segments"] == 1)).all()
                and ((nsp == -1).all(1) | ((nsp == 0) | (nsp == 1)).all(1)).all()  # each batch: all NSP or none
                and (arrays["tokens"] == lengths.sum(1)).all())


def _same(a: Batch, b: Batch) -> bool:
    pairs = [(a.input_ids, b.input_ids), (a.token_type_ids, b.token_type_ids), (a.attention_mask, b.attention_mask),
             (a.labels, b.labels), (a.nsp_labels, b.nsp_labels)]
    return a.tokens == b.tokens and all(
        (x is None and y is None) or (x is not None and y is not None and x.shape == y.shape and torch.equal(x, y))
        for x, y in pairs)
