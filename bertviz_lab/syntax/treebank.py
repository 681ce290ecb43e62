"""A treebank the user brings as a CoNLL-U file, read into `Tree`s (corpus/tree.py), and trees written back.

`read_treebank` checks the file like every upload (files.py, corpus/user_text.py): at most MAX_TREEBANK_BYTES,
UTF-8 (a BOM is fine), not binary, not a web page. Each word line goes through the `conllu` package's line
parser; the lab keeps ID, FORM, UPOS, HEAD and DEPREL. Multiword token lines (3-4) and empty nodes (5.1) are
passed over and their words kept; 1-based heads become 0-based with -1 for the root; UPOS "_" becomes "X"; FORM
and DEPREL are kept as written ("obl:tmod" stays). A FORM with spaces in it (some treebanks allow them:
"New York", "10 000") has each run of whitespace replaced by "_", so that a Tree's words, split on spaces, stay
one per word. A sentence that cannot be a tree (no root, several, a cycle, a head outside it, a broken line,
more than MAX_WORDS words) is left out with its reason in `Treebank.skipped`; after MAX_SENTENCES trees the rest
of the file is not read and `Treebank.notes` says so. A file of which no sentence is usable is one InputError.
A big file takes a while (a quarter of a minute for the largest, most of it in conllu's `parse_line`; figures in
docs/benchmarks.md, "Syntax"), so `progress(fraction, message)` hears how far the reading is every REPORT_EVERY
sentences.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELD_PARSERS, DEFAULT_FIELDS, parse_line

from bertviz_lab import atomic, files
from bertviz_lab.corpus import tree as corpus_tree
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES
from bertviz_lab.errors import InputError

MAX_TREEBANK_BYTES = MAX_TEXT_BYTES  # 20 MiB, Streamlit's upload limit; UD English-EWT's train file (~13 MB) fits
MAX_SENTENCES = 5_000  # trees kept; a head survey or a structural probe needs far fewer, and the rest is not read
MAX_WORDS = 100  # words per sentence (multiword tokens and empty nodes not counted); BERT reads 512 word pieces
MAX_REASONS = 50  # reasons listed in `Treebank.skipped`; `n_skipped` counts them all
REPORT_EVERY = 250  # sentences between two progress reports: a file of fewer reports nothing
COLUMNS = tuple(f.upper() for f in DEFAULT_FIELDS)  # ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
ID, FORM, UPOS, HEAD, DEPREL = (DEFAULT_FIELDS.index(f) for f in ("id", "form", "upos", "head", "deprel"))
# conllu's parsers for the columns the lab uses (FEATS, DEPS, MISC are not parsed: it keeps none of them); a
# dict of our own, as parse_line adds its aliases to the one it is given
_PARSERS = {f: DEFAULT_FIELD_PARSERS[f] for f in ("id", "head")}
_USED = DEFAULT_FIELDS[:DEPREL + 1]  # ID to DEPREL
_WORD_ID = re.compile(r"[1-9][0-9]{0,8}")  # nine digits at most: Python refuses to read ints of 4,300 digits
_PART_ID = re.compile(r"[1-9][0-9]{0,8}-[1-9][0-9]{0,8}|[0-9]{1,9}\.[1-9][0-9]{0,8}")  # 3-4, 5.1
_HEAD = re.compile(r"0|[1-9][0-9]{0,8}|_")
_WORD_LINE = re.compile(r"[1-9][0-9]*(?:\t| {2,})")
_SPACES = re.compile(r"\s+")
_TWO_SPACES = re.compile(r" {2,}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SIGNATURES = ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
              (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a ZIP archive (or a Word or Excel file)"),
              (b"\x1f\x8b", "a gzip archive (unpack it first)"), (b"\xfd7zXZ", "an xz archive (unpack it first)"))
WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
             (b"\xfe\xff", "UTF-16"))
SAVE = "save it as UTF-8 and upload it again"


@dataclass(frozen=True)
class Treebank:
    trees: list[Tree]
    name: str  # the file's name, as messages show it
    skipped: list[str]  # "sentence 12, line 230: word 3's head 40 is outside ..."; the first MAX_REASONS
    n_sentences: int  # sentences read: kept + left out (those past MAX_SENTENCES are not read)
    n_skipped: int  # all sentences left out; `skipped` lists at most MAX_REASONS of them
    n_unread: int = 0  # sentences after the MAX_SENTENCES-th tree, not read

    @property
    def n_words(self) -> int:
        return sum(len(t) for t in self.trees)

    @property
    def notes(self) -> list[str]:
        """What the reader should know beyond the sentences left out: the sentence cap, a shortened list."""
        out = []
        if self.n_unread:
            out.append(f"only the first {MAX_SENTENCES:,} sentences were kept; {self.n_unread:,} more in "
                       f"{self.name} were not read")
        if self.n_skipped > len(self.skipped):
            out.append(f"{self.n_skipped:,} sentences were left out; the first {len(self.skipped)} are listed")
        return out

    @property
    def summary(self) -> str:
        """'412 sentences (6,120 words) from en_ewt.conllu; 3 left out'."""
        left = f"; {self.n_skipped:,} left out" if self.n_skipped else ""
        return f"{_count(len(self.trees), 'sentence')} ({_count(self.n_words, 'word')}) from {self.name}{left}"


class _Skip(Exception):
    """Why one sentence is left out, the line of the file it is about, and whether the line's layout is wrong."""

    def __init__(self, line: int, reason: str, layout: bool = False):
        super().__init__(reason)
        self.line, self.layout = line, layout


