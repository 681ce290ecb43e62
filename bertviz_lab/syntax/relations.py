"""Which heads follow which dependency relation: Clark, Khandelwal, Levy & Manning (2019), "What Does BERT Look At?".

A head is read as a parser, one word at a time, as in their notebook (`attn_head_predictor`, `evaluate_predictor`):
with attention to itself set to 0, a word's predicted head is

    dependent → head   the word it attends to most (the argmax of its row)
    head → dependent   the word that attends to it most (the argmax of its column: their "transpose" mode)

and the head's accuracy on a relation is the share of that relation's dependents whose prediction is the gold
head. Every word but the root counts (it has no head word), each under its relation; a subtype (obl:tmod,
nmod:poss, acl:relcl) is a relation of its own when it has MIN_COUNT dependents or more (a temporal oblique's head
is found by other heads than a place's), else it is counted under its base relation (`Tree.base_relation`) and
`Relations.merged` says so, for the page to say it (Clark et al. always merge them); "all" pools them, punctuation included, as their "all" does (their
special case for possessives, which reads the word after "'s", is left out; their "all" also counts root words,
which an attention head can never get right, so the two "all" figures differ). The baseline is their
`offset_predictor`: the head is always the word `offset` away (past either end it is wrong), at every offset
the corpus has (they tried -3..2), and each relation keeps its best one, which is its most common relative position.
Word attention is Clark's too (`words.word_attention`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.encode import SentenceReading, check_trees

ALL = "all"
DIRECTIONS = ("dependent → head", "head → dependent")
MIN_COUNT = 10  # fewer dependents than this: the best of L x H heads on them is mostly luck, so no verdict is given


class Example(NamedTuple):
    """One dependent as the best head reads it: sentence index, dependent, gold head and predicted head (words)."""

    sentence: int
    dependent: int
    head: int
    predicted: int


@dataclass(frozen=True)
class Relations:
    """Every head's accuracy per relation and direction over a corpus. R relations, L layers, H heads."""

    relations: list[str]  # "all" first, then by count, descending (ties by name)
    counts: np.ndarray  # (R,) dependents per relation
    accuracy: np.ndarray  # (R, 2, L, H): direction 0 dependent → head, 1 head → dependent
    baseline: dict[str, tuple[int, float]]  # relation -> (best offset, its accuracy)
    offsets: tuple[int, ...]  # every relative position (head - dependent) of the corpus, ascending
    offset_accuracy: np.ndarray  # (R, len(offsets)): the baseline at each; on a tie the first (leftmost) wins
    hits: dict[tuple[str, int], tuple[Example, ...]]  # (relation, direction) -> where its best head is right
    misses: dict[tuple[str, int], tuple[Example, ...]]  # ... and where it is wrong
    merged: dict[str, int]  # subtype -> its dependents, for each subtype too rare to stand alone (under its base)

    def best(self, relation: str, direction: int | str) -> tuple[tuple[int, int], float]:
        """((layer, head), accuracy) of the head that follows `relation` best in `direction` (index or name)."""
        scores = self.accuracy[self.index(relation), _direction(direction)]  # (L, H)
        layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
        return (int(layer), int(head)), float(scores[layer, head])

    def index(self, relation: str) -> int:
        if relation not in self.relations:
            raise InputError(f"no dependent has the relation {relation!r}; the corpus has "
                             f"{', '.join(self.relations)}")
        return self.relations.index(relation)


def _direction(direction: int | str) -> int:
    if direction in DIRECTIONS:
        return DIRECTIONS.index(direction)
    if direction in (0, 1) and not isinstance(direction, bool):
        return int(direction)
    raise InputError(f"direction must be 0, 1 or one of {', '.join(DIRECTIONS)}; got {direction!r}")


def predictions(attention: np.ndarray) -> np.ndarray:
    """(L, H, W, W) word attention -> (2, L, H, W) each word's predicted head in both directions, self excluded."""
    attn = attention.copy()
    W = attn.shape[-1]
    attn[..., np.arange(W), np.arange(W)] = 0
    return np.stack([attn.argmax(-1), attn.argmax(-2)])  # row argmax: attends to most; column: attended by most


