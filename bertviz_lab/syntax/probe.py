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
from bertviz_lab.syntax.probe_fit import (MIN_FOR_DEV, PROBE_THREADS, STEPS, Fit, Sentence, chain_loss, depth_loss,
                                         distance_loss, gold, mean_depth_loss, stacked, threads, train_probe,
                                         whitening)

SPEARMAN_LENGTHS = range(5, 51)  # the sentence lengths DSpr averages over, as in the paper


@dataclass(frozen=True)
class LayerScore:
    layer: int  # 0 = the embeddings' output, then 1..L
    uuas: float  # share of gold edges (non-punctuation) the predicted spanning tree finds
    spearman: float  # DSpr: predicted against gold distances, 5..50-word sentences
    root_accuracy: float  # share of sentences whose shallowest predicted word is the gold root
    distance_fit: Fit  # how the distance probe's training went (its dev loss)
    depth_fit: Fit

    def problem(self) -> str:
        """Why this layer's probes cannot be taken as fitted ("" when they can): the distance probe's reason first."""
        distance, depth = self.distance_fit.problem(), self.depth_fit.problem()
        if distance == depth:
            return distance and f"for both probes, {distance}"
        return "; ".join(f"for the {name} probe, {why}" for name, why in (("distance", distance), ("depth", depth))
                         if why)


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

    def unfitted(self) -> dict[int, str]:
        """layer -> why its probes cannot be taken as fitted, for every such layer."""
        return {s.layer: s.problem() for s in self.layers if s.problem()}


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
    `progress(done, total, message)` as each layer starts and once all are done (a layer of a wide model takes
    seconds: each start is said). Seeded, on PROBE_THREADS threads: the same sentences give
    the same report, bit for bit, whatever the caller's thread count."""
    layers, d = check_sentences(train, "training", None)
    check_sentences(test, "test", (layers, d))
    if rank < 1 or steps < 1:
        raise InputError(f"the probe needs a rank and a number of steps of at least 1 (got {rank} and {steps})")
    with threads(PROBE_THREADS):
        return _probe_layers(train, test, layers, min(rank, d), seed, steps, progress)


def _probe_layers(train: list[Sentence], test: list[Sentence], layers: int, rank: int, seed: int, steps: int,
                  progress: Callable[[int, int, str], None] | None) -> ProbeReport:
    order = np.random.default_rng(seed).permutation(len(train))
    n_dev = len(train) // 10 if len(train) >= MIN_FOR_DEV else 0
    fit, dev = [train[i] for i in order[n_dev:]], [train[i] for i in order[:n_dev]]
    test_trees = [t for _, t in test]
    fit_gold, dev_gold = gold([t for _, t in fit]), gold([t for _, t in dev]) if dev else None
    chain = chain_loss(dev_gold) if dev else float("nan")  # the baselines' dev losses: they read no vector
    flat = mean_depth_loss(dev_gold, float(fit_gold.depths[fit_gold.mask].mean())) if dev else float("nan")
    scores, distance_probes, depth_probes = [], [], []
    for layer in range(layers):
        if progress is not None:
            last = f"; layer {layer - 1}'s UUAS {scores[-1].uuas:.2f}" if scores else ""
            progress(layer, layers, f"layer {layer} ({layer} of {layers} layers done{last})")
        vectors = stacked(fit, layer)
        whiten = whitening(vectors)
        fit_batch = replace(fit_gold, vectors=(vectors @ whiten).float())
        dev_batch = replace(dev_gold, vectors=(stacked(dev, layer) @ whiten).float()) if dev else None
        generator = torch.Generator().manual_seed(seed * 1000 + layer)
        distance, distance_fit = train_probe(distance_loss, fit_batch, dev_batch, rank, steps, generator, chain)
        depth, depth_fit = train_probe(depth_loss, fit_batch, dev_batch, rank, steps, generator, flat)
        distance, depth = (whiten @ distance).numpy(), (whiten @ depth).numpy()
        distances = [predicted_distances(v[layer], distance) for v, _ in test]
        depths = [predicted_depths(v[layer], depth) for v, _ in test]
        scores.append(LayerScore(layer, uuas(distances, test_trees), distance_spearman(distances, test_trees),
                                 root_accuracy(depths, test_trees), distance_fit, depth_fit))
        distance_probes.append(distance)
        depth_probes.append(depth)
    if progress is not None:
        progress(layers, layers, f"{layers} of {layers} layers done (best UUAS {max(s.uuas for s in scores):.2f})")
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