Progress = Callable[[float, str], None]  # (share of the file's lines read, what is being done)


def read_treebank(source, name: str | None = None, progress: Progress | None = None) -> Treebank:
    """A Treebank from a CoNLL-U file: a path, or the bytes of an upload (`name` is then the upload's name)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_treebank(bytes(source), name or "the uploaded treebank", progress)
    if not isinstance(source, (str, os.PathLike)):
        raise InputError(f"a treebank is read from a path or from the bytes of an upload; got "
                         f"{type(source).__name__}")
    path = files.check_path(source, "treebank file", InputError)
    raw = files.read_bytes(path, "treebank file", MAX_TREEBANK_BYTES, InputError)
    return parse_treebank(raw, name or path.name, progress)


def parse_treebank(raw: bytes, name: str = "treebank.conllu", progress: Progress | None = None) -> Treebank:
    """The trees of CoNLL-U bytes; every problem with the file as a whole is one InputError naming `name`.
    `progress(fraction, message)` every REPORT_EVERY sentences: the share of the file's lines read so far."""
    name = _shown_name(name)
    lines = _text(raw, name).split("\n")
    _check_columns(lines[0], name)
    trees, skipped, n_skipped, layout_only, first = [], [], 0, True, None
    blocks = _blocks(lines)
    number = 0
    for number, block in enumerate(blocks, 1):
        try:
            trees.append(_sentence(block))
        except _Skip as why:
            n_skipped, layout_only, first = n_skipped + 1, layout_only and why.layout, first or why
            if len(skipped) < MAX_REASONS:
                skipped.append(f"sentence {number:,}, line {why.line:,}: {why}")
        if len(trees) == MAX_SENTENCES:
            break
        if progress is not None and number % REPORT_EVERY == 0:
            progress(block[-1][0] / len(lines), f"reading the treebank: line {block[-1][0]:,} of {len(lines):,}")
    n_unread = sum(1 for _ in blocks)
    if not trees:
        if first is None:
            raise InputError(f"{name} holds no sentence, only comments: a CoNLL-U file has one word per line, "
                             f"10 columns separated by tabs, and a blank line after each sentence")
        if layout_only:  # no line of the file looked like a word line: not CoNLL-U at all
            raise InputError(f"{name} is not a CoNLL-U file: line {first.line:,}: {first}")
        raise InputError(f"no sentence of {name} could be read: {skipped[0]}")
    return Treebank(trees, name, skipped, number, n_skipped, n_unread)


