"""The corpus a neuron's top contexts are read over: the story world (the default, the same sentences for every
model), the learner's own text, or an uploaded .txt file; and the index built over it once per model
(neurons/index.py: kept on disk beside the run, or in the user's cache, by the weights' hash).

Every bad corpus is one sentence: an empty text, a file that is not UTF-8 text, a huge one (more than
MAX_FILE_BYTES, or more sentences than the index takes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES, read_text_file, split_sentences
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.index import MAX_SENTENCES, NeuronIndex, load_or_build
from bertviz_lab.syntax.report import story_corpus

STORY_SENTENCES = 2000  # issue 55: the shipped model indexes 2,000 story sentences in under 30 s on 2 cores
MAX_FILE_BYTES = min(MAX_TEXT_BYTES, 2 * 2**20)  # a .txt upload: 2 MiB is ~20,000 sentences, past the index's cap
MAX_WORDS = 64  # a longer line is cut into pieces of this many words (the index reads sentences, not books)

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Sentences:
    """A corpus: its name as the page says it, and its sentences (text, one each)."""

    name: str  # "the story world (2,000 sentences)", "your text", "notes.txt"
    sentences: tuple[str, ...]
    note: str = ""  # what was left out, and why ("" : nothing)


def story_sentences(n: int = STORY_SENTENCES) -> list[str]:
    """The first `n` different sentences of the story world (syntax.report.story_corpus's trees, seed 0), as text: the
    same sentences for every model. The story world's small grammar repeats a sentence now and then (2,000 draws hold
    1,990 different ones): a repeat would fill a neuron's top contexts twice, so the draw goes on until n differ."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"the number of story sentences must be a whole number from 1, got {n!r}")
    draw = n
    while True:
        different = list(dict.fromkeys(" ".join(tree.words) for tree in story_corpus(draw).trees))
        if len(different) >= n or draw > 4 * n:
            return different[:n]
        draw += n // 10 + 10


def _pieces(line: str) -> list[str]:
    """A line as sentences (split at . ! ?), each of at most MAX_WORDS words."""
    out = []
    for sentence in split_sentences(line):
        words = sentence.split()
        out += [" ".join(words[i:i + MAX_WORDS]) for i in range(0, len(words), MAX_WORDS)]
    return out


def _capped(sentences: list[str], what: str) -> list[str]:
    if not sentences:
        raise InputError(f"{what} has no sentences: type or upload some text (one sentence a line)")
    if len(sentences) > MAX_SENTENCES:
        raise InputError(f"{what} has {len(sentences):,} sentences; the index reads at most {MAX_SENTENCES:,}: "
                         "keep the part you want to search")
    return sentences


def own_sentences(text: str) -> list[str]:
    """The learner's text as sentences: one a line, each line split at sentence ends (corpus.user_text); an
    InputError sentence for text with none, or with more than the index's MAX_SENTENCES."""
    if not isinstance(text, str):
        raise InputError(f"the text must be a string, not {type(text).__name__}")
    if len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise InputError(f"the text is longer than {MAX_FILE_BYTES:,} bytes: keep the part you want to search")
    return _sentences(text, "your text")


def _sentences(text: str, what: str) -> list[str]:
    """Every line of `text` cut into sentences (`_pieces`), at least one and at most MAX_SENTENCES (`_capped`)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return _capped([piece for line in lines for piece in _pieces(line)], what)


def uploaded(name: str, raw: bytes) -> Sentences:
    """An uploaded .txt file as sentences; an InputError sentence for a file that is empty, binary, not UTF-8, or
    larger than MAX_FILE_BYTES or than the index's MAX_SENTENCES."""
    text = read_text_file(raw, MAX_FILE_BYTES)  # empty, NUL bytes, UTF-16, not UTF-8, too large: one sentence each
    shown = str(name or "the file")
    sentences = _sentences(text, shown)
    return Sentences(shown, tuple(sentences), f"{len(sentences):,} sentences")


def story(n: int = STORY_SENTENCES) -> Sentences:
    """The default corpus as a `Sentences`."""
    return Sentences(f"the story world ({n:,} sentences)", tuple(story_sentences(n)))


def typed(text: str) -> Sentences:
    """The learner's text as a `Sentences` ("your text")."""
    sentences = own_sentences(text)
    return Sentences("your text", tuple(sentences), f"{len(sentences):,} sentences")


def index(ckpt: Checkpoint, sentences: Sequence[str] | Sentences, progress: Progress | None = None,
          folder: Path | None = None) -> NeuronIndex:
    """The NeuronIndex of `sentences` for this model: read from disk when built before (`folder`, default the
    user's cache keyed by the weights' hash: neurons/index.py), else built (progress(fraction, message)) and kept."""
    texts = list(sentences.sentences if isinstance(sentences, Sentences) else sentences)
    if not texts:
        raise InputError("the corpus has no sentences: type or upload some text, or use the story world")
    return load_or_build(ckpt.model, ckpt.tokenizer, texts, folder=folder, progress=progress)
