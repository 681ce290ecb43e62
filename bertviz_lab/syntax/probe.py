"""A structural probe (Hewitt & Manning 2019): is a sentence's parse tree written into its word vectors as distances?

The distance probe learns one matrix B (d, k) so that the squared distance ||(h_i - h_j) B||^2 between two words'
vectors matches the number of edges between them in the gold tree; the depth probe learns another so that ||h_i B||^2
matches word i's depth. Both are trained per layer (0 = the embeddings' output, then 1..L) with the paper's L1 losses,
full batch with Adam on whitened vectors (so a hundred steps suffice), keeping the step with the lowest loss on a dev
split carved from the training sentences, and scored on held-out sentences the way their code (reporter.py) does:
- UUAS: the minimum spanning tree of the predicted distances over the non-punctuation words, against the gold tree's
  edges between non-punctuation words; summed over the corpus.
- DSpr: for each word, the Spearman correlation between its row of predicted and gold distances (every word,
  punctuation too, as their code does); averaged per sentence length for lengths 5..50, then over the lengths.
- root accuracy: how often the shallowest non-punctuation word by the depth probe is the gold root.
The LINEAR baseline links each non-punctuation word to the next one. Nothing here needs scipy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError

# Full-batch Adam on whitened inputs (`whitening`): on the shipped model's story-world sentences the test UUAS
# levels off within 50-100 steps (unwhitened it still climbs after 800). Every CHECK_EVERY steps the loss on a dev
# split (a tenth of the training sentences) is measured, and the probe kept is the one with the lowest; the last step
# when the training set is too small to spare one (fewer than MIN_FOR_DEV sentences).
STEPS, LEARNING_RATE, CHECK_EVERY, MIN_FOR_DEV = 100, 0.01, 10, 10
SHRINK = 0.1  # whitening adds this times the mean variance to every direction's: a rare direction is not blown up
SPEARMAN_LENGTHS = range(5, 51)  # the sentence lengths DSpr averages over, as in the paper

Sentence = tuple[np.ndarray, Tree]  # (L+1, W, d) word vectors at every layer, and the sentence's gold tree


@dataclass(frozen=True)
class LayerScore:
    layer: int  # 0 = the embeddings' output, then 1..L
    uuas: float  # share of gold edges (non-punctuation) the predicted spanning tree finds
    spearman: float  # DSpr: predicted against gold distances, 5..50-word sentences
    root_accuracy: float  # share of sentences whose shallowest predicted word is the gold root


@dataclass(frozen=True)
class ProbeReport:
    layers: list[LayerScore]
    linear_uuas: float  # the baseline linking each non-punctuation word to the next, on the test split
    distance_probes: list[np.ndarray]  # per layer, (d, k): predicted squared distance ||(h_i - h_j) B||^2
    depth_probes: list[np.ndarray]  # per layer, (d, k): predicted depth ||h_i B||^2
    train_sentences: int  # all training sentences, the dev split included
    dev_sentences: int  # carved from the training sentences to pick the step kept (0: the last step)
    test_sentences: int
    rank: int  # k
    steps: int


@dataclass(frozen=True)
class PredictedTree:
    distances: np.ndarray  # (W, W) predicted squared distances
    edges: set[frozenset[int]]  # the minimum spanning tree over the non-punctuation words
    depths: np.ndarray  # (W,) predicted depths
    root: int  # the shallowest non-punctuation word


def mst_edges(distances: np.ndarray) -> set[frozenset[int]]:
    """The minimum spanning tree of the complete graph whose (W, W) symmetric edge weights are `distances`, by Prim's
    algorithm in O(W^2): grown from word 0, each time adding the nearest word outside the tree (the lowest index on a
    tie), linked to the tree word it is nearest to (the earliest added on a tie)."""
    weights = np.asarray(distances, dtype=np.float64)
    n = len(weights)
    if n < 2:
        return set()
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    nearest, link = weights[0].copy(), np.zeros(n, dtype=np.int64)  # distance to the tree, and to which word
    edges = set()
    for _ in range(n - 1):
        new = int(np.argmin(np.where(in_tree, np.inf, nearest)))
        edges.add(frozenset((int(link[new]), new)))
        in_tree[new] = True
        closer = weights[new] < nearest
        nearest[closer], link[closer] = weights[new][closer], new
    return edges


def predicted_edges(predicted: np.ndarray, tree: Tree) -> set[frozenset[int]]:
    """The minimum spanning tree of the (W, W) `predicted` distances between the non-punctuation words (word indices
    of the whole sentence)."""
    words = np.flatnonzero(~tree.punct)
    return {frozenset(int(words[i]) for i in edge) for edge in mst_edges(predicted[np.ix_(words, words)])}


def uuas_counts(predicted: np.ndarray, tree: Tree) -> tuple[int, int]:
    """(gold edges found, gold edges) between the sentence's non-punctuation words, the predicted tree being the
    spanning tree of the (W, W) `predicted` distances over those words; (0, 0) with fewer than two of them."""
    if (~tree.punct).sum() < 2:
        return 0, 0
    gold = tree.edges(skip_punct=True)
    return len(predicted_edges(predicted, tree) & gold), len(gold)


def uuas(predicted: list[np.ndarray], trees: list[Tree]) -> float:
    """Corpus UUAS: gold edges found over gold edges, summed over the sentences (0.0 when there are none)."""
    hits = total = 0
    for distances, tree in zip(predicted, trees):
        found, gold = uuas_counts(distances, tree)
        hits, total = hits + found, total + gold
    return hits / total if total else 0.0


def linear_uuas(trees: list[Tree]) -> float:
    """The LINEAR baseline: each non-punctuation word linked to the next one."""
    return uuas([np.abs(np.subtract.outer(np.arange(len(t)), np.arange(len(t)))).astype(float) for t in trees], trees)


def average_ranks(rows: np.ndarray) -> np.ndarray:
    """(R, n) -> (R, n) each value's 0-based rank within its row, tied values sharing their mean rank."""
    less = (rows[:, None, :] < rows[:, :, None]).sum(-1)
    equal = (rows[:, None, :] == rows[:, :, None]).sum(-1)
    return less + (equal - 1) / 2


