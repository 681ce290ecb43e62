"""Iterative nullspace projection (Ravfogel et al. 2020, "Null It Out"): remove what a linear probe reads.

Each round fits a linear probe (scikit-learn's LogisticRegression, softmax over the classes, on standardised copies of
the vectors so one regularisation suits every dimension) to the vectors as they stand, and adds the span of its weight
rows, written in the RAW coordinates the model uses (a standardised probe's row w / std reads the raw vector), to an
orthonormal basis Q (d, r). Projecting a vector h to h - (h @ Q) Q^T then leaves every probe fitted so far reading the
same logits for every vector: their property is gone from what a linear probe can see along those directions. The
rounds go on while a fresh probe, fitted to the projected training vectors, still reads the held-out vectors more
than TOLERANCE above the majority rate (always guessing the commonest training label), for at most `max_iterations`
rounds, until nothing is left of the space, or until `max_rank` directions are gone (amnesic.py stops at half the
width: past that, any projection, random or not, leaves the model too little to compare with; the record then says
how much a fresh probe still reads).

A pair task's probe reads two words at once (`train_x` of shape (n, 2, d): a dependent and its head): its weight rows
for both words join the basis, and the projection is applied to every word vector, as a hook on the model would.

`random_basis` is the control Elazar et al. 2021 compare with: a random orthonormal basis of the same rank.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from bertviz_lab.errors import InputError
from bertviz_lab.syntax.probe_fit import PROBE_THREADS

MAX_ITERATIONS = 30
TOLERANCE = 0.015  # stop once a fresh probe's held-out accuracy is within 1.5 points of the majority rate
RANK_TOLERANCE = 1e-3  # a round's direction whose singular value is below this share of its largest adds nothing
STEPS = 300  # L-BFGS iterations per probe
REGULARISATION = 1.0  # scikit-learn's C (inverse L2 strength) on the standardised vectors
NOISE = 1e-6  # a coordinate whose spread is below this share of the largest before projection is empty


@dataclass(frozen=True)
class Removal:
    """What INLP removed from one set of vectors, and how a fresh linear probe reads them before and after."""

    basis: np.ndarray  # (d, r) float64, orthonormal columns: the directions removed
    iterations: int  # rounds that added directions
    before: float  # a linear probe's held-out accuracy on the vectors as given
    after: float  # a fresh probe's, fitted and tested on the projected vectors
    majority: float  # held-out accuracy of always guessing the commonest training label
    accuracies: tuple[float, ...] = ()  # a fresh probe's held-out accuracy before each round, and after the last

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])


def project(x: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """(..., d) vectors without their components along the orthonormal columns of `basis` (d, r)."""
    x = np.asarray(x, dtype=np.float64)
    if basis.shape[1] == x.shape[-1]:
        return np.zeros_like(x)  # the whole space: exactly nothing left, not rounding noise a probe could read
    return x - (x @ basis) @ basis.T if basis.shape[1] else x


def _words(x) -> np.ndarray:
    """(n, d) or (n, k, d) -> (n, k, d) float64: each example's k word vectors."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        x = x[:, None, :]
    if x.ndim != 3 or not len(x):
        raise InputError(f"give the vectors as (examples, width) or (examples, words, width); got shape {x.shape}")
    return x


def _floor(x: np.ndarray) -> float:
    """A coordinate's spread below this, for vectors like `x` before any projection, is rounding noise."""
    return NOISE * max(float(x.reshape(len(x), -1).std(0).max()), 1e-300)


def _fit(train_x: np.ndarray, train_y: np.ndarray, floor: float,
         seed: int) -> tuple[LogisticRegression, np.ndarray, np.ndarray]:
    """A softmax probe on (n, k, d) vectors, standardised: (probe, mean (k d,), 1 / std (k d,), 0 for a coordinate
    the projection emptied: standardising its rounding noise would hand the probe a signal that is not there)."""
    flat = train_x.reshape(len(train_x), -1)
    mean, std = flat.mean(0), flat.std(0)
    scale = np.where(std > floor, 1.0 / np.maximum(std, floor), 0.0)
    probe = LogisticRegression(C=REGULARISATION, max_iter=STEPS, random_state=seed)
    with warnings.catch_warnings(), threadpool_limits(PROBE_THREADS, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)  # a probe short of convergence still reads the vectors
        probe.fit((flat - mean) * scale, train_y)
    return probe, mean, scale


