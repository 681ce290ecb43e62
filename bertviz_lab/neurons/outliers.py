"""Outlier LayerNorm dimensions (Kovaleva et al. 2021, "BERT busters"): in pretrained BERTs a few dimensions of the
LayerNorms' gain (gamma) and bias (beta) stand far from the rest in every layer, and switching those few dimensions
off (their LayerNorm outputs zeroed) wrecks masked-LM performance, where switching off random ones does little.

`outlier_dims` reads each layer's output LayerNorm (`output.LayerNorm`, after the feed-forward block): the two
dimensions of largest |gamma - median(gamma)| and the two of largest |beta|, with z-scores ((x - median) / std over
the layer's dimensions), and `dims`, the two dimensions that are among them in most layers (ties broken by the summed
|z|). `outlier_test` zeroes two dimensions in the output of every LayerNorm of every encoder layer (the attention
half's `attention.output.LayerNorm` and the feed-forward half's `output.LayerNorm`; the same as setting their gamma
and beta to 0 there) by forward hooks on a twin (bert/ops.py), and measures the MLM loss and top-1 accuracy on
`sentences`, against `draws` random pairs of dimensions (seeded, never an outlier one). 15% of each sentence's
non-special tokens (at least one) are replaced by [MASK], chosen once with the seed: every draw reads the same masks.

What is held out is the caller's choice of `sentences`: `held_out` gives story-world sentences from a generator seed
of their own (HELD_OUT_SEED, which no run's training stream uses), but the world is written by a small grammar, so
some of its sentences occur, word for word, in any large training sample too; bench/neurons_findings.py drops those
it finds in the shipped model's training stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import twin
from bertviz_lab.corpus import StoryGenerator
from bertviz_lab.errors import InputError

MASK_RATE = 0.15
HELD_OUT_SEED = 55_055  # a story-generator seed of this module's (runs seed their streams from 63-bit mixes)
MAX_SENTENCES = 5_000
BATCH = 64
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Outliers:
    weight_dims: np.ndarray  # (L, 2) per layer, the dims of largest |gamma - median(gamma)|, largest first
    weight_z: np.ndarray  # (L, 2) their z-scores, (gamma - median) / std
    bias_dims: np.ndarray  # (L, 2) per layer, the dims of largest |beta|
    bias_z: np.ndarray  # (L, 2) their z-scores, (beta - median) / std
    counts: np.ndarray  # (d,) in how many of the 4L slots above each dimension appears
    dims: tuple[int, int]  # the two appearing most often (ties: the larger summed |z|)


@dataclass(frozen=True)
class OutlierTest:
    dims: tuple[int, int]
    loss: float  # mean MLM cross-entropy over the masked tokens, nothing switched off
    accuracy: float  # top-1 accuracy there
    loss_off: float  # with `dims` zeroed
    accuracy_off: float
    random_loss: np.ndarray  # (draws,) with each random pair zeroed
    random_accuracy: np.ndarray  # (draws,)
    random_dims: np.ndarray  # (draws, 2)
    masked: int  # tokens scored
    seed: int = 0

    @property
    def beats_random(self) -> bool:
        """The outlier dims raise the loss more than every random pair does."""
        return bool(self.loss_off > self.random_loss.max())


def _largest(values: torch.Tensor, centre: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The 2 dims of largest |values - centre| (largest first) and their z-scores (values - median) / std."""
    values = values.detach().double().cpu()
    order = torch.argsort(-(values - centre).abs(), stable=True)[:2]
    z = (values - values.median()) / values.std()
    return order.numpy(), z[order].numpy()


def outlier_dims(model: BertForPreTraining) -> Outliers:
    """Per layer, the output LayerNorm's outlying gain and bias dimensions, and the two outlying most often."""
    rows = []
    for layer in model.bert.encoder.layer:
        norm = layer.output.LayerNorm
        gamma, beta = norm.weight.detach().double().cpu(), norm.bias.detach().double().cpu()
        rows.append((*_largest(gamma, gamma.median()), *_largest(beta, torch.zeros(()))))
    weight_dims, weight_z, bias_dims, bias_z = (np.stack(part) for part in zip(*rows))
    width = model.config.hidden_size
    counts = np.bincount(np.concatenate([weight_dims.ravel(), bias_dims.ravel()]), minlength=width)
    strength = np.zeros(width)
    np.add.at(strength, weight_dims.ravel(), np.abs(weight_z.ravel()))
    np.add.at(strength, bias_dims.ravel(), np.abs(bias_z.ravel()))
    order = np.lexsort((np.arange(width), -strength, -counts))  # most often, then largest |z|, then lowest id
    return Outliers(weight_dims, weight_z, bias_dims, bias_z, counts, (int(order[0]), int(order[1])))


def held_out(n: int, seed: int = HELD_OUT_SEED) -> list[str]:
    """`n` distinct story-world sentences from a generator seeded `seed` (see the module's note on what that holds
    out), in the order the stories tell them."""
    generator, seen = StoryGenerator(seed), {}
    while len(seen) < n:
        for sentence in generator.story():
            seen.setdefault(sentence, None)
    return list(seen)[:n]


@dataclass(frozen=True)
class Masked:
    """Sentences with some word tokens replaced by [MASK] (`mask_sentences`), ready for `mlm_loss`."""

    ids: torch.Tensor  # (S, T) with [MASK]s
    segments: torch.Tensor  # (S, T)
    attention: torch.Tensor  # (S, T) 1 for real tokens
    labels: torch.Tensor  # (S, T) the original id where masked, -100 elsewhere


