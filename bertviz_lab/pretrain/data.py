"""Training data: NSP sentence pairs from documents, tokenized, padded and masked into batches.

A batch is a pure function of (seed, step, rank): resuming a run or sharding it
over DDP ranks needs no data-loader state, only the step number, and the same
seed always gives the same batches.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from bertviz_lab import corpus
from bertviz_lab.bert.losses import IS_NEXT, NOT_NEXT
from bertviz_lab.bert.masking import mask_tokens
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

PUNCTUATION = list(".,?!;:'\"()-")


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) after masking
    token_type_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor | None  # (B, T), None when nothing is padded
    labels: torch.Tensor  # (B, T) original ids at masked positions, IGNORE_INDEX (-100) elsewhere
    nsp_labels: torch.Tensor | None  # (B,) 0 = IsNext, 1 = NotNext; None without NSP
    tokens: int  # real (non-padding) tokens in the batch

    def to(self, device) -> Batch:
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.input_ids), move(self.token_type_ids), move(self.attention_mask),
                     move(self.labels), move(self.nsp_labels), self.tokens)


def builtin_vocabulary() -> list[str]:
    """Whole words of the built-in world, plus letters and digits as WordPiece fallbacks.

    Every corpus word is one token, so predictions read as words; a word a student
    types that the world lacks still splits into letter pieces instead of [UNK].
    """
    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    tokens = list(SPECIAL_TOKENS) + PUNCTUATION + chars + ["##" + c for c in chars]
    seen = set(tokens)
    return tokens + [w for w in corpus.vocabulary() if w not in seen]


def _mix(*parts: int) -> int:
    """A stable 63-bit seed from integers (Python's hash() of ints is stable, but be explicit)."""
    value = 0x9E3779B97F4A7C15
    for p in parts:
        value = (value ^ (p & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
    return value >> 1


class DocumentSource:
    """Where documents come from: the built-in generator or a user's fixed list."""

    def __init__(self, documents: Sequence[list[str]] | None = None, seed: int = 0):
        self.documents = [d for d in documents if d] if documents is not None else None
        self.seed = seed

    def sample(self, n: int, key: int) -> list[list[str]]:
        """n documents for this key (a step/rank mix), deterministic."""
        if self.documents is None:
            return corpus.StoryGenerator(_mix(self.seed, key)).stories(n)
        rng = random.Random(_mix(self.seed, key))
        return [self.documents[rng.randrange(len(self.documents))] for _ in range(n)]


def make_pair(doc: list[str], other: list[str], rng: random.Random, nsp: bool) -> tuple[str, str | None, int]:
    """Text A, text B and the NSP label from one document (and a random other one for NotNext)."""
    if not nsp or len(doc) < 2:
        start = rng.randrange(len(doc))
        return " ".join(doc[start:start + 3]), None, IS_NEXT
    split = rng.randrange(1, len(doc))
    text_a = " ".join(doc[max(0, split - 2):split])  # up to two sentences: pronouns find referents
    if rng.random() < 0.5:
        return text_a, " ".join(doc[split:split + 2]), IS_NEXT
    start = rng.randrange(len(other))
    return text_a, " ".join(other[start:start + 2]), NOT_NEXT


def collate(tokenizer: WordPieceTokenizer, pairs, seq_len: int) -> tuple[torch.Tensor, ...]:
    """Tokenize pairs and pad to the longest: ids, segment ids, attention mask (B, T), NSP labels (B,)."""
    encodings = tokenizer.encode_ids([(a, b) for a, b, _ in pairs], max_length=seq_len)
    T = max(len(e) for e, _ in encodings)
    # padded as lists and made into tensors once: one small tensor per row and field cost 3 ms a batch
    ids = torch.tensor([e + [tokenizer.pad_id] * (T - len(e)) for e, _ in encodings])
    segments = torch.tensor([s + [0] * (T - len(s)) for _, s in encodings])
    attention = torch.tensor([[1] * len(e) + [0] * (T - len(e)) for e, _ in encodings])
    return ids, segments, attention, torch.tensor([label for _, _, label in pairs])


def batch_maker(source: DocumentSource, tokenizer: WordPieceTokenizer, **settings) -> Callable[[int], Batch]:
    """make_batch with everything but the step fixed: a function of the step alone."""
    return functools.partial(_batch_at, source, tokenizer, settings)


def _batch_at(source: DocumentSource, tokenizer: WordPieceTokenizer, settings: dict, step: int) -> Batch:
    return make_batch(source, tokenizer, step=step, **settings)


def make_batch(source: DocumentSource, tokenizer: WordPieceTokenizer, *, step: int, batch_size: int,
               seq_len: int, nsp: bool, mask_rate: float, random_tokens: str = "vocabulary", rank: int = 0,
               stream: int = 0) -> Batch:
    """The batch for one step (and rank); `stream` separates training from held-out batches.

    random_tokens: where the random replacements come from (see `masking.RANDOM_TOKENS`).
    """
    key = _mix(stream, step, rank)
    docs = source.sample(2 * batch_size, key)
    rng = random.Random(key)
    pairs = [make_pair(docs[i], docs[batch_size + i], rng, nsp) for i in range(batch_size)]
    ids, segments, attention, nsp_labels = collate(tokenizer, pairs, seq_len)
    generator = torch.Generator().manual_seed(key)
    masked = mask_tokens(ids, special_ids=tokenizer.special_ids, vocab_size=tokenizer.vocab_size,
                         mask_id=tokenizer.mask_id, generator=generator, mask_rate=mask_rate,
                         attention_mask=attention, random_tokens=random_tokens)
    padded = bool((attention == 0).any())
    return Batch(masked.input_ids, segments, attention if padded else None, masked.labels,
                 nsp_labels if nsp else None, int(attention.sum()))
