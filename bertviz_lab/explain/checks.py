"""Do the methods agree, and which of them tells the truth?

`agreement`: the Spearman correlation of every pair of methods over the tokens that may be removed.
`deletion`: the causal check. Mask the tokens one by one in the order a method ranks them (most important
first) and read p(target) after each; the area over that curve (AOPC, Samek et al. 2017: the mean of
p(x) - p(x with the first k removed) over k = 0..n) is large when the method found what the guess rests on.
Twenty seeded random orders give the bar to clear. The sentences that say what the numbers show are
written from the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.explain.methods import Case, Progress

RANDOM_ORDERS = 20
MIN_TESTED = 5  # removable tokens a test against random orders needs: 4 have only 24 orders, which 20 draws mostly cover
RANDOM_SEED = 0
AGREE, DISAGREE = 0.5, 0.2  # a Spearman rho at or above AGREE reads "agrees"; below DISAGREE, "does not"


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their mean rank (as Spearman's rho needs)."""
    order = np.argsort(values, kind="stable")
    ranked = np.empty(len(values))
    ranked[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranked[tied] = ranked[tied].mean()
    return ranked


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho: Pearson's correlation of the ranks. None when it is undefined (fewer than 3 tokens, or a
    method that gives every token the same value)."""
    if len(a) < 3:
        return None
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    ra, rb = ra - ra.mean(), rb - rb.mean()
    norm = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return None if norm == 0 else float((ra * rb).sum() / norm)


def agreement(methods: dict[str, np.ndarray], movable: np.ndarray) -> dict[str, dict[str, float | None]]:
    """rho for every pair of methods over the `movable` tokens (indices)."""
    return {a: {b: spearman(va[movable], vb[movable]) for b, vb in methods.items()} for a, va in methods.items()}


@dataclass(frozen=True)
class Deletion:
    """Deletion curves: p(target) after removing 0, 1, ..., n tokens, per method and per random order."""

    positions: tuple[int, ...]  # the n removable tokens
    orders: dict[str, tuple[int, ...]]  # method -> its removal order (positions, most important first)
    curves: dict[str, np.ndarray]  # method -> (n + 1,) p after k removals
    random_curves: np.ndarray  # (RANDOM_ORDERS, n + 1)

    @property
    def aopc(self) -> dict[str, float]:
        return {name: aopc(curve) for name, curve in self.curves.items()}

    @property
    def random_aopc(self) -> np.ndarray:
        return np.array([aopc(curve) for curve in self.random_curves])

    @property
    def tested(self) -> bool:
        """Enough removable tokens for the test to mean something: with n! orders, n < MIN_TESTED, twenty random
        draws mostly include the method's own order (which ties it), so no order could beat them all."""
        return len(self.positions) >= MIN_TESTED and len(self.random_curves) > 0

    def beats_random(self, method: str) -> bool | None:
        """The method's AOPC is above every one of the random orders' (a 1-in-21 chance for a ranking that
        knows nothing); None when the sentence is too short for the test (`tested`)."""
        return bool(self.aopc[method] > self.random_aopc.max()) if self.tested else None


def aopc(curve: np.ndarray) -> float:
    """The area over a deletion curve: the mean drop p(x) - p(x minus the first k), k = 0..n."""
    return float(np.mean(curve[0] - curve))


def order(values: np.ndarray, positions: np.ndarray) -> tuple[int, ...]:
    """`positions` from the highest value to the lowest; equal values in sentence order."""
    return tuple(int(p) for p in positions[np.argsort(-values[positions], kind="stable")])


