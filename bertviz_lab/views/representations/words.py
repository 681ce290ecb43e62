"""A typed word found in a sentence, one rule for every family: by its characters, then by the tokens over them.

A word typed on its own is not tokenized as it is inside a sentence (byte-level BPE writes `Ġbank` after a
space, SentencePiece `▁bank`, a cased model `Bank` at a sentence's start), so the word is looked for in the
sentence's text, folded as the tokenizer's normalizer folds it, and its tokens are those whose character
offsets cover it. The Same-word tab, Nearest neighbours, the `similarity` command and the Lesson use it.
"""

from __future__ import annotations

import re

from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError

MAX_WORD_CHARS = 100


def check_word(word: str) -> str:
    """The typed word, stripped; an empty or very long word is an InputError."""
    word = word.strip() if isinstance(word, str) else ""
    if not word:
        raise InputError("type a word to follow through the sentences")
    if len(word) > MAX_WORD_CHARS:
        raise InputError(f"the word is {len(word):,} characters long; type at most {MAX_WORD_CHARS}")
    return word


def _folded(tokenizer: WordPieceTokenizer, text: str, lower: bool) -> tuple[str, list[int]]:
    """`text` as the tokenizer's normalizer writes it (an uncased BERT lowercases and strips accents), character
    by character so that each folded character keeps the index of the character it came from."""
    folded, origin, seen, normalizer = [], [], {}, tokenizer.normalizer
    for i, c in enumerate(text):
        if c not in seen:
            seen[c] = " " if c.isspace() else normalizer.normalize_str(c) if normalizer else c
        out = seen[c].lower() if lower else seen[c]
        folded.append(out)
        origin += [i] * len(out)
    return "".join(folded), origin


def _spans(tokenizer: WordPieceTokenizer, text: str, word: str, lower: bool) -> list[tuple[int, int]]:
    """The character spans of `text` where `word` stands as a whole word (not inside a longer one)."""
    target = _folded(tokenizer, word, lower)[0].strip()
    if not target:
        return []
    folded, origin = _folded(tokenizer, text, lower)
    left = r"(?<!\w)" if re.match(r"\w", target) else ""  # a boundary only where the word starts with a letter:
    right = r"(?!\w)" if re.search(r"\w$", target) else ""  # a typed "." matches the end of "mat."
    return [(origin[m.start()], origin[m.end() - 1] + 1) for m in re.finditer(left + re.escape(target) + right, folded)]


def _covering(tokenizer: WordPieceTokenizer, encoding: Encoding, span: tuple[int, int]) -> tuple[int, ...]:
    """The first text's tokens whose characters overlap `span`, with the word's own space marker before them
    (a lone `Ġ` or `▁` that the tokenizer writes as a piece of the same word)."""
    start, end = span
    found = [i for i, ((a, b), s) in enumerate(zip(encoding.offsets, encoding.sequence_ids))
             if s == 0 and (a < end and b > start or a == b and start <= a < end)]
    while found and found[0] > 0 and encoding.sequence_ids[found[0] - 1] == 0 \
            and encoding.word_ids[found[0] - 1] == encoding.word_ids[found[0]] \
            and _blank(tokenizer, encoding.ids[found[0] - 1]):
        found.insert(0, found[0] - 1)
    return tuple(found)


def _blank(tokenizer: WordPieceTokenizer, token_id: int) -> bool:
    """Whether the token stands for no visible character: a space marker such as Ġ or ▁ on its own."""
    return not tokenizer.decode([token_id]).strip()


def occurrences(tokenizer: WordPieceTokenizer, text: str, encoding: Encoding, word: str) -> list[tuple[int, ...]]:
    """The token positions of every whole-word occurrence of `word` in `text` (the text `encoding` encodes).

    One rule for every family: the word is found in the text, then the tokens are those whose character offsets
    cover it, so RoBERTa's `Ġbank` and SentencePiece's `▁b an k` count as "bank". A cased model looks for the
    word as typed first, then in any case (its pieces then show how the model reads each spelling).
    """
    for lower in (False, True):
        found = [p for p in (_covering(tokenizer, encoding, span) for span in _spans(tokenizer, text, word, lower))
                 if p]  # an occurrence cut off by truncation has no tokens
        if found:
            return found
    return []


def find_word(tokenizer: WordPieceTokenizer, text: str, encoding: Encoding, word: str) -> tuple[int, ...] | None:
    """The token positions of the first whole-word occurrence of `word` in `text`, or None."""
    found = occurrences(tokenizer, text, encoding, word)
    return found[0] if found else None


def unknown(tokenizer: WordPieceTokenizer, encoding: Encoding, positions: tuple[int, ...]) -> bool:
    """Whether the model reads these tokens only as unknown ([UNK], perhaps after a lone space marker)."""
    ids = [encoding.ids[p] for p in positions]
    return tokenizer.unk_id in ids and all(i == tokenizer.unk_id or _blank(tokenizer, i) for i in ids)
