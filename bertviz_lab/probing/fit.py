"""The probes themselves, every hidden state and every labelling (the task's, its control's) fitted in one batched
optimisation, on PROBE_THREADS torch threads so a rerun is bit for bit the same.

- `fit_layers`: a linear probe (multinomial softmax regression with an L2 penalty) or an MLP probe (one hidden layer
  of MLP_HIDDEN ReLU units from a seeded start, an L2 penalty), test accuracy per labelling and hidden state (Hewitt &
  Liang 2019 compare the two on control tasks). Both by full-batch L-BFGS (as scikit-learn's MLPClassifier does for
  small sets): on the shipped model Adam needed 300 steps (9.6 s of CPU for part of speech) for the accuracies L-BFGS
  reaches in 100 (3.5 s), and an L-BFGS fit draws nothing, so it is deterministic.
- `scalar_mix`: Tenney et al. 2019's cumulative scalar mixes: mix k is a learned softmax over hidden states 0..k
  times a learned scale, read by a linear probe; all mixes trained together.
- `online_codelength`: Voita & Titov 2020's online code: the training examples in a seeded order, cut into blocks;
  the first block is sent with the uniform code, each next one with a linear probe trained on every example before it.

Every probe reads standardised vectors: each hidden state's dimensions centred and scaled by the training words' mean
and standard deviation, so one penalty suits every layer and every model. The optimiser sees them whitened (`Words`:
rotated onto the training words' principal axes, each scaled to unit variance), with the penalty carried over exactly
(a weight v on axis i is v / sqrt(variance_i) on the standardised vectors), so the probe is the standardised one and
L-BFGS reaches it in a third of the steps (a word vector's directions differ in variance by orders of magnitude).
A pair task (a dependent and its head, a pronoun and a candidate) reads both words: logits = z[first] W1 + z[second]
W2 + b, each word projected once before the examples gather them, so nothing of size (examples, states, 2d) is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import Mix
from bertviz_lab.syntax.probe_fit import PROBE_THREADS, threads

MLP_HIDDEN = 32  # units of the MLP probe's hidden layer (64 cost twice the time for the same accuracies)
PENALTY = 1e-3  # L2 on the weights beside the mean cross-entropy (scikit-learn's C = 1 / (PENALTY * examples))
ITERATIONS = 50  # L-BFGS iterations at most (strong Wolfe line search); within 0.01 of the optimum's accuracy
MLP_ITERATIONS = 50  # the MLP's budget: its loss is not convex, so it is trained for a fixed number of iterations
TOLERANCE = 1e-4  # L-BFGS stops sooner when every gradient entry is below this
SHRINK = 0.01  # added to every principal axis's variance before whitening, so a near-empty axis is not blown up
BLOCKS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)  # the online code's block ends, shares of the examples
FIRST_BLOCK = 10  # the first block holds at least this many examples
NOTHING_GAINED = 0.005  # cumulative mixes gaining no more than this beyond state 0: no expected layer

Progress = Callable[[float], None]  # the share of this fit done, 0..1


@dataclass(frozen=True)
class Batch:
    """Examples ready for a batched probe: the distinct words they read, and rows into them."""

    z: torch.Tensor  # (S, w, d) float32: the w distinct words at every hidden state
    first: torch.Tensor  # (n,) int64 rows of z
    second: torch.Tensor | None  # (n,) int64 rows of z, or None for a one-word task
    labels: torch.Tensor  # (n, R) int64
    direct: bool = False  # a one-word task whose examples are z's rows in order: no gather

    @property
    def parts(self) -> int:
        return 1 if self.second is None else 2


@dataclass(frozen=True)
class Words:
    """A task's words at every hidden state as the probes read them: standardised by the training words, rotated
    onto the training words' principal axes and scaled there to unit variance."""

    z: torch.Tensor  # (S, w, d) float32, standardised (the scalar mix reads these)
    white: torch.Tensor  # (S, w, d) float32
    variance: torch.Tensor  # (S, d, 1) each axis's variance (+ SHRINK): the penalty on a white weight is v^2 / variance
    axes: torch.Tensor  # (S, d, d) the principal axes (columns) of the standardised training words
    first: np.ndarray  # (N,) int64 rows of white
    second: np.ndarray | None  # (N,) int64 rows of white

    def batch(self, rows: np.ndarray, labels: np.ndarray, z: torch.Tensor | None = None) -> Batch:
        """The examples `rows` with their labels (R, N), reading `z` (default: the white words)."""
        z = self.white if z is None else z
        first, second = self.first[rows], None if self.second is None else self.second[rows]
        used, index = np.unique(first if second is None else np.concatenate([first, second]), return_inverse=True)
        n = len(rows)
        direct = second is None and len(used) == n and bool((index == np.arange(n)).all())
        index = torch.from_numpy(index.astype(np.int64))
        return Batch(z[:, torch.from_numpy(used)], index[:n], None if second is None else index[n:],
                     torch.from_numpy(np.ascontiguousarray(labels[:, rows].T)), direct)