def deletion(case: Case, methods: dict[str, np.ndarray], *, random_orders: int = RANDOM_ORDERS,
             seed: int = RANDOM_SEED, progress: Progress | None = None, chunk: int = 64) -> Deletion:
    """Every method's deletion curve and `random_orders` seeded random ones. Each distinct set of removed tokens
    is run once (methods often share their first steps), `chunk` inputs a forward."""
    positions = np.flatnonzero(case.removable)
    orders = {name: order(values, positions) for name, values in methods.items()}
    rng = np.random.default_rng(seed)
    shuffled = [tuple(int(p) for p in rng.permutation(positions)) for _ in range(random_orders)]
    wanted: dict[frozenset, int] = {}
    for removal in [*orders.values(), *shuffled]:
        for k in range(len(removal) + 1):
            wanted.setdefault(frozenset(removal[:k]), len(wanted))
    sets = list(wanted)
    p = np.empty(len(sets))
    with torch.no_grad():
        for start in range(0, len(sets), chunk):
            batch = case.ids.repeat(len(sets[start:start + chunk]), 1)
            for row, removed in enumerate(sets[start:start + chunk]):
                batch[row, list(removed)] = case.mask_id
            p[start:start + chunk] = case.score.evaluate(case.model, batch, case.segments)[1].double().cpu().numpy()
            if progress is not None:
                progress(min(start + chunk, len(sets)) / len(sets), "deletion curves")

    def curve(removal: tuple[int, ...]) -> np.ndarray:
        return np.array([p[wanted[frozenset(removal[:k])]] for k in range(len(removal) + 1)])

    return Deletion(tuple(int(x) for x in positions), orders, {name: curve(o) for name, o in orders.items()},
                    np.array([curve(o) for o in shuffled]).reshape(len(shuffled), len(positions) + 1))


def agreement_sentence(rho: dict[str, dict[str, float | None]], titles: dict[str, str],
                       reference: str = "occlusion") -> str:
    """Which methods rank the tokens as `reference` does, from the numbers."""
    others = {m: r for m, r in rho[reference].items() if m != reference}
    known = {m: r for m, r in others.items() if r is not None}
    if not known:
        return (f"Too few words to compare rankings: Spearman's rho needs at least 3 removable tokens that "
                f"{titles[reference]} does not score all alike.")
    agree = [m for m, r in known.items() if r >= AGREE]
    disagree = [m for m, r in known.items() if r < DISAGREE]

    def named(ms: list[str]) -> str:
        return ", ".join(f"{titles[m]} (ρ = {known[m]:.2f})" for m in sorted(ms, key=lambda m: -known[m]))

    best, worst = max(known, key=known.get), min(known, key=known.get)
    parts = [f"Against {titles[reference]} (what removing each word really does to the score), "
             f"{titles[best]} agrees most (ρ = {known[best]:.2f}) and {titles[worst]} least "
             f"(ρ = {known[worst]:.2f})."]
    if agree:
        parts.append(f"Ranking the words as it does (ρ ≥ {AGREE}): {named(agree)}.")
    if disagree:
        parts.append(f"Ranking them differently (ρ < {DISAGREE}): {named(disagree)}.")
    undefined = sorted(set(others) - set(known))
    if undefined:
        parts.append(f"No ρ for {', '.join(titles[m] for m in undefined)}: it scores every word alike.")
    return " ".join(parts)


def deletion_sentence(result: Deletion, titles: dict[str, str], p: str = "p(target)") -> str:
    """Which methods' orders removed the guess's support faster than all the random orders, from the numbers (`p`:
    what the curves follow, as the reader knows it: "p(mat)", or "p(replaced)" for a discriminator)."""
    if not result.tested:
        n = len(result.positions)
        return (f"With {n} {'token' if n == 1 else 'tokens'} that can be removed there are only {math.factorial(n)} "
                f"removal {'order' if n < 2 else 'orders'}, too few for a test against random orders (it needs "
                f"{MIN_TESTED} or more): read the curves, not a verdict.")
    random = result.random_aopc
    winners = [m for m in result.curves if result.beats_random(m)]
    losers = [m for m in result.curves if m not in winners]
    bar = (f"the {len(random)} random orders' AOPC is {random.mean():.3f} ± {random.std():.3f} "
           f"(best {random.max():.3f})")
    ranked = sorted(result.curves, key=lambda m: -result.aopc[m])
    if not winners:
        return (f"On this sentence no method's order lowers {p} faster than every random order: {bar}. "
                f"Best: {titles[ranked[0]]}, AOPC {result.aopc[ranked[0]]:.3f}.")
    said = ", ".join(f"{titles[m]} ({result.aopc[m]:.3f})" for m in ranked if m in winners)
    text = f"Faster than all {len(random)} random orders ({bar}): {said}."
    if losers:
        text += " Not: " + ", ".join(f"{titles[m]} ({result.aopc[m]:.3f})" for m in ranked if m in losers) + "."
    return text
