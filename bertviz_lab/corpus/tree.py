"""A dependency tree over a sentence's words: each word's head and its Universal Dependencies relation.

`Tree` is what the story world's treebank (trees.py) writes and what a CoNLL-U treebank is read into
(syntax/treebank.py): words split on spaces (the full stop and the comma are words of their own), 0-based
word indices, `heads[i]` the index of word i's head or -1 for the root, `relations[i]` its label (det, nsubj,
obj, obl, case, amod, punct, root, ...), `upos[i]` its part of speech (DET, NOUN, VERB, ...), `kinds[i]` what
the lexicon says the word is (pet, fruit, town, feeling, ...; the part of speech in lower case where it says
nothing), and `coref` the (pronoun, antecedent) pairs. The checks here are the ones every tree must pass:
one root, every head a word of the sentence, no cycle (and, for the story world's trees, projective).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from bertviz_lab.errors import InputError

PUNCT = "punct"


@dataclass(frozen=True)
class Tree:
    words: tuple[str, ...]
    heads: tuple[int, ...]  # -1 for the root, else a word index
    relations: tuple[str, ...]
    upos: tuple[str, ...]
    kinds: tuple[str, ...] = ()  # the lexicon's category per word; () = the part of speech, lower case
    coref: tuple[tuple[int, int], ...] = ()  # (pronoun, antecedent's head word)
    construction: str = ""  # which rule of the grammar wrote it ("" for a treebank's)

    def __post_init__(self):
        n = len(self.words)
        if not (len(self.heads) == len(self.relations) == len(self.upos) == n) or n == 0:
            raise InputError("a tree needs one head, one relation and one part of speech per word")
        if not self.kinds:
            object.__setattr__(self, "kinds", tuple(u.lower() for u in self.upos))
        problem = check(self.heads)
        if problem:
            raise InputError(f"{problem}: {self.text!r}")

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def __len__(self) -> int:
        return len(self.words)

    @property
    def root(self) -> int:
        return self.heads.index(-1)

    def base_relation(self, i: int) -> str:
        """The relation without its subtype: acl:relcl -> acl, obl:tmod -> obl (the labels compared over corpora)."""
        return self.relations[i].split(":")[0]

    @property
    def punct(self) -> np.ndarray:
        """(W,) bool: the words that are punctuation (left out of UUAS and root accuracy, as Hewitt & Manning do)."""
        return np.array([r == PUNCT or u == "PUNCT" for r, u in zip(self.relations, self.upos)])

    def edges(self, skip_punct: bool = False) -> set[frozenset[int]]:
        """The tree's undirected edges {dependent, head}."""
        punct = self.punct
        return {frozenset((i, h)) for i, h in enumerate(self.heads)
                if h >= 0 and not (skip_punct and (punct[i] or punct[h]))}

    def distances(self) -> np.ndarray:
        """(W, W) path lengths in the tree (edges between words), by breadth-first search from every word."""
        n = len(self)
        near: list[list[int]] = [[] for _ in range(n)]
        for i, h in enumerate(self.heads):
            if h >= 0:
                near[i].append(h)
                near[h].append(i)
        out = np.zeros((n, n), dtype=np.int64)
        for start in range(n):
            seen = {start: 0}
            queue = deque([start])
            while queue:
                at = queue.popleft()
                for nxt in near[at]:
                    if nxt not in seen:
                        seen[nxt] = seen[at] + 1
                        queue.append(nxt)
            out[start] = [seen[j] for j in range(n)]
        return out

    def depths(self) -> np.ndarray:
        """(W,) each word's number of edges to the root."""
        return self.distances()[self.root]

    def projective(self) -> bool:
        """No two arcs cross when drawn above the sentence."""
        arcs = [tuple(sorted((i, h))) for i, h in enumerate(self.heads) if h >= 0]
        return not any(a < c < b < d for a, b in arcs for c, d in arcs)

    def to_conllu(self) -> str:
        """The tree as CoNLL-U lines (1-based ids, head 0 for the root), one blank line after it."""
        lines = [f"# text = {self.text}"]
        for i, word in enumerate(self.words):
            lines.append("\t".join((str(i + 1), word, "_", self.upos[i], "_", "_", str(self.heads[i] + 1),
                                    self.relations[i], "_", "_")))
        return "\n".join(lines) + "\n\n"


def check(heads: tuple[int, ...] | list[int]) -> str:
    """What is wrong with a head list ("" when it is a tree): no root or several, a head out of range, a cycle."""
    n = len(heads)
    roots = [i for i, h in enumerate(heads) if h == -1]
    if len(roots) != 1:
        return f"a tree has one root; this one has {len(roots)}"
    for i, h in enumerate(heads):
        if h == i or not -1 <= h < n:
            return f"word {i + 1}'s head ({h + 1}) is not another word of the sentence"
    for i in range(n):
        seen, at = set(), i
        while at != -1:
            if at in seen:
                return f"the heads go round in a cycle through word {at + 1}"
            seen.add(at)
            at = heads[at]
    return ""


@dataclass
class Builder:
    """Words added left to right, each linked to its head once the head exists (handles are word indices)."""

    words: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    upos: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    coref: list[tuple[int, int]] = field(default_factory=list)

    def add(self, word: str, upos: str, kind: str = "") -> int:
        self.words.append(word)
        self.heads.append(-2)  # not yet linked
        self.relations.append("")
        self.upos.append(upos)
        self.kinds.append(kind or upos.lower())
        return len(self.words) - 1

    def link(self, child: int, head: int, relation: str) -> None:
        self.heads[child] = head
        self.relations[child] = relation

    def tree(self, construction: str) -> Tree:
        unlinked = [self.words[i] for i, h in enumerate(self.heads) if h == -2]
        if unlinked:
            raise ValueError(f"words without a head in {' '.join(self.words)!r}: {unlinked}")
        return Tree(tuple(self.words), tuple(self.heads), tuple(self.relations), tuple(self.upos),
                    tuple(self.kinds), tuple(self.coref), construction)
