"""The user's own text, pasted or uploaded, turned into documents of sentences.

Paragraphs (blank-line separated) become documents; text without blank lines
is cut into documents of a few sentences each. Sentences end at . ! or ?
followed by whitespace, except after common abbreviations and initials.
"""

from __future__ import annotations

import re

from bertviz_lab.errors import InputError

SENTENCES_PER_DOCUMENT = 5  # for text that has no paragraphs of its own
# The largest text file a user may upload: 20 MiB, equal to server.maxUploadSize = 20 in
# .streamlit/config.toml, which Streamlit's server counts in megabytes of 2**20 bytes.
MAX_TEXT_BYTES = 20 * 2**20
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_WHITESPACE = re.compile(r"\s+")
# Unicode's control characters (category Cc), except those that count as whitespace
# (tab, newline, form feed, ...): those separate words and are collapsed later.
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# A sentence may end at . ! ? (plus closing quotes or brackets) before whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"')\]\u201d\u2019]*(?=\s)")
# Words ending in a dot that rarely end a sentence: titles and Latin shorthands.
_ABBREVIATIONS = frozenset(
    "mr. mrs. ms. dr. prof. sr. jr. st. mt. vs. fig. vol. approx. dept. inc. ltd. "
    "e.g. i.e. cf. al. jan. feb. mar. apr. jun. jul. aug. sep. sept. oct. nov. dec.".split()
)
_INITIAL = re.compile(r"(?:[a-z]\.)+")  # "j." in "j. k. rowling"; "u.s.", "a.m."


def _clean(text: str) -> str:
    """Unify line ends and drop control characters (keeping newlines and tabs)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph, punctuation kept, whitespace collapsed."""
    paragraph = _WHITESPACE.sub(" ", paragraph).strip()
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(paragraph):
        end = match.end()
        if match.group().startswith(".") and len(match.group()) == 1:
            last_word = paragraph[start:end].rsplit(" ", 1)[-1].lower()
            if last_word in _ABBREVIATIONS or _INITIAL.fullmatch(last_word.lstrip("(\"'")):
                continue  # "dr. smith", "e.g. this": the dot is not a sentence end
        sentences.append(paragraph[start:end].strip())
        start = end
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def documents_from_text(text: str, min_sentences: int = 20,
                        min_words: int = 200) -> list[list[str]]:
    """Split the user's text into documents (lists of sentences) for training."""
    if not isinstance(text, str):
        raise InputError(f"the text must be a string; got {type(text).__name__}")
    paragraphs = [p for p in _PARAGRAPH_BREAK.split(_clean(text)) if p.strip()]
    if len(paragraphs) > 1:
        documents = [split_sentences(p) for p in paragraphs]
    else:
        sentences = split_sentences(paragraphs[0]) if paragraphs else []
        step = SENTENCES_PER_DOCUMENT
        documents = [sentences[i:i + step] for i in range(0, len(sentences), step)]
    documents = [doc for doc in documents if doc]
    n_sentences = sum(len(doc) for doc in documents)
    n_words = sum(len(s.split()) for doc in documents for s in doc)
    if n_sentences < min_sentences or n_words < min_words:
        raise InputError(
            f"training on your own text needs at least {min_sentences} sentences and "
            f"{min_words} words; got {_count(n_sentences, 'sentence')} and "
            f"{_count(n_words, 'word')}"
        )
    return documents


def read_text_file(data: bytes, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """Decode an uploaded .txt file, which must be UTF-8 (a BOM is allowed)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(f"the upload must be bytes; got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise InputError("the file is empty")
    if len(data) > max_bytes:
        raise InputError(f"the file is {len(data):,} bytes; the limit is {max_bytes:,} bytes")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("the file is not UTF-8 text (it looks like UTF-16); "
                         "save it as UTF-8 and upload it again")
    if b"\x00" in data:
        raise InputError("the file contains NUL bytes, so it looks binary, not like a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"the file is not UTF-8 text (byte 0x{data[err.start]:02x} at position "
                         f"{err.start}); save it as UTF-8 and upload it again") from None
    if not text.strip():
        raise InputError("the file is empty (it has only whitespace)")
    return text