def spearman(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """(R, n), (R, n) -> (R,) Spearman's rho of each row pair: the Pearson correlation of their average ranks
    (0.0 where a row is constant, having no order to agree with)."""
    a, b = (average_ranks(np.asarray(x, dtype=np.float64)) for x in (predicted, gold))
    a, b = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
    spread = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    rho, varied = np.zeros(len(a)), spread > 0
    rho[varied] = (a * b).sum(1)[varied] / spread[varied]
    return rho


def distance_spearman(predicted: list[np.ndarray], trees: list[Tree]) -> float:
    """DSpr: every word's row of predicted distances against its gold row, averaged per sentence length, then the
    mean over lengths 5..50 (over every length when no sentence has 5..50 words; 0.0 with no sentence)."""
    by_length = defaultdict(list)
    for distances, tree in zip(predicted, trees):
        by_length[len(tree)].extend(spearman(distances, tree.distances()))
    lengths = [n for n in by_length if n in SPEARMAN_LENGTHS] or list(by_length)
    return float(np.mean([np.mean(by_length[n]) for n in lengths])) if lengths else 0.0


def shallowest(depths: np.ndarray, tree: Tree) -> int:
    """The non-punctuation word with the smallest predicted depth (the lowest index on a tie; -1 if none)."""
    words = np.flatnonzero(~tree.punct)
    return int(words[np.argmin(depths[words])]) if len(words) else -1


def root_accuracy(predicted_depths: list[np.ndarray], trees: list[Tree]) -> float:
    """Share of sentences whose shallowest non-punctuation word by the predicted depths is the gold root."""
    if not trees:
        return 0.0
    return float(np.mean([shallowest(d, t) == t.root for d, t in zip(predicted_depths, trees)]))


def predicted_distances(vectors: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """(W, d) word vectors, (d, k) distance probe -> (W, W) squared distances ||(h_i - h_j) B||^2."""
    projected = np.asarray(vectors, dtype=np.float64) @ probe  # (W, k)
    differences = projected[:, None, :] - projected[None, :, :]  # (W, W, k)
    return (differences**2).sum(-1)


def predicted_depths(vectors: np.ndarray, probe: np.ndarray) -> np.ndarray:
    """(W, d) word vectors, (d, k) depth probe -> (W,) squared norms ||h_i B||^2."""
    projected = np.asarray(vectors, dtype=np.float64) @ probe
    return (projected**2).sum(-1)


def whitening(vectors: torch.Tensor) -> torch.Tensor:
    """(n, d) word vectors -> (d, d) symmetric matrix whose product with them has (near) identity second moments.

    Training runs on the whitened vectors, where Adam's one step size suits every direction; a probe B trained
    there is the probe (whitening @ B) of the raw vectors, the same family of functions. The moments are not
    centered: the depth probe ||h B||^2 has no bias, as in the paper. (In torch: numpy's eigh is 100 times slower
    on a busy 2-core machine.)"""
    values, directions = torch.linalg.eigh(vectors.T @ vectors / len(vectors))
    values = values.clamp_min(0.0)
    values = values + max(SHRINK * float(values.mean()), 1e-12)
    return (directions / values.sqrt()) @ directions.T


def stacked(sentences: list[Sentence], layer: int) -> torch.Tensor:
    """(n, d) float64: one layer's word vectors of every sentence, one sentence after another."""
    return torch.from_numpy(np.concatenate([v[layer] for v, _ in sentences]).astype(np.float64))


@dataclass(frozen=True)
class Padded:
    """Sentences' word vectors at one layer, one after another, and their gold labels padded to the longest."""

    vectors: torch.Tensor  # (n, d) float32, n = the words of all sentences
    mask: torch.Tensor  # (N, T) bool: a word, not padding; True n times, in the vectors' order
    lengths: torch.Tensor  # (N,) float
    distances: torch.Tensor  # (N, T, T) gold tree distances, 0 past a sentence's end
    depths: torch.Tensor  # (N, T) gold depths, 0 past a sentence's end

    def project(self, probe: torch.Tensor) -> torch.Tensor:
        """(d, k) probe -> (N, T, k) each word's projection, zeros past a sentence's end (the matrix product only
        on real words: padding is almost half the rows of the story world's sentences)."""
        projected = self.vectors @ probe  # (n, k)
        padded = projected.new_zeros((*self.mask.shape, probe.shape[1]))
        padded[self.mask] = projected
        return padded


def gold(trees: list[Tree]) -> Padded:
    """The trees' distances and depths padded as float32 tensors, no vectors yet (they change with the layer)."""
    n, longest = len(trees), max(len(t) for t in trees)
    mask = np.zeros((n, longest), bool)
    distances, depths = np.zeros((n, longest, longest), np.float32), np.zeros((n, longest), np.float32)
    for i, t in enumerate(trees):
        w = len(t)
        mask[i, :w] = True
        distances[i, :w, :w], depths[i, :w] = t.distances(), t.depths()
    lengths = torch.tensor([len(t) for t in trees], dtype=torch.float32)
    return Padded(torch.empty(0, 0), torch.from_numpy(mask), lengths, torch.from_numpy(distances),
                  torch.from_numpy(depths))


def distance_loss(batch: Padded, probe: torch.Tensor) -> torch.Tensor:
    """Hewitt & Manning's L1 distance loss: per sentence sum_ij |gold - predicted| / W^2, averaged over sentences."""
    projected = batch.project(probe)  # (N, T, k)
    norms = (projected**2).sum(-1)  # (N, T)
    predicted = norms[:, :, None] + norms[:, None, :] - 2 * projected @ projected.transpose(1, 2)  # (N, T, T)
    pairs = batch.mask[:, :, None] & batch.mask[:, None, :]
    error = torch.where(pairs, (predicted - batch.distances).abs(), 0.0).sum((1, 2))
    return (error / batch.lengths**2).mean()


def depth_loss(batch: Padded, probe: torch.Tensor) -> torch.Tensor:
    """Hewitt & Manning's L1 depth loss: per sentence sum_i |gold - predicted| / W, averaged over sentences."""
    predicted = (batch.project(probe) ** 2).sum(-1)  # (N, T)
    error = torch.where(batch.mask, (predicted - batch.depths).abs(), 0.0).sum(1)
    return (error / batch.lengths).mean()


def train_probe(loss: Callable[[Padded, torch.Tensor], torch.Tensor], train: Padded, dev: Padded | None, rank: int,
                steps: int, generator: torch.Generator) -> torch.Tensor:
    """A (d, rank) probe trained full batch with Adam from uniform(-0.05, 0.05) (the paper's start); the one kept is
    the lowest dev loss among every CHECK_EVERY-th step (the last step without a dev split)."""
    d = train.vectors.shape[-1]
    probe = (torch.rand(d, rank, generator=generator) * 0.1 - 0.05).requires_grad_()
    optimizer = torch.optim.Adam([probe], lr=LEARNING_RATE)
    best, kept = float("inf"), probe.detach().clone()
    with torch.enable_grad():
        for step in range(1, steps + 1):
            optimizer.zero_grad()
            loss(train, probe).backward()
            optimizer.step()
            if dev is not None and (step % CHECK_EVERY == 0 or step == steps):
                with torch.no_grad():
                    score = float(loss(dev, probe))
                if score < best:
                    best, kept = score, probe.detach().clone()
    return (kept if dev is not None else probe.detach()).double()


def check_sentences(sentences: list[Sentence], split: str, shape: tuple[int, int] | None) -> tuple[int, int]:
    """The (L+1, d) every sentence's vectors share, or an InputError naming the first that does not fit."""
    if not sentences:
        raise InputError(f"the {split} set is empty: the probe needs sentences with their trees")
    for i, (vectors, tree) in enumerate(sentences):
        if not isinstance(tree, Tree):
            raise InputError(f"{split} sentence {i + 1} has no Tree beside its vectors")
        if np.ndim(vectors) != 3 or np.shape(vectors)[1] != len(tree):
            raise InputError(f"{split} sentence {i + 1} has vectors of shape {np.shape(vectors)}, not (layers, "
                             f"{len(tree)} words, hidden size) for {tree.text!r}")
        here = (np.shape(vectors)[0], np.shape(vectors)[2])
        if shape is not None and here != shape:
            raise InputError(f"{split} sentence {i + 1} has vectors for {here[0]} layers of size {here[1]}, the "
                             f"first training sentence for {shape[0]} of size {shape[1]}")
        if not np.isfinite(vectors).all():
            raise InputError(f"{split} sentence {i + 1} has vectors that are not finite numbers")
        shape = here
    return shape


def probe_layers(train: list[Sentence], test: list[Sentence], rank: int = 64, seed: int = 0, steps: int = STEPS,
                 progress: Callable[[int, int, str], None] | None = None) -> ProbeReport:
    """Distance and depth probes of rank min(rank, d) trained on `train` at every layer and scored on `test`;
    `progress(done, total, message)` after each layer. Seeded: the same sentences give the same report."""
    layers, d = check_sentences(train, "training", None)
    check_sentences(test, "test", (layers, d))
    if rank < 1 or steps < 1:
        raise InputError(f"the probe needs a rank and a number of steps of at least 1 (got {rank} and {steps})")
    rank = min(rank, d)
    order = np.random.default_rng(seed).permutation(len(train))
    n_dev = len(train) // 10 if len(train) >= MIN_FOR_DEV else 0
    fit, dev = [train[i] for i in order[n_dev:]], [train[i] for i in order[:n_dev]]
    test_trees = [t for _, t in test]
    fit_gold, dev_gold = gold([t for _, t in fit]), gold([t for _, t in dev]) if dev else None
    scores, distance_probes, depth_probes = [], [], []
    for layer in range(layers):
        vectors = stacked(fit, layer)
        whiten = whitening(vectors)
        fit_batch = replace(fit_gold, vectors=(vectors @ whiten).float())
        dev_batch = replace(dev_gold, vectors=(stacked(dev, layer) @ whiten).float()) if dev else None
        generator = torch.Generator().manual_seed(seed * 1000 + layer)
        distance = (whiten @ train_probe(distance_loss, fit_batch, dev_batch, rank, steps, generator)).numpy()
        depth = (whiten @ train_probe(depth_loss, fit_batch, dev_batch, rank, steps, generator)).numpy()
        distances = [predicted_distances(v[layer], distance) for v, _ in test]
        depths = [predicted_depths(v[layer], depth) for v, _ in test]
        scores.append(LayerScore(layer, uuas(distances, test_trees), distance_spearman(distances, test_trees),
                                 root_accuracy(depths, test_trees)))
        distance_probes.append(distance)
        depth_probes.append(depth)
        if progress is not None:
            progress(layer + 1, layers, f"layer {layer}: UUAS {scores[-1].uuas:.2f}")
    return ProbeReport(scores, linear_uuas(test_trees), distance_probes, depth_probes, len(train), n_dev, len(test),
                       rank, steps)


def predict(report: ProbeReport, layer: int, vectors: np.ndarray, tree: Tree) -> PredictedTree:
    """The tree one layer's probes read from one sentence's (W, d) word vectors, to draw against the gold tree."""
    if not 0 <= layer < len(report.layers):
        raise InputError(f"there is no layer {layer}: the probes cover layers 0 to {len(report.layers) - 1}")
    d = report.distance_probes[layer].shape[0]
    if np.shape(vectors) != (len(tree), d):
        raise InputError(f"the vectors have shape {np.shape(vectors)}, not ({len(tree)} words, {d}) for "
                         f"{tree.text!r}")
    distances = predicted_distances(vectors, report.distance_probes[layer])
    depths = predicted_depths(vectors, report.depth_probes[layer])
    return PredictedTree(distances, predicted_edges(distances, tree), depths, shallowest(depths, tree))
