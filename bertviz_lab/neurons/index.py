"""Each feed-forward neuron's top-activating contexts over a corpus, for every neuron of every layer at once, made
once per model and corpus and kept on disk under the weights' hash (a restart, or another learner, reads the file).

Streamed, never the corpus's whole activation matrix: the sentences go through the model in padded batches (sorted
by length, so a batch wastes little on padding), each through `read.run` on a twin under no_grad; per layer, the
running top K values of each neuron and their places (sentence, position) are merged with the batch's own top K,
and a running float64 sum gives each neuron's mean. What is kept is (L, N, K), whatever the corpus's size; the
largest tensor made is one batch's (B, T, N) activations of one layer. [CLS], [SEP] (the framing tokens of every
family) and padding take part in neither the top K nor the mean.

Order is by value, highest first, and ties go to the earlier sentence, then the earlier position, whatever order
the batches came in. The batch size changes no place (tests/neurons/test_index.py), only the last bits of a value:
a batch's padding changes the order of a few sums, which could swap two activations equal to float32 rounding,
never two that differ more. A sentence longer than the model's positions is cut to them, as the sentence page cuts a
text; `NeuronIndex.truncated` counts those cut.

The file's name is the weights' digest (sha256 over the state_dict's names, dtypes, shapes and bytes), the corpus's
(the sentences, and the vocabulary that reads them), the format and K. A file is trusted only as far as it is
checked: numpy reads it with pickles refused, every array's dtype, shape and range is checked, and one sentence is
run afresh and must give the values the file holds for it; a file that fails is built anew. The folder is
$BERTVIZ_NEURON_CACHE (settings.py), else cache/neurons in the data folder; the newest MAX_FILES files are kept.
A disk that refuses the file (read-only, full) costs only the time the next load spends building again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertviz_lab import atomic, settings
from bertviz_lab.errors import InputError
from bertviz_lab.files import data_root
from bertviz_lab.neurons.read import run, sizes, twin

K = 12  # contexts kept per neuron
MAX_SENTENCES = 20_000  # 2,000 story sentences take 2.2 s with the shipped model on 2 cores (bench/neurons.py)
FORMAT = 1  # bump when what a file holds, or how its numbers are made, changes
MAX_FILES = 16  # the shipped model's index over 2,000 sentences takes 1.7 MB; BERT-base's about 6 MB
SHIFT = 20  # a place is sentence << SHIFT | position in one int64, ordered as (sentence, position)
PAD_KEY = torch.iinfo(torch.int64).max  # no context: after every real place
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Context:
    sentence: int  # index into the corpus
    position: int  # the token's position in `tokens`
    value: float  # the neuron's activation there
    tokens: tuple[str, ...]  # the sentence as the model read it, specials included


@dataclass(frozen=True, eq=False)  # arrays: compare fields with numpy
class NeuronIndex:
    digest: str  # the cache key: weights, corpus, format and K
    sentences: tuple[tuple[str, ...], ...]  # each sentence's tokens, specials included
    values: np.ndarray  # (L, N, K) float32, descending; -inf where a neuron has fewer than K tokens to rank
    where: np.ndarray  # (L, N, K, 2) int32 (sentence, position); -1 where values is -inf
    mean: np.ndarray  # (L, N) float64: the mean activation over the corpus's tokens
    tokens: int  # the tokens averaged over (neither framing tokens nor padding)
    weights: str = ""  # weights_digest(model)
    truncated: int = 0  # sentences cut to the model's positions

    def contexts(self, layer: int, neuron: int, k: int = K) -> list[Context]:
        """The neuron's k highest activations, highest first, each with its sentence's tokens."""
        L, N, kept = self.values.shape
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L:
            raise InputError(f"layer {layer!r} does not exist: this model's layers are 0 to {L - 1}")
        if isinstance(neuron, bool) or not isinstance(neuron, int) or not 0 <= neuron < N:
            raise InputError(f"neuron {neuron!r} does not exist: each layer has neurons 0 to {N - 1}")
        out = []
        for value, (s, t) in zip(self.values[layer, neuron, :k], self.where[layer, neuron, :k]):
            if s >= 0:
                out.append(Context(int(s), int(t), float(value), self.sentences[s]))
        return out


_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DIGESTS_LOCK = threading.Lock()


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 over the state_dict: each tensor's name, dtype, shape and bytes. Memoised per model object while
    its tensors are the same (data_ptr) and unchanged in place (_version: an optimizer step, a state_dict
    loaded into them; an edit through `.data` is not seen, as in ops.py's packed weights)."""
    state = model.state_dict()
    signature = tuple((name, t.data_ptr(), t._version, t.dtype, tuple(t.shape)) for name, t in state.items())
    with _DIGESTS_LOCK:
        entry = _DIGESTS.get(model)
        if entry is not None and entry[0] == signature:
            return entry[1]
    digest = hashlib.sha256()
    for name, t in state.items():
        digest.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        flat = t.detach().to("cpu").contiguous().reshape(-1)
        digest.update(flat.view(torch.uint8).numpy() if flat.numel() else b"")
    with _DIGESTS_LOCK:
        _DIGESTS[model] = (signature, digest.hexdigest())
    return digest.hexdigest()


