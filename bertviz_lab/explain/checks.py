"""Do the methods agree, and which of them passes a causal test?

`agreement`: the Spearman correlation of every pair of methods over the tokens that may be removed, and
`agreement_p` its permutation p-value (rank.py): over few tokens a large rho is often chance.
`deletion`: the causal check. Mask the tokens one by one in the order a method ranks them (most important
first) and read p after each (p(target); with a contrast word sigmoid(F) = p(target) / (p(target) + p(contrast)),
so the curve follows the contrastive score F and not what the two words share); the area over that curve (AOPC,
Samek et al. 2017: the mean of p(x) - p(x with the first k removed) over k = 0..n) is large when the method found
what the score rests on. Tokens a method ties (rank.snap) are not put in any order: at each step inside a tied group
the curve is the mean over the subsets of the group of that size (the mean over the group's orders), exact up to
SUBSETS subsets, else TIE_DRAWS seeded ones, drawn from the group and the size alone (so methods that tie the same
tokens share them, and their inputs run once): a tied group of g tokens costs about TIE_DRAWS x g inputs, not
SUBSETS x g (a flow that saturates on 60 tokens took 3,700 inputs, twice the whole check untied). Twenty seeded random orders give the bar to clear; an AOPC equal to the
best of them is a tie, not a loss. The sentences that say what the numbers show are written from the numbers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from bertviz_lab.explain.methods import Case, Progress
from bertviz_lab.explain.rank import SIGNIFICANT, exhaustive, groups, orders_counted, snap, spearman, spearman_p
from bertviz_lab.explain.rank import ranks as ranks  # noqa: PLC0414 (checks.ranks, as before)

RANDOM_ORDERS = 20
MIN_TESTED = 5  # removable tokens a test against random orders needs: 4 have only 24 orders, which 20 draws mostly cover
RANDOM_SEED = 0
SUBSETS = 64  # a tied group's curve averages every subset of a step's size when there are at most this many
TIE_DRAWS = 8  # else this many seeded ones: the mean over tied orders to about a third of their spread, at a bounded cost
AOPC_TIE = 1e-12  # AOPCs closer than this are equal: the same removals give the same numbers
SMALL = 10  # over fewer removable tokens than this the agreement sentence says rho is noisy
AGREE, DISAGREE = 0.5, 0.2  # rho at or above AGREE reads "agrees" (if its p is below SIGNIFICANT); below DISAGREE, "does not"


def agreement(methods: dict[str, np.ndarray], movable: np.ndarray) -> dict[str, dict[str, float | None]]:
    """rho for every pair of methods over the `movable` tokens (indices), values within rank.TIE counted as tied."""
    snapped = {name: snap(values[movable]) for name, values in methods.items()}
    return {a: {b: spearman(va, vb) for b, vb in snapped.items()} for a, va in snapped.items()}


def agreement_p(methods: dict[str, np.ndarray], movable: np.ndarray, reference: str = "occlusion") -> dict[str, float | None]:
    """The permutation p-value of each method's rho against `reference` (rank.spearman_p), over the same tokens."""
    ref = snap(methods[reference][movable])
    return {name: spearman_p(snap(values[movable]), ref) for name, values in methods.items() if name != reference}


