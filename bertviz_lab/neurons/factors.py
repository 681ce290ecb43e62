"""A sentence's feed-forward activations as a few factors (non-negative matrix factorisation, as Ecco does for
generative models): tokens x neurons ~ strengths (tokens x k) @ loadings (k x neurons), every entry >= 0. Each factor
is a group of neurons that fire together; its strengths over the tokens, drawn as a coloured strip, show where.

The activation functions of the family (GELU and its variants) go slightly below zero (to about -0.17); NMF needs
non-negative input, so negative activations are read as 0, as Ecco does. `Factors.clipped` says how much of the
activations' total magnitude that set aside. scikit-learn's NMF does the factorising (nndsvda start, seeded), so the
same sentence gives the same factors.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from bertviz_lab.errors import InputError

MAX_FACTORS = 10


@dataclass(frozen=True)
class Factors:
    strengths: np.ndarray  # (T, k): how strongly each token shows each factor, >= 0
    loadings: np.ndarray  # (k, n): each factor's neurons, >= 0
    error: float  # ||A - S L|| / ||A||, the share of the (clipped) activations the factors leave unexplained
    clipped: float  # the share of the activations' total magnitude below 0, set to 0 before factorising

    def top_neurons(self, factor: int, k: int = 5) -> list[int]:
        """The neurons (column indices of the activations given) that load most on `factor`."""
        return [int(i) for i in np.argsort(-self.loadings[factor], kind="stable")[:k]]


def factorise(activations: np.ndarray, factors: int = 4, seed: int = 0) -> Factors:
    """`activations` (T, n): one sentence's tokens by neurons (one layer's, or several layers' side by side)."""
    a = np.asarray(activations, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2 or a.shape[1] < 2:
        raise InputError("factorising needs at least two tokens and two neurons")
    if isinstance(factors, bool) or not isinstance(factors, int) or not 1 <= factors <= MAX_FACTORS:
        raise InputError(f"the number of factors must be a whole number from 1 to {MAX_FACTORS}, got {factors!r}")
    if not np.isfinite(a).all():
        raise InputError("the activations are not all finite numbers: this model's weights overflow on this text")
    factors = min(factors, a.shape[0])
    total = np.abs(a).sum()
    clipped = float(np.clip(-a, 0, None).sum() / total) if total else 0.0
    a = np.clip(a, 0, None)
    norm = np.linalg.norm(a)
    if norm == 0:
        return Factors(np.zeros((a.shape[0], factors)), np.zeros((factors, a.shape[1])), 0.0, clipped)
    from sklearn.decomposition import NMF

    model = NMF(n_components=factors, init="nndsvda", random_state=seed, max_iter=1000, tol=1e-5)
    with warnings.catch_warnings():  # a sentence of 5 tokens may not converge to 1e-5 in 1000 steps: the error says
        warnings.simplefilter("ignore")
        strengths = model.fit_transform(a)
    loadings = model.components_
    error = float(np.linalg.norm(a - strengths @ loadings) / norm)
    order = np.argsort([strengths[:, f].argmax() for f in range(factors)], kind="stable")  # in the order they peak
    return Factors(strengths[:, order], loadings[order], error, clipped)
