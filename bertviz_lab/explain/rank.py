"""Ranking tokens by a method's values: ties, Spearman's rho, and how likely a rho is by chance.

`snap`: values within TIE of each other (relative to the largest) become one value. Attention flow saturates at 1.0
on many tokens, and the max-flow solver returns 1.0 for some and 0.9999999999999999 for others; without snapping,
that rounding decided their order (a different CPU or thread count: a different order, a different bench row).
`spearman` ranks ties by their mean rank; `spearman_p` is the two-sided permutation p-value of a rho: the share of
the n! orders of one side (all of them up to EXACT tokens, else PERMUTATIONS seeded draws) whose rho is at least as
far from 0. Over 6 tokens, rho = 0.54 has p of about 0.3: a rho alone says little about few tokens.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

TIE = 1e-9  # values closer than this share of the largest |value| are tied
EXACT = 8  # up to this many tokens the p-value counts every order (8! = 40,320)
PERMUTATIONS = 20_000  # above, this many seeded random orders: p to within about ±0.003
SEED = 0
SIGNIFICANT = 0.05  # a p below this reads "beyond chance"


def snap(values: np.ndarray) -> np.ndarray:
    """`values` with every run of values each within TIE x max|values| of the next replaced by the run's mean."""
    values = np.asarray(values, float)
    if len(values) < 2:
        return values.copy()
    scale = TIE * max(float(np.abs(values).max()), 1e-300)
    order = np.argsort(-values, kind="stable")
    run = np.concatenate([[0], np.cumsum(np.diff(values[order]) < -scale)])  # a new run where the gap is real
    snapped = np.empty_like(values)
    for r in np.unique(run):
        snapped[order[run == r]] = values[order[run == r]].mean()
    return snapped


def groups(values: np.ndarray, positions: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """`positions` from the highest value to the lowest, tied ones (`snap`) together in one group, in sentence
    order within it."""
    snapped = snap(values[positions])
    return tuple(tuple(int(p) for p in positions[snapped == v]) for v in sorted(set(snapped), reverse=True))


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="stable")
    ranked = np.empty(len(values))
    ranked[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranked[tied] = ranked[tied].mean()
    return ranked


def _centred(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return ra, rb, float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho: Pearson's correlation of the ranks. None when it is undefined (fewer than 3 tokens, or a
    method that gives every token the same value)."""
    if len(a) < 3:
        return None
    ra, rb, norm = _centred(a, b)
    return None if norm == 0 else float((ra * rb).sum() / norm)


@lru_cache(maxsize=8)
def _orders(n: int) -> tuple[np.ndarray, bool]:
    """(P, n) orders of n tokens, and whether they are all n! of them."""
    if n <= EXACT:
        return np.array(list(itertools.permutations(range(n))), dtype=np.int32), True
    draws = np.tile(np.arange(n, dtype=np.int32), (PERMUTATIONS, 1))
    return np.random.default_rng(SEED).permuted(draws, axis=1), False


def spearman_p(a: np.ndarray, b: np.ndarray) -> float | None:
    """The two-sided permutation p-value of spearman(a, b): how often shuffling a's ranks gives a |rho| as large.
    Exact (every order) up to EXACT tokens; above, with PERMUTATIONS seeded orders and the usual +1 in both counts.
    None where rho is."""
    rho = spearman(a, b)
    if rho is None:
        return None
    ra, rb, norm = _centred(a, b)
    orders, exact = _orders(len(ra))
    shuffled = np.abs(ra[orders] @ rb) / norm  # (P,)
    hits = int((shuffled >= abs(rho) - 1e-12).sum())
    return hits / len(orders) if exact else (hits + 1) / (len(orders) + 1)


def exhaustive(n: int) -> bool:
    """Whether spearman_p counts every one of the n! orders."""
    return n <= EXACT


def orders_counted(n: int) -> int:
    return math.factorial(n) if exhaustive(n) else PERMUTATIONS
