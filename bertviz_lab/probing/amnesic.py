"""Amnesic probing (Elazar et al. 2021): does the model USE what a probe finds? Remove the property from one hidden
state and see what the model then does worse.

A probe that reads part of speech from layer 2 shows the information is there, not that the model needs it. So the
task's linear information is removed from hidden state `layer` by INLP (inlp.py, Ravfogel et al. 2020), and the model
runs on with every token's vector there projected, h -> h - (h @ Q) Q^T, by forward hooks (`projecting`). What it
then loses at the masked words of held-out text (the corpus's test sentences, MASK_RATE of their word tokens masked
by a seeded draw: neurons/outliers.py's masking and loss), and for noun number at the verb of the agreement pairs
(syntax/agreement.py), is set against removing `draws` random subspaces of the same rank: removing any r directions
costs something, and only a loss beyond that is the property's.

The hooks are PyTorch's own, on a twin of the model (bert/ops.py `twin`: the textbook path, so every module is called,
and no other reader of the model sees them): hidden state 0 is the output of the embeddings (of `embeddings_project`
where the embeddings are narrower than the layers: ALBERT, ELECTRA), hidden state l >= 1 that of encoder layer l - 1.
ALBERT's one layer serves every depth, so the hook counts its calls in each forward and projects depth `layer` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

from bertviz_lab.bert.ops import twin
from bertviz_lab.corpus.agreement import MAX_ATTRACTORS, MAX_PAIRS, agreement_pairs
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.outliers import mask_sentences, mlm_loss
from bertviz_lab.probing.features import read_features
from bertviz_lab.probing.inlp import Removal, fresh_accuracy, inlp, random_basis
from bertviz_lab.probing.records import TASK_NAMES, TASKS, Amnesic
from bertviz_lab.probing.tasks import examples
from bertviz_lab.syntax.agreement import score_pairs
from bertviz_lab.syntax.report import Corpus, fitting

MAX_HELD_OUT = 300  # test sentences the masked-LM loss is measured on
MAX_DRAWS = 50
AGREEMENT_PAIRS = 50  # per number of attractors, 0..3
RANK_SHARE = 0.5  # INLP stops at this share of the width: past it any projection, random or not, guts the vectors
Progress = Callable[[float, str], None]


def default_layer(layers: int) -> int:
    """The hidden state in the middle of 0..`layers` (the embeddings' output, then each layer's)."""
    return (layers + 1) // 2


def _check_layer(model, layer) -> None:
    layers = model.config.num_hidden_layers
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer <= layers:
        raise InputError(f"hidden state {layer!r} does not exist: this model's are 0 (the embeddings' output) to "
                         f"{layers} (its last layer's)")


def _site(bert, layer: int) -> tuple[torch.nn.Module, int]:
    """(the module whose output is hidden state `layer`, which of its calls in one forward that is)."""
    if layer == 0:
        return (bert.embeddings if bert.embeddings_project is None else bert.embeddings_project), 0
    module = bert.encoder.layer[layer - 1]
    calls = [depth for depth, m in enumerate(bert.encoder.layer) if m is module]  # ALBERT: every depth
    return module, calls.index(layer - 1)


@contextmanager
def projecting(model, layer: int, basis) -> Iterator[torch.nn.Module]:
    """A twin of `model` whose hidden state `layer` is projected off the orthonormal columns of `basis` (d, r) at
    every token, while the block runs; the hooks are removed after it."""
    _check_layer(model, layer)
    width = model.config.hidden_size
    basis = np.asarray(basis, dtype=np.float64)
    if basis.ndim != 2 or basis.shape[0] != width:
        raise InputError(f"the directions to remove must be a ({width}, r) matrix; got shape {basis.shape}")
    hooked = twin(model)
    parameter = next(hooked.parameters())
    q = torch.as_tensor(basis, dtype=parameter.dtype, device=parameter.device)  # (d, r)
    module, which = _site(hooked.bert, int(layer))
    seen = [0]

    def restart(_module, _args) -> None:
        seen[0] = 0

    def project(_module, _args, out):
        seen[0] += 1
        if seen[0] - 1 != which:
            return None
        h = out[0] if isinstance(out, tuple) else out  # (B, T, d); a layer also returns its attention steps
        h = h - (h @ q) @ q.T
        return (h, *out[1:]) if isinstance(out, tuple) else h

    handles = [] if not basis.shape[1] else [hooked.bert.register_forward_pre_hook(restart),
                                             module.register_forward_hook(project)]
    try:
        yield hooked
    finally:
        for handle in handles:
            handle.remove()


def _checked(model, task, layer, draws, pairs) -> None:
    if task not in TASKS:
        raise InputError(f"there is no probing task {task!r}: the tasks are {', '.join(TASKS)}")
    _check_layer(model, layer)
    for name, value, most in (("draws", draws, MAX_DRAWS), ("agreement_pairs", pairs, MAX_PAIRS)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise InputError(f"{name} must be a whole number from 1 to {most:,}; got {value!r}")


def _masked_lm(model, tokenizer, corpus: Corpus, layer: int, bases: list[np.ndarray], seed: int,
               report: Progress, share: tuple[float, float]) -> tuple[int, np.ndarray, np.ndarray]:
    """(tokens masked, losses, accuracies) over the corpus's test sentences, one per basis removed."""
    start, width = share
    texts = [tree.text for tree in corpus.trees[corpus.split:][:MAX_HELD_OUT]]
    data = mask_sentences(tokenizer, texts, seed)
    out = []
    for i, basis in enumerate(bases):
        report(start + width * i / len(bases), f"the masked-word loss on {len(texts):,} held-out sentences: "
                                               f"{i} of {len(bases)} runs")
        with projecting(model, layer, basis) as hooked:
            out.append(mlm_loss(hooked, data, tokenizer.vocab_size))
    losses, accuracies = np.array(out, dtype=np.float64).T
    return int((data.labels >= 0).sum()), losses, accuracies


