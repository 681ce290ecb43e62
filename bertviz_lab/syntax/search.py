"""Where one head puts its weight across a whole corpus: exBERT's corpus search (Hoover, Strobelt & Gehrmann, 2020).

For every sentence and every query word i, the head's pick is the key word j that i attends to most (itself left
out) and the weight it gives j. `search_head` returns the strongest picks of the corpus, each with the dependency
between its two words when the trees know one (j is i's head: i's relation, "nsubj"; i is j's head: j's relation
read backwards, "nsubj (head → dependent)"; else "no relation") and the words' kinds, and two histograms: how
often each relation, and each (query kind → key kind), comes up among ALL of the head's picks, against the base
rate, what a head picking one of the other words of each sentence at random would pick (every ordered pair of
different words weighted 1/(W - 1), so each word's picks count once, as the head's do). A head whose share of "det" is ten times the base rate is a determiner head. Without trees (a user's own
text) the picks carry no relation and no kinds ("") and there are no histograms.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.encode import SentenceReading, check_trees
from bertviz_lab.syntax.relations import DIRECTIONS

NO_RELATION = "no relation"
REVERSED = f" ({DIRECTIONS[1]})"  # "nsubj (head → dependent)": the query word is the key word's head


@dataclass(frozen=True)
class Pick:
    """One query word's strongest key word."""

    sentence: int  # index in the corpus
    words: tuple[str, ...]  # the sentence's words
    query: int  # i: the word attending
    key: int  # j: the word it attends to most
    weight: float  # the word attention i -> j
    relation: str  # "nsubj", "nsubj (head → dependent)", "no relation"; "" without a tree
    query_kind: str  # the tree's kind of word i ("" without a tree)
    key_kind: str


@dataclass(frozen=True)
class Share:
    """A label's share of the head's picks against its share of all ordered word pairs (the base rate)."""

    label: str
    share: float
    base: float

    @property
    def lift(self) -> float:
        """How many times the base rate the head picks it (inf when the base rate is 0)."""
        return self.share / self.base if self.base else float("inf")


@dataclass(frozen=True)
class HeadSearch:
    layer: int
    head: int
    picks: tuple[Pick, ...]  # the strongest, by weight, descending (ties in corpus order)
    total: int  # the head's picks over the corpus: one per word of every sentence of two words or more
    relations: tuple[Share, ...]  # by share, descending; () without trees
    kinds: tuple[Share, ...]  # (query kind → key kind) pairs, the same way


def _picks(attention: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, W) word attention of one head -> each query word's key (W,) and its weight (W,), self excluded."""
    attn = attention.copy()
    W = attn.shape[-1]
    attn[np.arange(W), np.arange(W)] = 0
    keys = attn.argmax(-1)
    return keys, attn[np.arange(W), keys]


def pair_relation(tree: Tree, i: int, j: int) -> str:
    """The dependency between query word i and key word j: rel(i) when j is i's head, rel(j) reversed when i is
    j's head, else "no relation"."""
    if tree.heads[i] == j:
        return tree.base_relation(i)
    if tree.heads[j] == i:
        return tree.base_relation(j) + REVERSED
    return NO_RELATION


def _base_rates(trees: list[Tree]) -> tuple[Counter, Counter, float]:
    """Relation and kind-pair weights of a random pick: each ordered pair (i, j), i != j, of a sentence of W words
    weighs 1/(W - 1), so every word's picks weigh 1 in all, as the head's one pick a word does; and the total."""
    relations, kinds, total = Counter(), Counter(), 0.0
    for tree in trees:
        W = len(tree)
        if W < 2:
            continue  # a one-word sentence has nothing to pick, for the head too
        each = 1.0 / (W - 1)
        total += W
        for i, h in enumerate(tree.heads):
            if h >= 0:  # each edge is two ordered pairs: dependent -> head, head -> dependent
                relations[tree.base_relation(i)] += each
                relations[tree.base_relation(i) + REVERSED] += each
        relations[NO_RELATION] += (W * (W - 1) - 2 * (W - 1)) * each
        count = Counter(tree.kinds)
        for a in count:
            for b in count:
                kinds[f"{a} → {b}"] += count[a] * (count[b] - (a == b)) * each
    return relations, kinds, total


def _shares(picked: Counter, base: Counter, total: int, pairs: float) -> tuple[Share, ...]:
    labels = [label for label in set(picked) | set(base) if picked[label] or base[label]]
    rows = [Share(label, picked[label] / total, base[label] / pairs) for label in labels]
    return tuple(sorted(rows, key=lambda r: (-r.share, -r.base, r.label)))


def _check_head(readings: list[SentenceReading], layer: int, head: int) -> None:
    if not readings:
        raise InputError("there are no sentences to search")
    L, H = readings[0].attention.shape[:2]
    for name, value, size in (("layer", layer, L), ("head", head, H)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
            raise InputError(f"{name} must be a whole number from 0 to {size - 1}, got {value!r}")


def search_head(readings: list[SentenceReading], trees: list[Tree] | None, layer: int, head: int,
                top: int = 50) -> HeadSearch:
    """Head (layer, head)'s `top` strongest picks over the corpus and, with trees, its relation and kind histograms."""
    _check_head(readings, layer, head)
    if trees is not None:
        check_trees(readings, trees)
    sentence, query, key, weight = [], [], [], []
    for s, reading in enumerate(readings):
        if len(reading) < 2:
            continue  # one word: nothing to attend to but itself
        keys, weights = _picks(reading.attention[layer, head])
        sentence.append(np.full(len(keys), s))
        query.append(np.arange(len(keys)))
        key.append(keys)
        weight.append(weights)
    if not sentence:
        raise InputError("every sentence is a single word: a head has nothing to pick")
    sentence, query, key, weight = (np.concatenate(a) for a in (sentence, query, key, weight))

    def pick(k: int) -> Pick:
        s, i, j = int(sentence[k]), int(query[k]), int(key[k])
        tree = trees[s] if trees is not None else None
        return Pick(s, tuple(readings[s].words), i, j, float(weight[k]),
                    pair_relation(tree, i, j) if tree else "", tree.kinds[i] if tree else "",
                    tree.kinds[j] if tree else "")

    strongest = np.argsort(-weight, kind="stable")[:max(int(top), 0)]
    picks = tuple(pick(int(k)) for k in strongest)
    if trees is None:
        return HeadSearch(layer, head, picks, len(weight), (), ())
    picked_relations, picked_kinds = Counter(), Counter()
    for s, i, j in zip(sentence.tolist(), query.tolist(), key.tolist()):
        tree = trees[s]
        picked_relations[pair_relation(tree, i, j)] += 1
        picked_kinds[f"{tree.kinds[i]} → {tree.kinds[j]}"] += 1
    base_relations, base_kinds, pairs = _base_rates(trees)
    return HeadSearch(layer, head, picks, len(weight), _shares(picked_relations, base_relations, len(weight), pairs),
                      _shares(picked_kinds, base_kinds, len(weight), pairs))