def _accuracy(probe: LogisticRegression, mean, scale, x: np.ndarray, y: np.ndarray) -> float:
    with threadpool_limits(PROBE_THREADS, user_api="blas"):
        return float(np.mean(probe.predict((x.reshape(len(x), -1) - mean) * scale) == y))


def fresh_accuracy(train_x, train_y, test_x, test_y, basis: np.ndarray | None = None, seed: int = 0) -> float:
    """Held-out accuracy of a linear probe fitted to the training vectors, both projected off `basis` (d, r)."""
    train, test = _words(train_x), _words(test_x)
    floor = _floor(train)
    if basis is not None:
        train, test = project(train, basis), project(test, basis)
    probe, mean, scale = _fit(train, np.asarray(train_y), floor, seed)
    return _accuracy(probe, mean, scale, test, np.asarray(test_y))


def _grown(basis: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`basis` (d, r) with the span of `rows` (m, d) added: orthonormal (d, r + new), new <= m."""
    rows = project(rows, basis)
    _, values, vt = np.linalg.svd(rows, full_matrices=False)
    if not len(values) or values[0] <= 0:
        return basis
    new = vt[values > RANK_TOLERANCE * values[0]].T  # (d, new)
    new = new - basis @ (basis.T @ new)  # once more against the basis: rounding would let the columns drift
    new, _ = np.linalg.qr(new)
    return np.concatenate([basis, new], axis=1)


def majority_rate(train_y, test_y) -> float:
    """Held-out accuracy of always guessing the commonest training label."""
    return float(np.mean(np.asarray(test_y) == np.bincount(np.asarray(train_y)).argmax()))


def inlp(train_x, train_y, test_x, test_y, classes: int, *, max_iterations: int = MAX_ITERATIONS,
         tolerance: float = TOLERANCE, max_rank: int | None = None, seed: int = 0,
         on_round: Callable[[int, float], None] | None = None) -> Removal:
    """Remove the linear information about the labels from (n, d) or (n, k, d) vectors (module note);
    `on_round(directions removed, a fresh probe's held-out accuracy)` after each probe is fitted."""
    train, test = _words(train_x), _words(test_x)
    train_y, test_y = np.asarray(train_y, dtype=np.int64), np.asarray(test_y, dtype=np.int64)
    if train.shape[1:] != test.shape[1:] or len(train_y) != len(train) or len(test_y) != len(test):
        raise InputError("the training and test vectors and labels must match in shape")
    if train_y.min() < 0 or max(train_y.max(), test_y.max()) >= classes or len(np.unique(train_y)) < 2:
        raise InputError(f"the labels must be 0 to {classes - 1}, with at least two of them among the training labels")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 0:
        raise InputError(f"max_iterations must be a whole number from 0; got {max_iterations!r}")
    d = train.shape[-1]
    if max_rank is not None and (isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 1):
        raise InputError(f"max_rank must be a whole number from 1; got {max_rank!r}")
    cap = d if max_rank is None else min(d, max_rank)
    majority = majority_rate(train_y, test_y)
    basis, accuracies, iterations, floor = np.zeros((d, 0)), [], 0, _floor(train)
    while True:
        probe, mean, scale = _fit(project(train, basis), train_y, floor, seed)
        accuracies.append(_accuracy(probe, mean, scale, project(test, basis), test_y))
        if on_round is not None:
            on_round(basis.shape[1], accuracies[-1])
        if accuracies[-1] <= majority + tolerance or iterations == max_iterations or basis.shape[1] >= cap:
            break
        rows = (probe.coef_ * scale).reshape(len(probe.coef_), -1, d).reshape(-1, d)  # (classes' rows * k, d), raw
        grown = _grown(basis, rows)[:, :cap]  # the rows' strongest directions first (SVD order)
        if grown.shape[1] == basis.shape[1]:
            break  # the probe reads nothing new: another round would fit the same probe
        basis, iterations = grown, iterations + 1
    return Removal(basis, iterations, accuracies[0], accuracies[-1], majority, tuple(accuracies))


def random_basis(d: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """(d, rank) float64: an orthonormal basis of a uniformly random rank-dimensional subspace (the QR of a Gaussian
    matrix, each column's sign fixed by R's diagonal so the draw depends on `rng` alone)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= d:
        raise InputError(f"a random basis of {d}-wide vectors has rank 0 to {d}; got {rank!r}")
    q, r = np.linalg.qr(rng.standard_normal((d, rank)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)