def _agreement(model, tokenizer, layer: int, bases: list[np.ndarray], pairs: int, seed: int, report: Progress,
               share: tuple[float, float]) -> tuple[list[dict[int, float | None]], dict[int, int]]:
    """Agreement accuracy by attractors with each basis removed, and the pairs scored per attractor count."""
    start, width = share
    made, out, counts = agreement_pairs(pairs, seed), [], {}
    for i, basis in enumerate(bases):
        report(start + width * i / len(bases), f"agreement across attractors: {i} of {len(bases)} runs")
        with projecting(model, layer, basis) as hooked:
            scored = score_pairs(hooked, tokenizer, made)
        out.append(scored.accuracy())
        counts = {k: n for k, (_, n) in scored.counts().items()}
    return out, counts


def _mean(runs: list[dict[int, float | None]]) -> dict[int, float | None]:
    """attractors -> the mean over the runs (None where a run scored no pair)."""
    return {k: (None if any(r[k] is None for r in runs) else float(np.mean([r[k] for r in runs])))
            for k in range(MAX_ATTRACTORS + 1)}


def _removal_notes(task: str, layer: int, removal: Removal, width: int, max_iterations: int) -> list[str]:
    """What the reader should know about the removal, from its numbers."""
    name, notes = TASK_NAMES[task], []
    if not removal.rank:
        notes.append(f"a linear probe reads {name} at hidden state {layer} no better than the commonest label "
                     f"({removal.before:.0%} against {removal.majority:.0%}), so there was nothing to remove")
    capped = removal.rank >= int(RANK_SHARE * width)
    if removal.after > removal.majority + 0.02 and (removal.iterations >= max_iterations or capped):
        why = (f"the removal stops at half the {width} directions, since past that a random projection of the same "
               "rank guts each vector too and the two no longer compare" if capped else
               f"the removal stops after {removal.iterations} rounds")
        notes.append(f"{why}: with {removal.rank} directions removed a fresh linear probe still reads "
                     f"{removal.after:.0%} against {removal.majority:.0%} for the commonest label, so some {name} "
                     "is left and the test is of the part removed")
    return notes