def prepare(vectors: np.ndarray, first: np.ndarray, second: np.ndarray | None, train: np.ndarray) -> Words:
    """The Words of the examples (rows `first`, `second` of `vectors` (n_words, S, d)), fitted on the `train` ones."""
    rows = first if second is None else np.concatenate([first, second])
    words, index = np.unique(rows, return_inverse=True)
    z = torch.from_numpy(np.ascontiguousarray(np.asarray(vectors)[words].transpose(1, 0, 2), dtype=np.float32))
    fit = torch.from_numpy(np.unique(index[np.concatenate([train] * (1 if second is None else 2))]))
    mean = z[:, fit].mean(1, keepdim=True)
    std = z[:, fit].std(1, keepdim=True).clamp_min(1e-6) if len(fit) > 1 else torch.ones_like(mean)
    z = (z - mean) / std  # (S, w, d)
    x = z[:, fit]
    values, axes = torch.linalg.eigh(x.transpose(1, 2) @ x / max(1, len(fit) - 1))  # float32: a preconditioner
    variance = values.clamp_min(0.0)[:, :, None] + SHRINK
    n = len(first)
    return Words(z, (z @ axes) * variance.transpose(1, 2).rsqrt(), variance, axes, index[:n],
                 None if second is None else index[n:])


def _checked(vectors, first, second, labels, train) -> tuple[np.ndarray, ...]:
    first, second = np.asarray(first, dtype=np.int64), None if second is None else np.asarray(second, dtype=np.int64)
    labels, train = np.atleast_2d(np.asarray(labels, dtype=np.int64)), np.asarray(train, dtype=bool)
    if np.ndim(vectors) != 3:
        raise InputError(f"the word vectors must be (words, hidden states, width); they are {np.shape(vectors)}")
    if labels.shape[1] != len(first) or len(train) != len(first) or (second is not None and len(second) != len(first)):
        raise InputError("every example needs its word, its label and its split: the lengths differ")
    if train.all() or not train.any():
        raise InputError("a probe needs training and test examples; one of the splits is empty")
    return first, second, labels, train


def _project(b: Batch, weights: torch.Tensor) -> torch.Tensor:
    """(S, d, parts * k) weights -> (S, n, k): each word projected, then gathered for the examples."""
    projected = torch.bmm(b.z, weights)  # (S, w, parts * k)
    if b.direct:
        return projected
    k = weights.shape[-1] // b.parts
    out = projected.index_select(1, b.first)  # index_select: its backward (index_add) is twice as fast as indexing's
    return out if b.second is None else out[..., :k] + projected.index_select(1, b.second)[..., k:]