@dataclass(frozen=True)
class _Dependents:
    """Every non-root word of the corpus, N of them, side by side."""

    sentence: np.ndarray  # (N,)
    word: np.ndarray  # (N,)
    head: np.ndarray  # (N,) gold head
    relation: list[str]  # (N,)
    predicted: np.ndarray  # (2, L, H, N)


def _dependents(readings: list[SentenceReading], trees: list[Tree]) -> _Dependents:
    sentence, word, head, relation, predicted = [], [], [], [], []
    for s, (reading, tree) in enumerate(zip(readings, trees)):
        words = np.array([i for i, h in enumerate(tree.heads) if h >= 0], dtype=np.int64)
        sentence.append(np.full(len(words), s))
        word.append(words)
        head.append(np.array(tree.heads, dtype=np.int64)[words])
        relation += [tree.relations[i] for i in words]
        predicted.append(predictions(reading.attention)[..., words].astype(np.int16))  # W <= 512
    return _Dependents(np.concatenate(sentence), np.concatenate(word), np.concatenate(head), relation,
                       np.concatenate(predicted, axis=-1))


def _examples(deps: _Dependents, chosen: np.ndarray, predicted: np.ndarray, n: int) -> tuple[tuple[Example, ...], ...]:
    """The first `n` hits and the first `n` misses among the `chosen` dependents ((N,) bool), as one head
    predicts them (`predicted`: (N,) each dependent's predicted head)."""
    hit = predicted == deps.head
    out = []
    for want in (True, False):
        where = np.flatnonzero(chosen & (hit == want))[:n]
        out.append(tuple(Example(int(deps.sentence[k]), int(deps.word[k]), int(deps.head[k]), int(predicted[k]))
                         for k in where))
    return tuple(out)


def relations_by_head(readings: list[SentenceReading], trees: list[Tree], examples: int = 5) -> Relations:
    """Every head's accuracy per relation, both directions, with the offset baseline and, for each relation and
    direction, up to `examples` dependents its best head gets right and as many it gets wrong."""
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise InputError(f"examples must be a whole number of at least 0, got {examples!r}")
    check_trees(readings, trees)
    deps = _dependents(readings, trees)
    if not deps.relation:
        raise InputError("these sentences have no word with a head: every one is a single root")
    labels, n = np.unique(deps.relation, return_counts=True)
    merged = {str(r): int(c) for r, c in zip(labels, n) if ":" in r and c < MIN_COUNT}
    deps.relation[:] = [r.split(":")[0] if r in merged else r for r in deps.relation]
    names, n = np.unique(deps.relation, return_counts=True)
    order = sorted(range(len(names)), key=lambda k: (-n[k], names[k]))
    relations = [ALL] + [str(names[k]) for k in order]
    rel = np.array([relations.index(r) for r in deps.relation])  # (N,)
    member = np.zeros((len(deps.relation), len(relations)), dtype=np.float32)  # (N, R): 1 where the word counts
    member[np.arange(len(rel)), rel] = 1
    member[:, 0] = 1
    counts = member.sum(0).astype(np.int64)  # (R,)
    correct = (deps.predicted == deps.head).astype(np.float32)  # (2, L, H, N); float32 counts exactly to 2**24
    accuracy = np.moveaxis(correct @ member, -1, 0) / counts[:, None, None, None]  # (R, 2, L, H), float64
    offsets = tuple(int(o) for o in np.unique(deps.head - deps.word))  # never 0: no word heads itself
    guesses = deps.word[None] + np.array(offsets)[:, None]  # (O, N): out of the sentence never equals a head
    offset_accuracy = ((guesses == deps.head[None]).astype(np.float32) @ member).T / counts[:, None]  # (R, O)
    best = offset_accuracy.argmax(1)
    baseline = {r: (offsets[b], float(offset_accuracy[k, b])) for k, (r, b) in enumerate(zip(relations, best))}
    hits, misses = {}, {}
    for k, name in enumerate(relations):
        chosen = member[:, k] > 0
        for d in range(2):
            layer, head = np.unravel_index(int(np.argmax(accuracy[k, d])), accuracy.shape[2:])
            hits[name, d], misses[name, d] = _examples(deps, chosen, deps.predicted[d, layer, head], examples)
    return Relations(relations, counts, accuracy, baseline, offsets, offset_accuracy, hits, misses, merged)