def amnesic(model, tokenizer, corpus: Corpus, task: str, layer: int, *, draws: int = 5, seed: int = 0,
            agreement_pairs: int = AGREEMENT_PAIRS, max_iterations: int = 30,
            progress: Progress | None = None) -> Amnesic:
    """`task` removed from hidden state `layer` by INLP, against `draws` random projections of the same rank: the
    probe, the masked-word loss and accuracy on held-out text, and for "number" agreement across attractors."""
    _checked(model, task, layer, draws, agreement_pairs)

    def report(fraction: float, message: str) -> None:
        if progress:
            progress(min(1.0, fraction), message)

    corpus = fitting(corpus, tokenizer, model.config.max_tokens)
    report(0.0, "reading the sentences")
    features = read_features(model, tokenizer, corpus.trees, progress=lambda done, total: report(
        0.2 * done / total, f"reading the sentences: {done:,} of {total:,}"))
    ex = examples(task, corpus.trees, features, corpus.split, seed)
    words = (ex.first[:, None] if ex.second is None else np.stack([ex.first, ex.second], axis=1))  # (N, k)
    x = features.vectors[words, layer]  # (N, k, d): a pair task's probe reads both words
    train, test, name = ex.train, ~ex.train, TASK_NAMES[task]
    removal = inlp(x[train], ex.labels[train], x[test], ex.labels[test], len(ex.classes), seed=seed,
                   max_iterations=max_iterations, max_rank=max(1, int(RANK_SHARE * x.shape[-1])), on_round=lambda rank, accuracy: report(
                       0.2 + 0.25 * min(1.0, rank / x.shape[-1]),
                       f"removing {name} (INLP): {rank} directions, a fresh probe reads {accuracy:.0%}"))
    rng = np.random.Generator(np.random.PCG64(seed))
    randoms = [random_basis(x.shape[-1], removal.rank, rng) for _ in range(draws)]
    report(0.45, f"a fresh probe after {draws} random projections of rank {removal.rank}")
    probe_random = float(np.mean([fresh_accuracy(x[train], ex.labels[train], x[test], ex.labels[test], r, seed)
                                  for r in randoms]))
    bases = [np.zeros((x.shape[-1], 0)), removal.basis, *randoms]
    notes = [corpus.note] if corpus.note else []
    notes += _removal_notes(task, layer, removal, x.shape[-1], max_iterations)
    masked, losses, accuracies = 0, np.full(len(bases), np.nan), np.full(len(bases), np.nan)
    agreed, counts = None, None
    if not model.has_mlm:
        notes.append("this model has no masked-language-model head, so what the removal does to its masked-word "
                     "guesses cannot be measured")
    else:
        masked, losses, accuracies = _masked_lm(model, tokenizer, corpus, layer, bases, seed, report,
                                                (0.5, 0.3 if task == "number" else 0.5))
        if task == "number":
            try:
                agreed, counts = _agreement(model, tokenizer, layer, bases, agreement_pairs, seed, report, (0.8, 0.2))
            except InputError as e:  # a vocabulary without one-token was/were, is/are: the rest stands
                notes.append(str(e))
    report(1.0, "done")
    return Amnesic(task, int(layer), removal.rank, removal.iterations, removal.majority, removal.before,
                   removal.after, probe_random, masked, float(losses[0]), float(losses[1]), losses[2:].copy(),
                   float(accuracies[0]), float(accuracies[1]), accuracies[2:].copy(),
                   None if agreed is None else agreed[0], None if agreed is None else agreed[1],
                   None if agreed is None else _mean(agreed[2:]), counts, draws, seed, "; ".join(notes))