def _surprisal(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(S, n, R, C) logits, (n, R) labels -> (S, n, R) -log p(label) in nats (logsumexp minus the label's logit:
    four times faster than log_softmax over a last dimension this short)."""
    chosen = logits.gather(-1, labels[None, :, :, None].expand(logits.shape[0], -1, -1, 1))[..., 0]
    return logits.logsumexp(-1) - chosen


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(S, n, R, C) logits, (n, R) labels -> (S, R) mean cross-entropy (nats)."""
    return _surprisal(logits, labels).mean(1)


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """(S, n, R, C) logits, (n, R) labels -> (R, S) accuracy."""
    return (logits.argmax(-1) == labels[None]).double().mean(1).T.numpy()


def _lbfgs(params: list[torch.Tensor], loss: Callable[[], torch.Tensor], progress: Progress | None,
           iterations: int = ITERATIONS) -> None:
    """Minimise `loss` (a sum of independent probes' losses) over `params` with L-BFGS and a strong Wolfe search."""
    evaluations = iterations * 5 // 4
    optimizer = torch.optim.LBFGS(params, lr=1, max_iter=iterations, max_eval=evaluations, tolerance_grad=TOLERANCE,
                                  tolerance_change=1e-9, history_size=10, line_search_fn="strong_wolfe")
    calls = [0]

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = loss()
        value.backward()
        calls[0] += 1
        if progress:
            progress(min(1.0, calls[0] / evaluations))
        return value

    with torch.enable_grad():
        optimizer.step(closure)


class Linear:
    """R softmax regressions at each of S hidden states over white words: weights (S, d, parts * R * C), biases
    (S, 1, R, C)."""

    def __init__(self, b: Batch, classes: int, variance: torch.Tensor):
        states, _, d = b.z.shape
        self.r, self.c, self.variance = b.labels.shape[1], classes, variance
        self.weights = torch.zeros(states, d, b.parts * self.r * classes, requires_grad=True)
        self.bias = torch.zeros(states, 1, self.r, classes, requires_grad=True)

    def logits(self, b: Batch) -> torch.Tensor:
        """(S, n, R, C) for the examples of `b`."""
        out = _project(b, self.weights)
        return out.view(out.shape[0], out.shape[1], self.r, self.c) + self.bias

    def fit(self, b: Batch, progress: Progress | None = None) -> Linear:
        _lbfgs([self.weights, self.bias], lambda: _cross_entropy(self.logits(b), b.labels).sum()
               + 0.5 * PENALTY * (self.weights**2 / self.variance).sum(), progress)
        return self


class Perceptron:
    """R one-hidden-layer MLPs at each of S hidden states over white words, seeded: first layer
    (S, d, parts * R * H), second (S * R, H, C)."""

    def __init__(self, b: Batch, classes: int, variance: torch.Tensor, seed: int):
        states, _, d = b.z.shape
        self.r, self.c, self.variance, h = b.labels.shape[1], classes, variance, MLP_HIDDEN
        g = torch.Generator().manual_seed(seed)

        def uniform(*shape: int, fan_in: int) -> torch.Tensor:  # torch.nn.Linear's start
            return ((torch.rand(*shape, generator=g) * 2 - 1) / fan_in**0.5).requires_grad_()

        self.inner = uniform(states, d, b.parts * self.r * h, fan_in=b.parts * d)
        self.inner_bias = uniform(states, 1, self.r * h, fan_in=b.parts * d)
        self.outer, self.outer_bias = uniform(states * self.r, h, classes, fan_in=h), uniform(
            states * self.r, 1, classes, fan_in=h)

    def logits(self, b: Batch) -> torch.Tensor:
        hidden = torch.relu(_project(b, self.inner) + self.inner_bias)  # (S, n, R * H)
        s, n = hidden.shape[:2]
        hidden = hidden.view(s, n, self.r, -1).transpose(1, 2).reshape(s * self.r, n, -1)  # (S * R, n, H)
        out = torch.baddbmm(self.outer_bias, hidden, self.outer)  # (S * R, n, C)
        return out.view(s, self.r, n, self.c).transpose(1, 2)

    def fit(self, b: Batch, progress: Progress | None = None) -> Perceptron:
        _lbfgs([self.inner, self.inner_bias, self.outer, self.outer_bias], lambda: _cross_entropy(
            self.logits(b), b.labels).sum() + 0.5 * PENALTY * ((self.inner**2 / self.variance).sum()
                                                                + (self.outer**2).sum()), progress, MLP_ITERATIONS)
        return self


def fit_layers(vectors: np.ndarray, first: np.ndarray, second: np.ndarray | None, labels: np.ndarray,
               train: np.ndarray, classes: int, kind: str = "linear", seed: int = 0,
               progress: Progress | None = None, words: Words | None = None) -> np.ndarray:
    """(R, S) test accuracy of a `kind` probe ("linear" or "mlp") for each of the R labellings (rows of `labels`,
    e.g. the task's and its control's) at each of the S hidden states of `vectors` (n_words, S, d), all fitted in
    one batched optimisation on the `train` examples. `words`: these examples' `prepare`d Words, to share them."""
    if kind not in ("linear", "mlp"):
        raise InputError(f"there is no probe {kind!r}: the probes are linear and mlp")
    first, second, labels, train = _checked(vectors, first, second, labels, train)
    with threads(PROBE_THREADS), torch.no_grad():
        words = prepare(vectors, first, second, train) if words is None else words
        fit, test = words.batch(np.flatnonzero(train), labels), words.batch(np.flatnonzero(~train), labels)
        probe = Linear(fit, classes, words.variance) if kind == "linear" else Perceptron(fit, classes,
                                                                                        words.variance, seed)
        return _accuracy(probe.fit(fit, progress).logits(test), test.labels)


class Mixes:
    """Tenney et al.'s S cumulative scalar mixes of standardised words, each with a linear probe: mix k reads states
    0..k. Mix k's probe is preconditioned by state k's whitening (weights = axes diag(variance^-1/2) white weights)."""

    def __init__(self, b: Batch, classes: int, words: Words):
        states, _, d = b.z.shape
        self.c, self.words = classes, words
        self.mask = torch.ones(states, states, dtype=torch.bool).tril()  # (k, l): mix k may use state l <= k
        self.mixing = torch.zeros(states, states, requires_grad=True)
        self.scale = torch.ones(states, 1, requires_grad=True)
        self.white = torch.zeros(states, d, b.parts * classes, requires_grad=True)
        self.bias = torch.zeros(states, 1, 1, classes, requires_grad=True)

    def softmax(self) -> torch.Tensor:
        """(S, S): row k is mix k's weights over the hidden states, 0 past k."""
        return self.mixing.masked_fill(~self.mask, float("-inf")).softmax(-1)

    def logits(self, b: Batch) -> torch.Tensor:
        s, w, d = b.z.shape
        mixed = ((self.scale * self.softmax()) @ b.z.reshape(s, w * d)).view(s, w, d)  # (S mixes, w, d)
        weights = self.words.axes @ (self.white * self.words.variance.rsqrt())
        out = _project(Batch(mixed, b.first, b.second, b.labels, b.direct), weights)
        return out.view(s, out.shape[1], 1, self.c) + self.bias

    def fit(self, b: Batch, progress: Progress | None = None) -> Mixes:
        _lbfgs([self.mixing, self.scale, self.white, self.bias], lambda: _cross_entropy(self.logits(b), b.labels).sum()
               + 0.5 * PENALTY * (self.white**2 / self.words.variance).sum(), progress)
        return self


def expected_layer(cumulative: np.ndarray, tested: int | None = None) -> float | None:
    """sum_l l * delta_l / sum_l delta_l, delta_l = cumulative[l] - cumulative[l - 1] (Tenney et al.); None when the
    mixes gain no more than NOTHING_GAINED beyond state 0, or, with `tested` test examples, no more than two standard
    errors of state 0's accuracy (a gain of a test example or two would otherwise place the layer anywhere)."""
    cumulative = np.asarray(cumulative, dtype=np.float64)
    delta = np.diff(cumulative)
    floor = NOTHING_GAINED
    if tested:
        floor = max(floor, 2 * float(np.sqrt(cumulative[0] * (1 - cumulative[0]) / tested)))
    if delta.sum() <= floor:
        return None
    return float((np.arange(1, len(cumulative)) * delta).sum() / delta.sum())


def scalar_mix(vectors: np.ndarray, first: np.ndarray, second: np.ndarray | None, labels: np.ndarray,
               train: np.ndarray, classes: int, seed: int = 0, progress: Progress | None = None,
               words: Words | None = None) -> Mix:
    """Tenney et al. 2019's scalar mix for one labelling `labels` (N,): the full mix's weights, each cumulative mix's
    test accuracy, the expected layer and the centre of gravity. (`seed` is kept for the contract: the fit starts from
    uniform weights and zero probes, so it draws nothing.)"""
    first, second, labels, train = _checked(vectors, first, second, labels, train)
    with threads(PROBE_THREADS), torch.no_grad():
        words = prepare(vectors, first, second, train) if words is None else words
        z = words.z
        fit, test = words.batch(np.flatnonzero(train), labels[:1], z), words.batch(np.flatnonzero(~train), labels[:1], z)
        mixes = Mixes(fit, classes, words).fit(fit, progress)
        cumulative = _accuracy(mixes.logits(test), test.labels)[0]  # (S,)
        weights = mixes.softmax()[-1].double().numpy()
    centre = float((np.arange(len(weights)) * weights).sum())
    return Mix(weights, cumulative, expected_layer(cumulative, int((~train).sum())), centre)


def block_ends(n: int) -> tuple[int, ...]:
    """The online code's block ends for n examples: shares BLOCKS of n, the first at least FIRST_BLOCK."""
    return tuple(sorted({min(n, max(FIRST_BLOCK, round(share * n))) for share in BLOCKS}))


def online_codelength(vectors: np.ndarray, first: np.ndarray, second: np.ndarray | None, labels: np.ndarray,
                      train: np.ndarray, classes: int, seed: int = 0, progress: Progress | None = None,
                      words: Words | None = None) -> tuple[np.ndarray, tuple[int, ...], float]:
    """Voita & Titov 2020's online codelength (bits) of each labelling's training labels at each hidden state:
    (R, S) bits, the block ends, and the uniform code's bits (examples * log2(classes)). Each block is sent with a
    linear probe fitted on the labels before it only; the vectors are standardised by every training word's, which
    the receiver has (the code sends labels, not vectors: Voita & Titov's setting)."""
    first, second, labels, train = _checked(vectors, first, second, labels, train)
    rows = np.flatnonzero(train)
    order = rows[np.random.Generator(np.random.PCG64(seed)).permutation(len(rows))]
    ends = block_ends(len(order))
    bits = np.full((labels.shape[0], np.shape(vectors)[1]), ends[0] * np.log2(classes))
    done = np.concatenate([[0.0], np.cumsum(ends[:-1]) / sum(ends[:-1])])  # a fit's work grows with its examples
    with threads(PROBE_THREADS), torch.no_grad():
        words = prepare(vectors, first, second, train) if words is None else words
        for i, (seen, end) in enumerate(zip(ends[:-1], ends[1:])):
            fit, sent = words.batch(order[:seen], labels), words.batch(order[seen:end], labels)
            tick = None if progress is None else lambda f, i=i: progress(done[i] + f * (done[i + 1] - done[i]))
            logits = Linear(fit, classes, words.variance).fit(fit, tick).logits(sent).double()  # (S, n, R, C)
            bits += _surprisal(logits, sent.labels).sum(1).T.numpy() / np.log(2)
    return bits, ends, float(len(order) * np.log2(classes))