def write_treebank(trees, path) -> Path:
    """Write `trees` as one CoNLL-U file, whole or not at all (atomic.py); `read_treebank` gives back the same
    words, heads, relations and parts of speech (not kinds, coreference or construction: CoNLL-U has no column
    for them). Refuses a column that is empty or holds whitespace, which would not read back the same."""
    trees = list(trees)
    if not trees:
        raise InputError("there are no trees to write")
    for number, tree in enumerate(trees, 1):
        if not isinstance(tree, Tree):
            raise InputError(f"tree {number} is a {type(tree).__name__}, not a Tree")
        for i, cells in enumerate(zip(tree.words, tree.relations, tree.upos), 1):
            if any(not c or _SPACES.search(c) for c in cells):
                raise InputError(f"tree {number}, word {i}: {cells!r} cannot be CoNLL-U columns (empty, or holding "
                                 f"whitespace)")
    path = files.check_path(path, "treebank file", InputError)
    atomic.write_text(path, "".join(f"# sent_id = {n}\n{t.to_conllu()}" for n, t in enumerate(trees, 1)))
    return path


# --- the file ------------------------------------------------------------------------------------------
def _text(raw: bytes, name: str) -> str:
    """The file as text: not empty, under the cap, not a known binary format, UTF-8 (a BOM is fine), no NUL."""
    if not raw:
        raise InputError(f"{name} is empty")
    if len(raw) > MAX_TREEBANK_BYTES:
        raise InputError(f"{name} is {files.too_big(len(raw), MAX_TREEBANK_BYTES)}")
    kind = next((what for magic, what in SIGNATURES if raw.startswith(magic)), None)
    if kind:
        raise InputError(f"{name} is {kind}, not a CoNLL-U text file")
    wide = next((enc for bom, enc in WIDE_BOMS if raw.startswith(bom)), None)
    if wide:
        raise InputError(f"{name} is not UTF-8 text (it looks like {wide}); {SAVE}")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError(f"{name} holds binary data (a NUL byte at byte {nul:,}), so it is not a CoNLL-U text file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{name} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start:,}, on "
                         f"line {line:,}); {SAVE}") from None
    if not text.strip():
        raise InputError(f"{name} is empty (it has only whitespace)")
    if text.lstrip().startswith("<"):
        raise InputError(f"{name} looks like a web page (HTML), not a CoNLL-U file; on GitHub, open the file and "
                         f"download it with the Raw button")
    return text.replace("\r\n", "\n").replace("\r", "\n")  # Windows and old Mac line ends


def _check_columns(first: str, name: str) -> None:
    """A CoNLL-U Plus file names its columns on its first line; the lab reads those that start with CoNLL-U's 10."""
    if first.startswith("# global.columns"):
        declared = first.partition("=")[2].upper().split()
        if tuple(declared[:len(COLUMNS)]) != COLUMNS:
            raise InputError(f"{name} declares columns of its own ({_shown(' '.join(declared), 80)}); the lab reads "
                             f"CoNLL-U's: {' '.join(COLUMNS)}")


def _blocks(lines: list[str]):
    """Each sentence as its (line number, line) pairs, comments included; blocks of comments alone are passed."""
    block: list[tuple[int, str]] = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            block.append((n, line.strip()))
            continue
        if any(not text.startswith("#") for _, text in block):
            yield block
        block = []
    if any(not text.startswith("#") for _, text in block):
        yield block