@dataclass(frozen=True)
class Deletion:
    """Deletion curves: p after removing 0, 1, ..., n tokens, per method and per random order."""

    positions: tuple[int, ...]  # the n removable tokens
    orders: dict[str, tuple[tuple[int, ...], ...]]  # method -> its removal order, most important first, in groups of
    # tied tokens (rank.groups; a group of one for every token a method does not tie)
    curves: dict[str, np.ndarray]  # method -> (n + 1,) p after k removals (inside a tied group: the mean over its orders)
    random_curves: np.ndarray  # (RANDOM_ORDERS, n + 1)
    follows: str = "p(target)"  # what the curves follow: "p(target)", "sigmoid(F)" (a contrast) or "p(replaced)"
    exact: dict[str, bool] = field(default_factory=dict)  # method -> False where a tied group's mean was sampled

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

    def verdict(self, method: str) -> str | None:
        """"beats" (the AOPC is above every random order's: a 1-in-21 chance for a ranking that knows nothing),
        "ties" (equal to the best of them), "below"; None when the sentence is too short for the test (`tested`)."""
        if not self.tested:
            return None
        mine, best = self.aopc[method], float(self.random_aopc.max())
        return "ties" if abs(mine - best) <= AOPC_TIE else "beats" if mine > best else "below"

    def beats_random(self, method: str) -> bool | None:
        """The method's AOPC is above every one of the random orders' (a tie is not a win); None when untested."""
        verdict = self.verdict(method)
        return None if verdict is None else verdict == "beats"

    def tied(self, method: str) -> int:
        """How many of the removable tokens the method ties with another (their order is averaged over)."""
        return sum(len(g) for g in self.orders.get(method, ()) if len(g) > 1)


def aopc(curve: np.ndarray) -> float:
    """The area over a deletion curve: the mean drop p(x) - p(x minus the first k), k = 0..n."""
    return float(np.mean(curve[0] - curve))


