"""From tokens back to a treebank's words: which tokens make each word, and attention and vectors per word.

A gold tree speaks of words ("unbelievable"), the model of tokens (un ##believ ##able, RoBERTa's Ġun bel ...,
SentencePiece's ▁ un bel ...). `word_groups` finds each word's tokens by character offsets into the text the
words make (joined by single spaces), the offsets every family's tokenizer reports into the original text, so a
lower-casing or accent-stripping normalizer changes nothing; a piece that stands only for the space before a word
(a lone Ġ or ▁) belongs to that word. `word_attention` turns token attention into word attention as Clark et al.
(2019) do in their `bpe_utils.py`: attention TO a split word is the sum over its pieces, attention FROM it the
mean over its pieces; [CLS], [SEP] and the like belong to no word and are dropped, without renormalizing the rows.
`word_vectors` averages a word's pieces.
"""

from __future__ import annotations

import numpy as np

from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError


def check_words(words) -> tuple[str, ...]:
    """The words as a tuple; an InputError for no words, or a word that is empty or holds a space."""
    words = tuple(words)
    if not words:
        raise InputError("a sentence has no words")
    for n, word in enumerate(words, start=1):
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise InputError(f"word {n} ({word!r}) is not a word: words are split on spaces")
    return words


def encode_words(tokenizer: WordPieceTokenizer, words, max_tokens: int) -> Encoding:
    """tokenizer.encode(" ".join(words)) at most `max_tokens` long. Words that hold only characters the tokenizer
    drops (a zero-width space) are refused in words of their own: the tokenizer's message names "Text A", a box the
    syntax pages do not have, and the words are checked, so that is the one thing its encode can refuse here."""
    words = check_words(words)
    try:
        return tokenizer.encode(" ".join(words), None, max_length=max_tokens)
    except InputError:
        raise InputError("it has no characters the tokenizer can read (only invisible or control characters)") from None


def _owners(words: tuple[str, ...]) -> list[int]:
    """For each character of " ".join(words), the index of its word, -1 for the spaces between them."""
    owner: list[int] = []
    for i, word in enumerate(words):
        owner += ([-1] if i else []) + [i] * len(word)
    return owner


def word_groups(tokenizer: WordPieceTokenizer, encoding: Encoding, words) -> list[tuple[int, ...]]:
    """Each word's token positions, in order, in `encoding` = tokenizer.encode(" ".join(words)) (first text only).

    A token belongs to the word of its first character; a token of spaces only (a lone Ġ or ▁ before a word)
    belongs to the word of the next token. A sentence cut by truncation, or a word with no token of its own (only
    characters the tokenizer drops), is an InputError. `tokenizer` is the one that made `encoding`."""
    words = check_words(words)
    if encoding.truncated:
        raise InputError(f"the sentence is {len(encoding) + encoding.truncated} tokens long; this model reads at "
                         f"most {len(encoding)}")
    owner = _owners(words)
    groups: list[list[int]] = [[] for _ in words]
    pending: list[int] = []  # space-only tokens waiting for the word they mark the start of
    for position, ((start, end), seq) in enumerate(zip(encoding.offsets, encoding.sequence_ids)):
        if seq != 0:
            continue
        chars = range(start, max(end, start + 1))  # a zero-width token (RoBERTa's lone Ġ) looks at where it stands
        word = next((owner[c] for c in chars if c < len(owner) and owner[c] >= 0), -1)
        if word < 0:
            pending.append(position)
            continue
        groups[word] += pending + [position]
        pending = []
    for n, (word, group) in enumerate(zip(words, groups), start=1):
        if not group:
            raise InputError(f"word {n} ({word!r}) has no token this model reads")
    return [tuple(g) for g in groups]


def pooling(groups: list[tuple[int, ...]], T: int) -> tuple[np.ndarray, np.ndarray]:
    """(W, T) float32 matrices: `mean` averages a word's pieces (1/n on each), `total` adds them up (1 on each)."""
    total = np.zeros((len(groups), T), dtype=np.float32)
    for w, positions in enumerate(groups):
        total[w, list(positions)] = 1
    return total / total.sum(1, keepdims=True), total


def pool(weights, mean, total):
    """Token attention to word attention with `pooling`'s matrices, numpy or torch, batched or not:
    (..., T, T) -> (..., W, W), queries averaged (mean @), keys summed (@ total^T)."""
    return mean @ weights @ total.swapaxes(-1, -2)


def word_attention(weights: np.ndarray, groups: list[tuple[int, ...]]) -> np.ndarray:
    """Token attention (L, H, T, T) -> word attention (L, H, W, W): rows (queries) averaged over a word's pieces,
    columns (keys) summed over them; tokens of no word dropped, rows not renormalized."""
    mean, total = pooling(groups, weights.shape[-1])
    return pool(weights, mean, total).astype(weights.dtype, copy=False)


def word_vectors(hidden: np.ndarray, groups: list[tuple[int, ...]]) -> np.ndarray:
    """Token vectors (L + 1, T, d) -> word vectors (L + 1, W, d): each word the mean of its pieces."""
    mean, _ = pooling(groups, hidden.shape[-2])
    return (mean @ hidden).astype(hidden.dtype, copy=False)  # (W, T) @ (L + 1, T, d)