# --- one sentence --------------------------------------------------------------------------------------
def _sentence(block: list[tuple[int, str]]) -> Tree:
    """The Tree of one sentence's lines, or _Skip with the reason it cannot be one."""
    body = [(n, text) for n, text in block if not text.startswith("#")]
    n_words = sum(1 for _, text in body if _WORD_LINE.match(text))
    if n_words > MAX_WORDS:
        raise _Skip(body[0][0], f"it has {n_words:,} words; the limit is {MAX_WORDS}")
    words, heads, relations, upos, where = [], [], [], [], []
    for n, text in body:
        token = _token(n, text)
        if token is None:  # a multiword token or an empty node
            continue
        if token["id"] != len(words) + 1:
            raise _Skip(n, f"word ids run 1, 2, 3, ...; this line has {token['id']} where {len(words) + 1} was due")
        if token["head"] is None:
            raise _Skip(n, f"word {token['id']} has no head (its HEAD is _)")
        words.append(token["form"])
        heads.append(token["head"])
        relations.append(token.get("deprel") or "_")
        upos.append("X" if token["upos"] in ("_", "") else token["upos"])
        where.append(n)
    if not words:
        raise _Skip(body[0][0], "it has no words, only multiword tokens or empty nodes")
    if all(w == "_" for w in words):
        raise _Skip(where[0], "its words are all '_' (a treebank shared without its text)")
    heads = _checked(heads, where)
    return Tree(tuple(words), tuple(heads), tuple(relations), tuple(upos))


def _token(n: int, text: str):
    """One word line as the conllu package reads it (a dict of columns), or None for a line that is not a word."""
    parts = text.split("\t") if "\t" in text else _TWO_SPACES.split(text)  # or the two spaces conllu also reads
    columns = [_SPACES.sub("_", c.strip()) if _SPACES.search(c) else c for c in parts]  # a FORM with spaces: one
    if len(columns) == 1:
        raise _Skip(n, f"{_shown(text)} is not a CoNLL-U word line (its columns are not separated by tabs)", True)
    if len(columns) <= DEPREL:
        raise _Skip(n, f"the line has {len(columns)} columns; a CoNLL-U word line has 10, separated by tabs", True)
    if _PART_ID.fullmatch(columns[ID]):
        return None
    if not _WORD_ID.fullmatch(columns[ID]):
        raise _Skip(n, f"the ID {_shown(columns[ID])} is not a word number (1, 2, ...), a range like 3-4 or an "
                       f"empty node like 5.1", True)
    if not _HEAD.fullmatch(columns[HEAD]):
        raise _Skip(n, f"word {columns[ID]}'s HEAD {_shown(columns[HEAD])} is not a word number (0 for the root)")
    if not columns[FORM]:
        raise _Skip(n, f"word {columns[ID]} has an empty FORM")
    try:
        return parse_line("\t".join(columns[:DEPREL + 1]), _USED, _PARSERS)
    except (ParseException, ValueError) as exc:  # not expected after the checks above; a message, not a traceback
        raise _Skip(n, f"not a CoNLL-U word line ({_shown(str(exc), 120)})", True) from None


def _checked(heads: list[int], where: list[int]) -> list[int]:
    """The 1-based heads (0 = root) as 0-based (-1 = root) if they make a tree; else _Skip naming the problem."""
    n = len(heads)
    for i, h in enumerate(heads, 1):
        if h > n:
            raise _Skip(where[i - 1], f"word {i}'s head {h} is outside the sentence (it has {n} words)")
        if h == i:
            raise _Skip(where[i - 1], f"word {i} is its own head")
    roots = [i for i, h in enumerate(heads, 1) if h == 0]
    if not roots:
        raise _Skip(where[0], "no word has head 0, so the sentence has no root")
    if len(roots) > 1:
        listed = ", ".join(map(str, roots[:5])) + (", ..." if len(roots) > 5 else "")
        raise _Skip(where[roots[1] - 1], f"{len(roots)} words have head 0 (words {listed}); a sentence has one root")
    zero_based = [h - 1 for h in heads]
    problem = corpus_tree.check(zero_based)  # all that is left to find is a cycle
    if problem:
        raise _Skip(where[0], problem)
    return zero_based


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _shown(value: str, limit: int = 40) -> str:
    """A piece of the user's file, quoted, short, its control characters escaped: safe in a one-line message."""
    return repr(value[:limit] + ("..." if len(value) > limit else ""))


def _shown_name(name) -> str:
    """An upload's name for messages: control characters out, at most 80 characters."""
    name = _CONTROL.sub("", str(name)).strip()
    return (name[:77] + "...") if len(name) > 80 else (name or "the treebank")
