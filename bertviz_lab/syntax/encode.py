"""A corpus read by the model once: each sentence's attention and vectors per word, ready for the syntax pages.

`read_corpus` tokenizes every sentence (a `Tree`, a list of words, or a text split on spaces), finds each word's
tokens (`words.word_groups`), runs the model in eval mode without gradients on padded batches (one traced
forward per batch; [PAD] keys get weight 0, so a padded sentence reads as it would alone) and keeps, per
sentence, the word-level attention (L, H, W, W) and, when asked, the word vectors (L + 1, W, d). The pooling
from tokens to words runs on the model's device, batch by batch, so only word-sized arrays come back.
Sentences are batched by length (less padding) and returned in the order given.

A sentence the model cannot read (empty, longer than the model's positions, or with a word of no token) is an
InputError that names the sentence's number (1-based): a reading per sentence, in order, is what the relation
scores and the search zip with the trees, and a corpus silently missing sentences would score other ones.
A treebank reader leaves out over-long sentences itself, and says so, before it calls this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.words import check_words, encode_words, pool, pooling, word_groups


@dataclass(frozen=True)
class SentenceReading:
    """One sentence as the model read it, word by word. W words, L layers, H heads, d hidden."""

    words: tuple[str, ...]
    tokens: tuple[str, ...]  # the encoding's tokens, [CLS] and [SEP] included
    groups: tuple[tuple[int, ...], ...]  # each word's token positions
    attention: np.ndarray  # (L, H, W, W) float32: query word -> key word (`words.word_attention`)
    vectors: np.ndarray | None = None  # (L + 1, W, d) float32: embeddings, then each layer; None unless asked

    def __len__(self) -> int:
        return len(self.words)


def sentence_words(sentence) -> tuple[str, ...]:
    """A sentence's words: a Tree's, a list's, or a text's split on spaces."""
    if isinstance(sentence, Tree):
        return sentence.words
    return check_words(sentence.split() if isinstance(sentence, str) else sentence)


Encoded = tuple[tuple[str, ...], Encoding, list[tuple[int, ...]]]  # (words, encoding, each word's tokens)


def _encode(tokenizer: WordPieceTokenizer, max_tokens: int, number: int, sentence) -> Encoded:
    """(words, encoding, word groups) of sentence `number`; its InputError says which sentence."""
    try:
        words = sentence_words(sentence)
        encoding = encode_words(tokenizer, words, max_tokens)
        return words, encoding, word_groups(tokenizer, encoding, words)
    except InputError as exc:
        raise InputError(f"sentence {number}: {exc}") from None


def _padded(encoded: list[Encoded], pad_id: int, device) -> dict[str, torch.Tensor]:
    """The batch's ids, segments, attention mask (B, T) and pooling matrices (B, W, T), right-padded."""
    B, T = len(encoded), max(len(e) for _, e, _ in encoded)
    W = max(len(g) for _, _, g in encoded)
    ids = np.full((B, T), pad_id, dtype=np.int64)
    segments, mask = np.zeros((B, T), dtype=np.int64), np.zeros((B, T), dtype=np.int64)
    mean, total = np.zeros((B, W, T), dtype=np.float32), np.zeros((B, W, T), dtype=np.float32)
    for row, (_, e, groups) in enumerate(encoded):
        ids[row, :len(e)], segments[row, :len(e)], mask[row, :len(e)] = e.ids, e.segment_ids, 1
        mean[row, :len(groups), :len(e)], total[row, :len(groups), :len(e)] = pooling(groups, len(e))
    arrays = dict(ids=ids, segments=segments, mask=mask, mean=mean, total=total)
    return {name: torch.from_numpy(a).to(device) for name, a in arrays.items()}


@torch.no_grad()
def _read_batch(model, encoded: list[Encoded], pad_id: int, vectors: bool) -> list[SentenceReading]:
    """One traced forward over a batch, pooled to words on the model's device."""
    device = next(model.parameters()).device
    batch = _padded(encoded, pad_id, device)
    out = model(batch["ids"], batch["segments"], batch["mask"], trace=True, encoder_only=True)
    weights = torch.stack([s.weights.float() for s in out.trace], dim=1)  # (B, L, H, T, T)
    mean, total = batch["mean"], batch["total"]  # (B, W, T)
    attention = pool(weights, mean[:, None, None], total[:, None, None]).cpu().numpy()  # (B, L, H, W, W)
    hidden = None
    if vectors:
        hidden = (mean[:, None] @ torch.stack([h.float() for h in out.hidden_states], dim=1)).cpu().numpy()
    readings = []
    for row, (words, encoding, groups) in enumerate(encoded):
        n = len(words)
        readings.append(SentenceReading(
            words, tuple(encoding.tokens), tuple(groups), np.ascontiguousarray(attention[row, :, :, :n, :n]),
            None if hidden is None else np.ascontiguousarray(hidden[row, :, :n])))  # (L + 1, W, d)
    return readings


def check_trees(readings: list[SentenceReading], trees: list[Tree]) -> None:
    """An InputError unless `trees` are the sentences `readings` read, one for one and word for word."""
    if len(readings) != len(trees):
        raise InputError(f"{len(readings)} readings for {len(trees)} trees: they must be the same sentences")
    if not trees:
        raise InputError("there are no sentences")
    for n, (reading, tree) in enumerate(zip(readings, trees), start=1):
        if tuple(reading.words) != tuple(tree.words):
            raise InputError(f"sentence {n}'s reading and tree have different words: {tree.text[:60]!r}")


def read_corpus(model, tokenizer: WordPieceTokenizer, sentences: Sequence, batch_size: int = 32,
                progress: Callable[[int, int], None] | None = None, *, vectors: bool = False) -> list[SentenceReading]:
    """Every sentence's word attention (and with `vectors`, word vectors), in the order given.

    `sentences`: Trees, lists of words or texts (split on spaces). `progress(done, total)` after each batch.
    An InputError names the first sentence the model cannot read."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    sentences = list(sentences)
    if not sentences:
        raise InputError("there are no sentences to read")
    max_tokens = model.config.max_tokens
    encoded = [_encode(tokenizer, max_tokens, n, s) for n, s in enumerate(sentences, start=1)]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][1]))  # similar lengths share a batch
    readings: list[SentenceReading | None] = [None] * len(encoded)
    training = model.training
    model.eval()
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            for i, reading in zip(chunk, _read_batch(model, [encoded[i] for i in chunk], tokenizer.pad_id, vectors)):
                readings[i] = reading
            if progress is not None:
                progress(min(start + batch_size, len(order)), len(order))
    finally:
        model.train(training)
    return readings
