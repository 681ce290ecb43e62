"""What the model reads: its tokens, the words it has no token for, and the world its vocabulary knows.

A learner types words; the model reads tokens. `reading` lines the two up so a page can show the
tokens as they are (pieces marked the family's way: `##` for WordPiece, `Ġ` / `▁` at a word's start for
byte-level BPE and SentencePiece), name the words the model reads in many pieces or as its unknown
token, and say when the vocabulary is the lab's story world (every model trained here on the built-in
corpus), which has a token for each of its own words and letters for everything else.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.pretrain.data import builtin_vocabulary
from bertviz_lab.views.inputs import words

MANY_PIECES = 3  # a word in this many pieces or more is read from fragments ("cap ##i ##t ##a ##l")
MAX_LISTED = 6  # flagged words named on the page; the rest are counted


@dataclass(frozen=True)
class SplitWord:
    text: str  # as typed
    pieces: tuple[str, ...]  # as the model reads it


@dataclass(frozen=True)
class Reading:
    tokens: tuple[str, ...]  # every token the model reads, its special tokens included
    split: tuple[SplitWord, ...]  # words read in MANY_PIECES pieces or more
    unknown: tuple[str, ...]  # words with a piece the model reads as its unknown token
    story_world: bool  # the vocabulary is the built-in story world's, so real English is mostly pieces
    vocab_size: int


@functools.cache
def _story_vocabulary() -> tuple[str, ...]:
    return tuple(builtin_vocabulary())


def is_story_world(tokenizer: WordPieceTokenizer) -> bool:
    """True if the tokenizer's vocabulary is the one the lab builds for its built-in corpus."""
    story = _story_vocabulary()
    return tokenizer.vocab_size == len(story) and tuple(tokenizer.vocab) == story


def reading(tokenizer: WordPieceTokenizer, encoding: Encoding, text_a: str, text_b: str | None = None) -> Reading:
    """The tokens of `encoding` (masks applied) and the words of the typed text it reads badly."""
    split, unknown = [], []
    for word in words(encoding, text_a, text_b, tokenizer.mask_token):
        pieces = tuple(encoding.tokens[p] for p in word.positions)
        if word.is_mask:
            continue
        if tokenizer.unk_token in pieces:
            unknown.append(word.text)
        elif len(pieces) >= MANY_PIECES:
            split.append(SplitWord(word.text, pieces))
    return Reading(tuple(encoding.tokens), tuple(split), tuple(unknown), is_story_world(tokenizer),
                   tokenizer.vocab_size)


def listed(names: list[str]) -> str:
    """At most MAX_LISTED names joined with commas, and how many more."""
    more = len(names) - MAX_LISTED
    return ", ".join(names[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")