def corpus_digest(tokenizer, sentences: Sequence[str]) -> str:
    """sha256 of the sentences and of the vocabulary that reads them (the same text, another tokenizer: others)."""
    digest = hashlib.sha256("\n".join(tokenizer.vocab).encode())
    digest.update(f"lowercase={getattr(tokenizer, 'lowercase', None)}\n".encode())
    for sentence in sentences:
        digest.update(len(sentence).to_bytes(8, "little") + sentence.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def key(weights: str, corpus: str, k: int) -> str:
    """The file name of an index."""
    return f"neurons-{weights[:32]}-{corpus[:32]}-v{FORMAT}-k{k}.npz"


def cache_folder() -> Path:
    """Where indexes are kept: $BERTVIZ_NEURON_CACHE (a ConfigError sentence where no files can be kept there,
    settings.py), else cache/neurons in the data folder."""
    return settings.folder(settings.NEURON_CACHE, data_root() / "cache" / "neurons")


def _check(sentences: Sequence[str], k: int, batch_size: int) -> None:
    if isinstance(sentences, str):
        raise InputError("the corpus must be a list of sentences, not one text")
    if not len(sentences):
        raise InputError("the corpus has no sentences: give at least one")
    if len(sentences) > MAX_SENTENCES:
        raise InputError(f"the corpus has {len(sentences):,} sentences; the most an index reads is "
                         f"{MAX_SENTENCES:,}: use a part of it")
    for name, value in (("k", k), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
            raise InputError(f"{name} must be a whole number from 1 to 1024, got {value!r}")


def _encode(tokenizer, sentences: Sequence[str], max_tokens: int) -> list:
    """Each sentence's Encoding, cut to `max_tokens`; a sentence that cannot be read is a sentence naming it."""
    encodings = []
    for i, text in enumerate(sentences):
        if not isinstance(text, str):
            raise InputError(f"sentence {i + 1:,} of the corpus is not text ({type(text).__name__})")
        try:
            encodings.append(tokenizer.encode(text, max_length=max_tokens))
        except InputError as e:
            raise InputError(f"sentence {i + 1:,} of the corpus cannot be read: {e}") from None
    return encodings


def _batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Sentence indices in batches of similar length; within a batch in corpus order (so that a batch's flattened
    (row, position) order is the (sentence, position) order ties are broken by)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [sorted(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]


def _tensors(encodings: list, rows: list[int], pad: int, device) -> tuple[torch.Tensor, ...]:
    """(ids, segments, attention_mask, counted) (B, T) for the sentences `rows`: right-padded; `counted` is True
    on the tokens that rank and average (not padding, not the framing tokens)."""
    T = max(len(encodings[i]) for i in rows)
    ids = torch.full((len(rows), T), pad, dtype=torch.long)
    segments, attention = torch.zeros_like(ids), torch.zeros_like(ids)
    counted = torch.zeros(len(rows), T, dtype=torch.bool)
    for b, i in enumerate(rows):
        e = encodings[i]
        ids[b, :len(e)], segments[b, :len(e)] = torch.tensor(e.ids), torch.tensor(e.segment_ids)
        attention[b, :len(e)] = 1
        counted[b, :len(e)] = ~torch.tensor(e.special_mask)
    return ids.to(device), segments.to(device), attention.to(device), counted.to(device)


def _activations(model_twin, ids, segments, attention) -> list[torch.Tensor]:
    """Each layer's (B, T, N) activations, float32."""
    with torch.no_grad():
        out = run(model_twin, ids, segments, attention if bool((attention == 0).any()) else None, keep=True)
    return [a.float() for a in out.activations]


def update(top: torch.Tensor, places: torch.Tensor, x: torch.Tensor, keys: torch.Tensor) -> None:
    """Merge a batch into one layer's running top k, in place: `top` (N, k) values descending, `places` (N, k)
    their keys; `x` (C, N) the batch's counted tokens' activations, `keys` (C,) their places. The order is value
    descending, then key ascending. Only entries at least a neuron's k-th value can enter: after the first batches
    those are few, so the cost is one comparison of the batch with the thresholds and a sort of the few."""
    N, k = top.shape
    hit = x >= top[:, -1]  # (C, N)
    if len(x) > k and int(hit.sum()) > N * k:  # the first batches: below the batch's own k-th value cannot enter
        hit &= x >= x.topk(k, dim=0).values[-1]
    hits = hit.reshape(-1).nonzero()[:, 0]  # (h,) flat indices into x: row * N + neuron
    if not len(hits):
        return
    rows, cols = hits // N, hits % N
    neurons = torch.unique(cols)  # (n,) the neurons the batch reaches
    slot = torch.full((N,), -1, dtype=torch.long, device=x.device)
    slot.index_copy_(0, neurons, torch.arange(len(neurons), device=x.device))
    values = torch.cat([top.index_select(0, neurons).reshape(-1), x.reshape(-1).take(hits)])
    places_ = torch.cat([places.index_select(0, neurons).reshape(-1), keys.take(rows)])
    owner = torch.cat([torch.arange(len(neurons), device=x.device).repeat_interleave(k), slot.take(cols)])
    for by, descending in ((1, False), (0, True), (2, False)):  # key, value, owner: the last sort is the first key
        order = (values, places_, owner)[by].argsort(descending=descending, stable=True)  # stable: keeps ties
        values, places_, owner = values.take(order), places_.take(order), owner.take(order)
    counts = torch.bincount(owner, minlength=len(neurons))
    take = ((counts.cumsum(0) - counts)[:, None] + torch.arange(k, device=x.device)).reshape(-1)  # each one's first k
    top.index_copy_(0, neurons, values.take(take).view(-1, k))
    places.index_copy_(0, neurons, places_.take(take).view(-1, k))


def build(model, tokenizer, sentences: Sequence[str], *, k: int = K, batch_size: int = 32,
          progress: Progress | None = None) -> NeuronIndex:
    """Every neuron's top k contexts and mean activation over `sentences`, streamed in batches (module note)."""
    _check(sentences, k, batch_size)
    encodings = _encode(tokenizer, sentences, model.config.max_tokens)
    L, N = sizes(model)
    device = next(model.parameters()).device
    top = torch.full((L, N, k), -torch.inf, device=device)  # (L, N, k) the running top values
    places = torch.full((L, N, k), PAD_KEY, dtype=torch.long, device=device)  # (L, N, k) their keys
    total = torch.zeros(L, N, dtype=torch.float64, device=device)  # (L, N) the running sums
    counted_tokens, done, model_twin = 0, 0, twin(model)
    for rows in _batches([len(e) for e in encodings], batch_size):
        ids, segments, attention, counted = _tensors(encodings, rows, tokenizer.pad_id, device)
        B, T = ids.shape
        keys = ((torch.tensor(rows, device=device)[:, None] << SHIFT)
                + torch.arange(T, device=device)[None]).reshape(-1)  # (B T,) ascending
        keys = keys[counted.reshape(-1)]  # (C,) the counted tokens' places
        for layer, act in enumerate(_activations(model_twin, ids, segments, attention)):  # (B, T, N)
            x = act[counted]  # (C, N)
            total[layer] += x.sum(0, dtype=torch.float64)
            update(top[layer], places[layer], x, keys)
        counted_tokens += int(counted.sum())
        done += len(rows)
        if progress is not None:
            progress(done / len(encodings), f"Reading sentence {done:,} of {len(encodings):,}")
    if not torch.isfinite(total).all():  # a NaN or an infinity anywhere makes its neuron's sum one
        raise InputError("the activations are not all finite numbers: this model's weights overflow on this corpus")
    return _index(model, tokenizer, sentences, encodings, top, places, total, counted_tokens)


def _index(model, tokenizer, sentences, encodings, top, places, total, counted_tokens) -> NeuronIndex:
    pad = places == PAD_KEY
    where = torch.stack([places >> SHIFT, places & ((1 << SHIFT) - 1)], -1).masked_fill(pad[..., None], -1)
    weights = weights_digest(model)
    return NeuronIndex(
        digest=key(weights, corpus_digest(tokenizer, sentences), top.shape[-1])[:-4],
        sentences=tuple(tuple(e.tokens) for e in encodings), values=top.cpu().numpy().astype(np.float32),
        where=where.cpu().numpy().astype(np.int32), mean=(total / max(counted_tokens, 1)).cpu().numpy(),
        tokens=counted_tokens, weights=weights, truncated=sum(bool(e.truncated) for e in encodings))


def load_or_build(model, tokenizer, sentences: Sequence[str], *, folder: Path | None = None, k: int = K,
                  batch_size: int = 32, progress: Progress | None = None) -> NeuronIndex:
    """The index kept in `folder` (default: the cache folder, module note) for this model and corpus, checked;
    else built, and written there (a folder that cannot be written: built all the same, not kept)."""
    _check(sentences, k, batch_size)
    path = Path(folder if folder is not None else cache_folder()) / key(
        weights_digest(model), corpus_digest(tokenizer, sentences), k)
    loaded = load(path, model, tokenizer, sentences, k)
    if loaded is not None:
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the newest again, the last to be removed
        return loaded
    index = build(model, tokenizer, sentences, k=k, batch_size=batch_size, progress=progress)
    save(path, index)
    return index


def save(path: Path, index: NeuronIndex) -> None:
    """Write the index (atomically), then remove the oldest files past MAX_FILES. A disk that refuses: not kept."""
    lengths = np.array([len(s) for s in index.sentences], np.int32)
    words = np.array([t for s in index.sentences for t in s], dtype=str)
    arrays = dict(values=index.values, where=index.where, mean=index.mean, tokens=np.int64(index.tokens),
                  truncated=np.int64(index.truncated), lengths=lengths, words=words)
    with contextlib.suppress(OSError):
        with atomic.atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **arrays)
        kept = sorted(path.parent.glob("neurons-*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[MAX_FILES:]:
            old.unlink(missing_ok=True)


def load(path: Path, model, tokenizer, sentences: Sequence[str], k: int = K) -> NeuronIndex | None:
    """The index in `path` if it is one for this model and corpus that passes the checks (module note), else None."""
    L, N = sizes(model)
    limit = L * N * (12 * k + 8) * 2 + len(sentences) * model.config.max_tokens * 4 * 128 + (1 << 20)
    try:
        with np.load(path, allow_pickle=False) as f:
            if sum(member.file_size for member in f.zip.infolist()) > limit:  # unpacked: no zip bomb
                return None
            arrays = {name: f[name] for name in ("values", "where", "mean", "tokens", "truncated", "lengths",
                                                  "words")}
        if not _sound(arrays, L, N, k, len(sentences)):
            return None
        ends = np.cumsum(arrays["lengths"])
        words = arrays["words"].tolist()
        index = NeuronIndex(
            digest=path.name[:-4], sentences=tuple(tuple(words[e - n:e]) for e, n in zip(ends, arrays["lengths"])),
            values=arrays["values"], where=arrays["where"], mean=arrays["mean"], tokens=int(arrays["tokens"]),
            weights=weights_digest(model), truncated=int(arrays["truncated"]))
        return index if _same(index, model, tokenizer, sentences) else None
    except Exception:  # noqa: BLE001  whatever a damaged or hostile file raises (a bad zip, a pickle refused)
        return None


def _sound(arrays: dict[str, np.ndarray], L: int, N: int, k: int, S: int) -> bool:
    """Every array of the expected dtype and shape, every place inside its sentence, values descending."""
    shapes = dict(values=((L, N, k), np.float32), where=((L, N, k, 2), np.int32), mean=((L, N), np.float64),
                  tokens=((), np.int64), truncated=((), np.int64), lengths=((S,), np.int32))
    if any(arrays[name].shape != shape or arrays[name].dtype != dtype for name, (shape, dtype) in shapes.items()):
        return False
    lengths, where, values = arrays["lengths"], arrays["where"], arrays["values"]
    words = arrays["words"]
    if words.dtype.kind != "U" or words.shape != (int(lengths.sum()),) or lengths.min() < 1:
        return False
    pad = where[..., 0] < 0
    s, t = np.where(pad, 0, where[..., 0]), np.where(pad, 0, where[..., 1])
    return bool((where[..., 0] < S).all() and (pad == (where[..., 1] < 0)).all() and (pad == np.isneginf(values)).all()
                and (t < lengths[s]).all() and (t >= 0).all() and (values[..., 1:] <= values[..., :-1]).all()
                and np.isfinite(arrays["mean"]).all() and 0 <= int(arrays["tokens"]) <= int(lengths.sum())
                and 0 <= int(arrays["truncated"]) <= S)


def _same(index: NeuronIndex, model, tokenizer, sentences: Sequence[str]) -> bool:
    """One sentence (the first neuron's top one) read afresh: the same tokens, and the values the file holds for
    it (to float32 rounding and a batch's padding). A file from other code that made the numbers otherwise fails."""
    s = int(index.where[0, 0, 0, 0])
    if s < 0:
        return True
    encoding = _encode(tokenizer, [sentences[s]], model.config.max_tokens)[0]
    if tuple(encoding.tokens) != index.sentences[s]:
        return False
    device = next(model.parameters()).device
    ids, segments, attention, _ = _tensors([encoding], [0], tokenizer.pad_id, device)
    acts = torch.stack(_activations(twin(model), ids, segments, attention))[:, 0].cpu().numpy()  # (L, T, N)
    layer, neuron, slot = np.nonzero(index.where[..., 0] == s)
    fresh = acts[layer, index.where[layer, neuron, slot, 1], neuron]
    kept = index.values[layer, neuron, slot]
    return bool(np.allclose(fresh, kept, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(kept).max()))))