def mask_sentences(tokenizer, sentences: Sequence[str], seed: int) -> Masked:
    """`sentences` padded into one batch, MASK_RATE of each one's non-special tokens (at least one) replaced by
    [MASK], chosen with `seed` once: every measurement over the result reads the same masks."""
    encodings = [tokenizer.encode(s) for s in sentences]
    T = max(len(e.ids) for e in encodings)
    rng = np.random.Generator(np.random.PCG64(seed))
    ids = torch.full((len(encodings), T), tokenizer.pad_id, dtype=torch.long)
    segments, attention = torch.zeros_like(ids), torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for row, enc in enumerate(encodings):
        ids[row, :len(enc.ids)] = torch.tensor(enc.ids)
        segments[row, :len(enc.ids)] = torch.tensor(enc.segment_ids)
        attention[row, :len(enc.ids)] = 1
        words = [i for i, special in enumerate(enc.special_mask) if not special]
        if not words:
            continue
        picked = rng.choice(words, size=max(1, round(MASK_RATE * len(words))), replace=False)
        labels[row, picked] = ids[row, picked]
        ids[row, picked] = tokenizer.mask_id
    if not (labels >= 0).any():
        raise InputError("the sentences have no words to mask: give at least one sentence with words")
    return Masked(ids, segments, attention, labels)


def _zeroing(dims: torch.Tensor):
    def hook(_module, _args, out: torch.Tensor) -> torch.Tensor:
        return out.index_fill(-1, dims, 0.0)
    return hook


@torch.no_grad()
def mlm_loss(hooked: BertForPreTraining, data: Masked, vocab: int,
             dims: Sequence[int] | None = None) -> tuple[float, float]:
    """(mean loss, accuracy) over the masked tokens, on `hooked` (a twin, ops.twin, with whatever hooks its caller
    added: probing/amnesic.py's projection) and the LayerNorms' `dims` zeroed (None: nothing zeroed)."""
    device = next(hooked.parameters()).device
    handles = []
    if dims is not None:
        index = torch.as_tensor(list(dims), dtype=torch.long, device=device)
        norms = {id(n): n for layer in hooked.bert.encoder.layer  # ALBERT: one module, zeroed at every depth
                 for n in (layer.attention.output.LayerNorm, layer.output.LayerNorm)}
        handles = [norm.register_forward_hook(_zeroing(index)) for norm in norms.values()]
    loss, right = 0.0, 0
    try:
        for start in range(0, data.ids.shape[0], BATCH):
            rows = slice(start, start + BATCH)
            where = (data.labels[rows] >= 0).to(device)  # (b, T)
            logits = hooked(data.ids[rows].to(device), data.segments[rows].to(device), data.attention[rows].to(device),
                            masked_positions=where).mlm_logits[:, :vocab].double()  # (n, V)
            target = data.labels[rows].to(device)[where]
            loss += float(F.cross_entropy(logits, target, reduction="sum"))
            right += int((logits.argmax(-1) == target).sum())
    finally:
        for handle in handles:
            handle.remove()
    count = int((data.labels >= 0).sum())
    return loss / count, right / count


def outlier_test(model: BertForPreTraining, tokenizer, sentences: Sequence[str], dims: Sequence[int] | None = None,
                 draws: int = 20, seed: int = 0, progress: Progress | None = None) -> OutlierTest:
    """MLM loss and accuracy on `sentences` with nothing switched off, with `dims` (default: `outlier_dims`'s)
    zeroed in every LayerNorm of every layer, and with each of `draws` random pairs zeroed (module note)."""
    if not model.has_mlm:
        raise InputError("this model has no masked-language-model head, so there is no MLM loss to measure")
    if not 1 <= len(sentences) <= MAX_SENTENCES:
        raise InputError(f"give 1 to {MAX_SENTENCES:,} sentences; got {len(sentences):,}")
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= 1000:
        raise InputError(f"draws must be a whole number from 1 to 1000; got {draws!r}")
    width = model.config.hidden_size
    dims = outlier_dims(model).dims if dims is None else tuple(int(d) for d in dims)
    if len(set(dims)) != 2 or not all(0 <= d < width for d in dims):
        raise InputError(f"give two different dimensions from 0 to {width - 1}; got {dims!r}")
    rng = np.random.Generator(np.random.PCG64(seed))
    pool = np.array([d for d in range(width) if d not in dims])
    random_dims = np.stack([np.sort(rng.choice(pool, size=2, replace=False)) for _ in range(draws)])
    data, hooked = mask_sentences(tokenizer, sentences, seed), twin(model)
    vocab = tokenizer.vocab_size
    results = []
    for i, zeroed in enumerate([None, dims, *random_dims.tolist()]):
        if progress is not None:
            progress(i / (draws + 2), "nothing switched off" if i == 0 else "the outlier dimensions" if i == 1
                     else f"random pair {i - 1} of {draws}")
        results.append(mlm_loss(hooked, data, vocab, zeroed))
    if progress is not None:
        progress(1.0, "done")
    losses, accuracies = np.array(results).T
    return OutlierTest(dims, float(losses[0]), float(accuracies[0]), float(losses[1]), float(accuracies[1]),
                       losses[2:].copy(), accuracies[2:].copy(), random_dims, int((data.labels >= 0).sum()), seed)
