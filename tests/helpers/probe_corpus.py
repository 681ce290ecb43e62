"""Random trees hidden in random vectors: a corpus for the structural probe. Moved here from
tests/syntax/test_probe.py, which uses them too."""

from __future__ import annotations

import numpy as np

from bertviz_lab.corpus.tree import Tree


def random_tree(rng: np.random.Generator, words: int) -> Tree:
    """A random projective tree over `words` words, then a full stop attached to the root."""
    heads = [0] * words

    def attach(lo: int, hi: int, parent: int) -> None:  # the words lo..hi-1 form one subtree under `parent`
        if lo < hi:
            head = int(rng.integers(lo, hi))
            heads[head] = parent
            attach(lo, head, head)
            attach(head + 1, hi, head)

    attach(0, words, -1)
    root = heads.index(-1)
    relations = ["root" if h == -1 else "dep" for h in heads] + ["punct"]
    return Tree(tuple(f"w{i}" for i in range(words)) + (".",), tuple(heads) + (root,), tuple(relations),
                ("NOUN",) * words + ("PUNCT",))


def hidden_tree_vectors(rng: np.random.Generator, tree: Tree, layers: int, d: int, noise: float) -> np.ndarray:
    """(layers, W, d) vectors where the tree is recoverable: each word's first 16 coordinates are the sum of one
    orthonormal vector per word on its path from the root (root excluded), so ||h_i - h_j||^2 is their tree distance
    and ||h_i||^2 its depth; the other coordinates are nuisance, and everything is rotated at random."""
    w = len(tree)
    steps = np.linalg.qr(rng.normal(size=(16, 16)))[0][:w]  # (W, 16) orthonormal rows
    paths = np.zeros((w, w))  # paths[i, v] = 1 where v is on i's path from the root, the root left out
    for i in range(w):
        at = i
        while tree.heads[at] != -1:
            paths[i, at] = 1
            at = tree.heads[at]
    out = np.empty((layers, w, d))
    for layer in range(layers):
        signal = paths @ steps + noise * rng.normal(size=(w, 16))
        out[layer] = np.concatenate([signal, 2 * rng.normal(size=(w, d - 16))], axis=1) @ ROTATION[:d, :d]
    return out

ROTATION = np.linalg.qr(np.random.default_rng(99).normal(size=(64, 64)))[0]


def corpus(seed: int, sentences: int, d: int = 32, layers: int = 1, noise: float = 0.05, hidden: bool = True):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(sentences):
        tree = random_tree(rng, int(rng.integers(5, 11)))
        vectors = (hidden_tree_vectors(rng, tree, layers, d, noise) if hidden
                   else rng.normal(size=(layers, len(tree), d)))
        out.append((vectors, tree))
    return out
