"""How a structural probe is trained (syntax/probe.py scores it), and whether it fitted, read from its own dev loss.

Full-batch Adam on whitened inputs (`whitening`): on the shipped model's story-world sentences the test UUAS levels
off within 50-100 steps (unwhitened it still climbs after 800). Every CHECK_EVERY steps the loss on a dev split (a
tenth of the training sentences) is measured, and the probe kept is the one with the lowest; the last step when the
training set is too small to spare one (fewer than MIN_FOR_DEV sentences).

A probe has not fitted (`Fit.problem` says how) when its kept dev loss is no lower than a prediction that reads no
vector (distances: words i and j |i - j| edges apart, the linear chain; depths: every word at the training words'
mean depth), or when it overfits: kept in the first half of its steps, its dev loss then rose more than OVERFIT
above it while the training loss fell (it learns the training sentences, not a map that carries over). On the
shipped model both happen with 100 story-world sentences and neither with 300 or more (figures in docs/benchmarks.md,
"Syntax"). Too few sentences for a dev split: whether it fitted is not known, and that is said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.corpus.tree import Tree

STEPS, LEARNING_RATE, CHECK_EVERY, MIN_FOR_DEV = 100, 0.01, 10, 10
SHRINK = 0.1  # whitening adds this times the mean variance to every direction's: a rare direction is not blown up
# The probes train on one torch thread whatever the caller's count: a float32 sum split over two threads adds in
# another order, and 100 Adam steps carry that last bit into other trees (the shipped model's UUAS and root
# accuracy moved by up to 0.01 between 1 and 2 threads, its word vectors not at all). One thread makes a rerun
# bit for bit the same on the same machine, the page's (whose thread count follows the class) and the CLI's.
PROBE_THREADS = 1
OVERFIT = 0.15  # a dev loss that ends this share above its lowest (kept in the first half) has overfitted

Sentence = tuple[np.ndarray, Tree]  # (L+1, W, d) word vectors at every layer, and the sentence's gold tree
Loss = Callable[["Padded", torch.Tensor], torch.Tensor]


@contextmanager
def threads(count: int) -> Iterator[None]:
    """`count` torch threads for this thread while the block runs (OpenMP's count is per thread), then as before."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


def chain_loss(batch: Padded) -> float:
    """`distance_loss` of the linear chain: words i and j predicted |i - j| edges apart, no vector read."""
    at = torch.arange(batch.mask.shape[1], dtype=torch.float32)
    predicted = (at[:, None] - at[None, :]).abs()  # (T, T)
    pairs = batch.mask[:, :, None] & batch.mask[:, None, :]
    error = torch.where(pairs, (predicted - batch.distances).abs(), 0.0).sum((1, 2))
    return float((error / batch.lengths**2).mean())


def mean_depth_loss(batch: Padded, depth: float) -> float:
    """`depth_loss` of predicting every word at one `depth` (the training words' mean), no vector read."""
    error = torch.where(batch.mask, (depth - batch.depths).abs(), 0.0).sum(1)
    return float((error / batch.lengths).mean())


@dataclass(frozen=True)
class Fit:
    """How one probe's training went, read from its dev loss at every CHECK_EVERY-th step."""

    losses: tuple[float, ...]  # the dev loss at step 0 (the start), then at each check; () without a dev split
    kept: int  # the step of the probe kept (the lowest dev loss; the last step without a dev split)
    steps: int
    baseline: float  # the dev loss of the prediction that reads no vector (`chain_loss`, `mean_depth_loss`)

    @property
    def best(self) -> float:
        return min(self.losses[1:]) if self.losses else float("nan")  # the kept probe's: step 0 is never kept

    @property
    def overfits(self) -> bool:
        """Whether the dev loss, lowest in the first half of the steps, ended more than OVERFIT above that."""
        return bool(self.losses) and self.kept <= self.steps // 2 and self.losses[-1] > (1 + OVERFIT) * self.best

    def problem(self) -> str:
        """Why the probe cannot be taken as fitted, in words ("" when it can)."""
        if not self.losses:
            return "too few training sentences to spare a dev split, so whether it fitted is not known"
        if self.best >= self.baseline:
            return (f"its dev loss ({self.best:.3f}) is no lower than a prediction that reads no vector "
                    f"({self.baseline:.3f})")
        if self.overfits:
            return (f"its dev loss rose from {self.best:.3f} at step {self.kept} to {self.losses[-1]:.3f} at step "
                    f"{self.steps}: it learns the training sentences, not a map that carries over to others")
        return ""


def train_probe(loss: Loss, train: Padded, dev: Padded | None, rank: int, steps: int, generator: torch.Generator,
                baseline: float = float("nan")) -> tuple[torch.Tensor, Fit]:
    """A (d, rank) probe trained full batch with Adam from uniform(-0.05, 0.05) (the paper's start), and its Fit;
    the one kept is the lowest dev loss among every CHECK_EVERY-th step (the last step without a dev split)."""
    d = train.vectors.shape[-1]
    probe = (torch.rand(d, rank, generator=generator) * 0.1 - 0.05).requires_grad_()
    optimizer = torch.optim.Adam([probe], lr=LEARNING_RATE)
    losses, kept_at, kept = [], steps, probe.detach().clone()
    with torch.no_grad():
        losses += [float(loss(dev, probe))] if dev is not None else []
    with torch.enable_grad():
        for step in range(1, steps + 1):
            optimizer.zero_grad()
            loss(train, probe).backward()
            optimizer.step()
            if dev is not None and (step % CHECK_EVERY == 0 or step == steps):
                with torch.no_grad():
                    losses.append(float(loss(dev, probe)))
                if len(losses) == 2 or losses[-1] < min(losses[1:-1]):
                    kept_at, kept = step, probe.detach().clone()
    probe = kept if dev is not None else probe.detach()
    return probe.double(), Fit(tuple(losses), kept_at, steps, baseline)