def order(values: np.ndarray, positions: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """`positions` from the highest value to the lowest, in groups of tied values (rank.groups)."""
    return groups(values, positions)


def _subsets(group: tuple[int, ...], size: int, seed: int) -> tuple[list[frozenset], bool]:
    """The subsets of `group` of `size` (all of them when there are at most SUBSETS, else TIE_DRAWS draws seeded by
    `seed`, the group and the size), and whether they are all."""
    if math.comb(len(group), size) <= SUBSETS:
        return [frozenset(c) for c in itertools.combinations(group, size)], True
    rng = np.random.default_rng([seed, 1, size, *group])
    return [frozenset(int(x) for x in rng.choice(group, size, replace=False)) for _ in range(TIE_DRAWS)], False


def steps(removal: tuple[tuple[int, ...], ...], seed: int = RANDOM_SEED) -> tuple[list[list[frozenset]], bool]:
    """For k = 0..n, the sets of removed tokens whose p the curve averages after k removals in the order `removal`
    (tied groups: every subset of the size reached), and whether every average is exact."""
    sets, before, exact = [[frozenset()]], frozenset(), True
    for group in removal:
        for size in range(1, len(group) + 1):
            found, whole = _subsets(group, size, seed)
            sets.append([before | s for s in found])
            exact &= whole
        before |= frozenset(group)
    return sets, exact


@dataclass(frozen=True)
class Plan:
    """What a causal check will run: every removal order, the sets of removed tokens each step averages, and each
    distinct set once (`wanted`: set -> its row among the inputs)."""

    positions: np.ndarray  # the removable tokens
    orders: dict[str, tuple[tuple[int, ...], ...]]  # method -> its removal order, in tied groups
    shuffled: list[tuple[tuple[int, ...], ...]]  # the random orders
    planned: list[tuple[list[list[frozenset]], bool]]  # per order (methods', then random): steps() of it
    wanted: dict[frozenset, int]

    @property
    def inputs(self) -> int:
        """How many inputs the check runs through the model (one per distinct set of removed tokens)."""
        return len(self.wanted)


def plan(case: Case, methods: dict[str, np.ndarray], random_orders: int = RANDOM_ORDERS,
         seed: int = RANDOM_SEED) -> Plan:
    """The causal check's removals, before any of them runs (cheap: it only counts sets)."""
    positions = np.flatnonzero(case.removable)
    orders = {name: order(values, positions) for name, values in methods.items()}
    rng = np.random.default_rng(seed)
    shuffled = [tuple((int(p),) for p in rng.permutation(positions)) for _ in range(random_orders)]
    planned = [steps(removal, seed) for removal in [*orders.values(), *shuffled]]
    wanted: dict[frozenset, int] = {}
    for sets, _ in planned:
        for at_k in sets:
            for removed in at_k:
                wanted.setdefault(removed, len(wanted))
    return Plan(positions, orders, shuffled, planned, wanted)


def deletion(case: Case, methods: dict[str, np.ndarray], *, random_orders: int = RANDOM_ORDERS,
             seed: int = RANDOM_SEED, progress: Progress | None = None, chunk: int = 64) -> Deletion:
    """Every method's deletion curve and `random_orders` seeded random ones. Each distinct set of removed tokens
    is run once (methods often share their first steps), `chunk` inputs a forward."""
    todo = plan(case, methods, random_orders, seed)
    positions, orders, planned, wanted = todo.positions, todo.orders, todo.planned, todo.wanted
    sets = list(wanted)
    p = np.empty(len(sets))
    with torch.no_grad():
        for start in range(0, len(sets), chunk):
            batch = case.ids.repeat(len(sets[start:start + chunk]), 1)
            for row, removed in enumerate(sets[start:start + chunk]):
                batch[row, list(removed)] = case.mask_id
            p[start:start + chunk] = case.score.followed(case.model, batch, case.segments).double().cpu().numpy()
            if progress is not None:
                progress(min(start + chunk, len(sets)) / len(sets), "deletion curves")

    curves = [np.array([np.mean([p[wanted[s]] for s in at_k]) for at_k in sets_k]) for sets_k, _ in planned]
    names = list(orders)
    return Deletion(tuple(int(x) for x in positions), orders, dict(zip(names, curves)),
                    np.array(curves[len(names):]).reshape(len(todo.shuffled), len(positions) + 1),
                    case.score.follows, {name: exact for name, (_, exact) in zip(names, planned)})


def _rho(r: float, p: float | None) -> str:
    return f"ρ = {r:.2f}" + ("" if p is None else f", p = {p:.2g}" if p >= 0.01 else f", p = {p:.1e}")


def agreement_sentence(rho: dict[str, dict[str, float | None]], titles: dict[str, str], p: dict[str, float | None],
                       n: int, reference: str = "occlusion") -> str:
    """Which methods rank the `n` tokens as `reference` does, each rho with its permutation p-value (`p`, from
    `agreement_p`): a rho of AGREE or more counts as ranking alike only when chance is unlikely (p < SIGNIFICANT)."""
    others = {m: r for m, r in rho[reference].items() if m != reference}
    known = {m: r for m, r in others.items() if r is not None}
    if not known:
        return (f"Too few words to compare rankings: Spearman's rho needs at least 3 removable tokens that "
                f"{titles[reference]} does not score all alike.")
    high = [m for m, r in known.items() if r >= AGREE]
    agree = [m for m in high if p.get(m) is not None and p[m] < SIGNIFICANT]
    chance = [m for m in high if m not in agree]
    disagree = [m for m, r in known.items() if r < DISAGREE]

    def named(ms: list[str]) -> str:
        return ", ".join(f"{titles[m]} ({_rho(known[m], p.get(m))})" for m in sorted(ms, key=lambda m: -known[m]))

    best, worst = max(known, key=known.get), min(known, key=known.get)
    counted = (f"all {orders_counted(n):,} orders" if exhaustive(n) else f"{orders_counted(n):,} random orders")
    parts = [f"Against {titles[reference]} (each token swapped for the mask token on its own, one at a time: a test "
             f"that misses tokens which matter only together, and is itself tested below), over {n} removable "
             f"tokens: {titles[best]} agrees most ({_rho(known[best], p.get(best))}) and {titles[worst]} least "
             f"({_rho(known[worst], p.get(worst))}). p: the share of {counted} of the {n} tokens that give a ρ as "
             "far from 0."]
    if agree:
        parts.append(f"Ranking the words alike beyond chance (ρ ≥ {AGREE}, p < {SIGNIFICANT}): {named(agree)}.")
    if chance:
        parts.append(f"ρ ≥ {AGREE} but within chance over {n} tokens (p ≥ {SIGNIFICANT}): {named(chance)}.")
    if disagree:
        parts.append(f"Ranking them differently (ρ < {DISAGREE}): {named(disagree)}.")
    undefined = sorted(set(others) - set(known))
    if undefined:
        parts.append(f"No ρ for {', '.join(titles[m] for m in undefined)}: it scores every word alike.")
    if n < SMALL:
        parts.append(f"Over only {n} tokens ρ is noisy: read its p, and try longer sentences before trusting it.")
    return " ".join(parts)


def _listed(result: Deletion, titles: dict[str, str], methods: list[str]) -> str:
    """"name (AOPC)" for each method, best first, with how many tokens it tied (their orders averaged)."""
    def one(m: str) -> str:
        tied = result.tied(m)
        return f"{titles[m]} ({result.aopc[m]:.3f}" + (f"; {tied} tied tokens, their orders averaged)" if tied
                                                       else ")")

    return ", ".join(one(m) for m in sorted(methods, key=lambda m: -result.aopc[m]))


def deletion_sentence(result: Deletion, titles: dict[str, str], p: str = "p(target)") -> str:
    """Which methods' orders removed the score's support faster than all the random orders, from the numbers (`p`:
    what the curves follow, as the reader knows it: "p(mat)", or "p(replaced)" for a discriminator)."""
    if not result.tested:
        n = len(result.positions)
        return (f"With {n} {'token' if n == 1 else 'tokens'} that can be removed there are only {math.factorial(n)} "
                f"removal {'order' if n < 2 else 'orders'}, too few for a test against random orders (it needs "
                f"{MIN_TESTED} or more): read the curves, not a verdict.")
    random = result.random_aopc
    said = {v: [m for m in result.curves if result.verdict(m) == v] for v in ("beats", "ties", "below")}
    bar = (f"the {len(random)} random orders' AOPC is {random.mean():.3f} ± {random.std():.3f} "
           f"(best {random.max():.3f})")
    if not said["beats"]:
        ranked = sorted(result.curves, key=lambda m: -result.aopc[m])
        text = (f"On this sentence no method's order lowers {p} faster than every random order: {bar}. "
                f"Best: {titles[ranked[0]]}, AOPC {result.aopc[ranked[0]]:.3f}.")
    else:
        text = f"Faster than all {len(random)} random orders ({bar}): {_listed(result, titles, said['beats'])}."
    if said["ties"]:
        text += f" Tied with the best random order: {_listed(result, titles, said['ties'])}."
    if said["beats"] and said["below"]:
        text += f" Not: {_listed(result, titles, said['below'])}."
    return text


def attention_sentence(result: Deletion, titles: dict[str, str], attention: list[str], p: str = "p(target)") -> str:
    """What the deletion test found on this sentence for the methods read from attention (`attention`): a clue
    to test, not an explanation by itself (Wiegreffe & Pinter 2019)."""
    if not result.tested:
        return ("Attention says where the explained position looked: a clue to test. This sentence is too short "
                "for the test against random orders.")
    said = {v: [m for m in attention if result.verdict(m) == v] for v in ("beats", "ties", "below")}
    parts = []
    if said["beats"]:
        parts.append(f"{_listed(result, titles, said['beats'])} lowered {p} faster than all "
                     f"{len(result.random_curves)} random orders")
    if said["ties"]:
        parts.append(f"{_listed(result, titles, said['ties'])} tied the best random order")
    if said["below"]:
        parts.append(f"{_listed(result, titles, said['below'])} did not beat them")
    return ("Attention says where the explained position looked: a clue to test, not the reason for the guess by "
            "itself. Of the rows read from attention, on this sentence " + "; ".join(parts) + ".")
