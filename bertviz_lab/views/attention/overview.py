"""Long inputs on the Attention page: a window of tokens to read, and the whole input pooled into blocks.

A 512-token matrix has 262,144 cells: drawn whole, each row is 2 pixels and no label can be read. So a
long input is read two ways. `window` keeps the queries and keys of one token range (the matrix of a
paragraph). `pooled` sums each query's weights over blocks of keys and averages the queries of a
block, so every row still sums to 1 and the whole input fits on screen: the diagonal of local heads,
the [CLS] and [SEP] columns, sentence blocks. `head_distances` and `head_entropies` turn every head
into one number, so BERT-base's 144 heads compare at a glance where 144 matrices of 512 x 512 cannot
be drawn.
"""

from __future__ import annotations

import html
import math

import numpy as np

from bertviz_lab.views.attention.explorer import AttentionView

LONG = 64  # more tokens than this: the page offers a token range and the pooled view
BLOCKS = 64  # the pooled view's size at most: 64 x 64 blocks


def default_window(num_tokens: int) -> tuple[int, int]:
    """The first LONG tokens: (first, last), both included."""
    return 0, min(num_tokens, LONG) - 1


def block_size(num_tokens: int, blocks: int = BLOCKS) -> int:
    return max(1, math.ceil(num_tokens / blocks))


def pooled(weights: np.ndarray, size: int) -> np.ndarray:
    """(T, T) weights -> (B, B): block (a, b) is the mean over the queries of block a of their total weight
    on the keys of block b, so each row of blocks sums to 1 as each row of weights does."""
    T = weights.shape[-1]
    B = math.ceil(T / size)
    padded = np.zeros((B * size, B * size), dtype=np.float64)
    padded[:T, :T] = weights
    sums = padded.reshape(B, size, B, size).sum(axis=3)  # (B, size, B): each query's weight per key block
    counts = np.minimum(size, T - np.arange(B) * size)  # queries in each block (the last may be short)
    return sums.sum(axis=1) / counts[:, None]


def block_labels(view: AttentionView, size: int) -> list[str]:
    """One label per block for a plotly axis: its token range and first token ("16–23 cat"), HTML-escaped
    (RoBERTa's "<s>" would otherwise be read as a tag and vanish)."""
    T = len(view.tokens)
    return [f"{a}–{min(a + size, T) - 1} {html.escape(view.tokens[a])}" if size > 1 else view.axis_labels[a]
            for a in range(0, T, size)]


def head_distances(view: AttentionView) -> np.ndarray:
    """(L, H): how far each head looks, in tokens: Σ_j w_ij |i − j|, averaged over the queries."""
    T = view.weights.shape[-1]
    offsets = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])  # (T, T)
    return (view.weights * offsets).sum(-1).mean(-1)


def head_entropies(view: AttentionView) -> np.ndarray:
    """(L, H): how spread each head's attention is, in nats (0: one key; log T: all keys alike), averaged
    over the queries."""
    w = view.weights.astype(np.float64)
    return -(w * np.log(np.where(w > 0, w, 1.0))).sum(-1).mean(-1)
