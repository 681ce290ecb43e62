"""The corpus's word vectors at every hidden state, read once by one model and shared by every probe of every task.

`read_features` is the Syntax page's reading (syntax/encode.py `read_corpus` with vectors): each word's tokens are
averaged, on the model's device, batch by batch, and only word-sized arrays come back, stacked sentence after
sentence so a task's examples are rows of one array. The reading equals transformers' hidden states word for word
(tests/syntax/test_encode.py and tests/probing/test_features.py check it for every family).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import Features
from bertviz_lab.syntax.encode import read_corpus


def stacked(vectors: Sequence[np.ndarray]) -> Features:
    """Features from each sentence's (L + 1, W, d) word vectors, in order."""
    if not vectors:
        raise InputError("there are no sentences to probe")
    counts = np.array([v.shape[1] for v in vectors], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rows = np.concatenate([np.asarray(v, dtype=np.float32).transpose(1, 0, 2) for v in vectors])  # (n_words, L+1, d)
    sentence = np.repeat(np.arange(len(vectors), dtype=np.int64), counts)
    return Features(np.ascontiguousarray(rows), sentence, start)


def read_features(model, tokenizer, trees: Sequence[Tree], progress: Callable[[int, int], None] | None = None,
                  batch_size: int = 32) -> Features:
    """Every word of `trees` at every hidden state of `model` (0 = the embeddings' output); `progress(done, total)`
    after each batch. An InputError names the first sentence the model cannot read."""
    readings = read_corpus(model, tokenizer, list(trees), batch_size, progress, vectors=True)
    return stacked([r.vectors for r in readings])
