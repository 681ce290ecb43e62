"""BERT's WordPiece tokenizer: text in, token ids (plus where each came from) out.

`WordPieceTokenizer` wraps a `tokenizers.Tokenizer` set up exactly like
transformers' `BertTokenizerFast` (BERT normalizer, BERT pre-tokenizer, WordPiece
model and decoder, `[CLS] A [SEP] B [SEP]` template), so ids match a real BERT
checkpoint. The rest of the family brings its own pipeline in `tokenizer.json`
(RoBERTa's byte-level BPE, XLM-R's and ALBERT's SentencePiece Unigram, with their own
special tokens such as `<s>` and `<mask>`): `from_dir` reads it as it is, so the same
class tokenizes for every family. `Encoding` is the frozen result of one `encode`
call, carrying what the app needs to draw tokens: offsets, segment and sequence ids,
word ids, truncation.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Sequence

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import Encoding as RawEncoding

from bertviz_lab import files
from bertviz_lab.atomic import write_json, write_text
from bertviz_lab.errors import CheckpointError, InputError

# BERT's special tokens, named once: every other module takes them from here.
PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
# Each special token's role -> BERT's spelling; other families spell them their way (`specials`).
ROLES = {"pad": PAD, "unk": UNK, "cls": CLS, "sep": SEP, "mask": MASK}
# ASCII-only so exotic case folds (e.g. the long s "ſ") never turn into a mask.
_TYPED_MASK = re.compile(r"\[mask\]", re.IGNORECASE | re.ASCII)
_MIN_LENGTH = {False: 3, True: 5}  # specials plus one token per text (single, pair)
_MODEL_MAX_LENGTH = 512
MAX_VOCAB_BYTES = files.MAX_TEXT_FILE_BYTES  # 50 MB: ten times the largest real vocab.txt


@dataclass(frozen=True)
class Encoding:
    """One encoded input; every list has one entry per token."""

    tokens: list[str]
    ids: list[int]
    segment_ids: list[int]
    offsets: list[tuple[int, int]]
    sequence_ids: list[int | None]
    word_ids: list[int | None]
    truncated: int

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def special_mask(self) -> list[bool]:
        """True where the token only frames the input: [CLS] and [SEP] (RoBERTa: <s> and </s>)."""
        return [s is None for s in self.sequence_ids]


def _check_vocab(tokens: list[str], specials: dict[str, str] = ROLES) -> None:
    """Raise CheckpointError unless `tokens` can serve as a vocabulary with these special tokens."""
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if not isinstance(tok, str) or not tok or "\n" in tok or "\r" in tok:
            raise CheckpointError(f"Vocabulary entry {i} ({tok!r}) is not a valid token.")
        if tok in seen:
            raise CheckpointError(f"Vocabulary lists the token {tok!r} twice (ids {seen[tok]} and {i}).")
        seen[tok] = i
    missing = [tok for tok in specials.values() if tok not in seen]
    if missing:
        raise CheckpointError(f"Vocabulary has no {', '.join(missing)} token; "
                              f"the model needs all of {', '.join(specials.values())}.")


def _build(vocab: dict[str, int], lowercase: bool) -> Tokenizer:
    """The same pipeline transformers' BertTokenizerFast builds from a vocab.txt."""
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=UNK, max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, vocab[CLS]), (SEP, vocab[SEP])])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    # Registered as special so typed "[MASK]" stays whole instead of "[", "mask", "]".
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS])
    return tok


def _keep_lengths(len_a: int, len_b: int, budget: int) -> tuple[int, int]:
    """Tokens of A and B kept under `budget`, as tokenizers' "longest_first" does.

    The shorter text (A on a tie) keeps at most half the budget; the longer one
    gets the rest, so a long text never squeezes a short one out.
    """
    if len_a + len_b <= budget:
        return len_a, len_b
    if len_a <= len_b:
        keep_a = min(len_a, budget // 2)
        return keep_a, budget - keep_a
    keep_b = min(len_b, budget // 2)
    return budget - keep_b, keep_b


def _take(left: dict[int, int], text: int) -> bool:
    """Whether one more token of `text` (0: A, 1: B) fits in what is `left` of its share, counting it."""
    left[text] -= 1
    return left[text] >= 0


def _check_text(text: object, name: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"{name} must be a string, not {type(text).__name__}.")
    if not text.strip():
        raise InputError(f"{name} is empty; type a sentence to tokenize.")
    return text


def _check_whole(value: object, name: str, minimum: int, context: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        where = f" {context}" if context else ""
        raise InputError(f"{name} must be a whole number of at least {minimum}{where}, got {value!r}.")


class WordPieceTokenizer:
    """A BERT WordPiece tokenizer with a small, student-friendly API."""

    def __init__(self, tokenizer: Tokenizer, lowercase: bool = True, specials: dict[str, str] | None = None,
                 kind: str = "WordPiece"):
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"expected a tokenizers.Tokenizer, got {type(tokenizer).__name__}")
        by_id = {i: t for t, i in tokenizer.get_vocab(with_added_tokens=True).items()}
        if sorted(by_id) != list(range(len(by_id))):
            raise CheckpointError("Tokenizer vocabulary ids have gaps; expected ids 0..N-1.")
        self._vocab = [by_id[i] for i in range(len(by_id))]
        self.specials = dict(specials or ROLES)  # role (pad, unk, cls, sep, mask) -> this tokenizer's token
        _check_vocab(self._vocab, self.specials)
        self._ids = {t: i for i, t in enumerate(self._vocab)}
        self._tok = tokenizer
        self.normalizer = tokenizer.normalizer  # how text is rewritten before it is split (lowercase...), or None
        self.lowercase = bool(lowercase)
        self.kind = kind  # "WordPiece", "byte-level BPE" or "SentencePiece Unigram", for the pages

    @classmethod
    def from_vocab(cls, tokens: list[str], lowercase: bool = True) -> WordPieceTokenizer:
        """Build from an in-memory vocabulary; list position is the token id."""
        tokens = list(tokens)
        _check_vocab(tokens)
        return cls(_build({t: i for i, t in enumerate(tokens)}, lowercase), lowercase)

    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike, lowercase: bool = True,
                        max_tokens: int | None = None) -> WordPieceTokenizer:
        """Build from a vocab.txt with one token per line (line number = id).

        The file must be a regular UTF-8 file of at most 50 MB (checked before reading); with
        `max_tokens`, a longer vocabulary is refused before any tokenizer is built.
        """
        path = files.check_path(path, "vocabulary file", CheckpointError)
        if not os.path.lexists(path):
            raise CheckpointError(f"Vocabulary file {path} does not exist.")
        text = files.read_text(path, "vocabulary file", MAX_VOCAB_BYTES, CheckpointError)
        # split("\n"), not splitlines(): real vocabularies contain characters such as
        # U+0085 that splitlines() treats as line breaks.
        lines = [line.rstrip("\r") for line in text.split("\n")]
        if lines and lines[-1] == "":
            lines.pop()
        if max_tokens is not None and len(lines) > max_tokens:
            raise CheckpointError(f"{path.name} lists {len(lines):,} tokens but the model has room for "
                                  f"{max_tokens:,} (vocab_size): they belong to different models.")
        return cls.from_vocab(lines, lowercase)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2,
              lowercase: bool = True) -> WordPieceTokenizer:
        """Learn a WordPiece vocabulary from `texts`; specials get ids 0..4."""
        if isinstance(texts, str):  # iterating a str would train on single characters
            raise InputError("Training texts must be a list of sentences, not one string.")
        _check_whole(vocab_size, "vocab_size", len(SPECIAL_TOKENS) + 1)
        _check_whole(min_frequency, "min_frequency", 1)
        count = 0

        def checked() -> Iterable[str]:
            nonlocal count
            for text in texts:
                if not isinstance(text, str):
                    raise InputError(f"Training texts must be strings, found {type(text).__name__}.")
                count += 1
                yield text

        tok = Tokenizer(models.WordPiece(unk_token=UNK, max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
            special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##")
        tok.train_from_iterator(checked(), trainer)
        if count == 0:
            raise InputError("No training texts were given; the tokenizer needs sentences to learn from.")
        learned = sorted(tok.get_vocab().items(), key=lambda item: item[1])
        return cls.from_vocab([t for t, _ in learned], lowercase)

    def save(self, directory: str | os.PathLike) -> None:
        """Write vocab.txt, tokenizer_config.json and special_tokens_map.json.

        The folder loads with transformers' `BertTokenizerFast.from_pretrained`.
        """
        folder = Path(directory)
        specials = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS, "mask_token": MASK}
        config = {"do_lower_case": self.lowercase, "tokenize_chinese_chars": True,
                  "strip_accents": None, "tokenizer_class": "BertTokenizer",
                  "model_max_length": _MODEL_MAX_LENGTH, **specials}
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # Each file is swapped in whole, so a crash mid-save never leaves half a vocabulary.
            write_text(folder / "vocab.txt", "".join(t + "\n" for t in self._vocab))
            write_json(folder / "tokenizer_config.json", config)
            write_json(folder / "special_tokens_map.json", specials)
        except OSError as exc:
            raise CheckpointError(f"Cannot save the tokenizer to {folder}: {exc.strerror or exc}.") from None

    def encode(self, text_a: str, text_b: str | None = None,
               max_length: int = _MODEL_MAX_LENGTH) -> Encoding:
        """Tokenize one text or a pair, truncating longest-first to `max_length` tokens."""
        pair = text_b is not None
        text_a = self._prepare(_check_text(text_a, "Text A"))
        text_b = self._prepare(_check_text(text_b, "Text B")) if pair else None
        context = "for a pair of texts" if pair else "for one text"
        _check_whole(max_length, "max_length", _MIN_LENGTH[pair], context)
        full = self._tok.encode(text_a, text_b)
        seq = full.sequence_ids
        a_pos = [i for i, s in enumerate(seq) if s == 0]
        b_pos = [i for i, s in enumerate(seq) if s == 1]
        if not a_pos or (pair and not b_pos):
            name = "Text B" if a_pos else "Text A"
            raise InputError(f"{name} has no characters the tokenizer can read "
                             "(only invisible or control characters).")
        frame = [i for i, s in enumerate(seq) if s is None]
        keep_a, keep_b = _keep_lengths(len(a_pos), len(b_pos), max_length - len(frame))
        # Keep [CLS]/[SEP] wherever the template put them; cut each text from its end.
        keep = sorted(frame + a_pos[:keep_a] + b_pos[:keep_b])
        return self._select(full, keep, truncated=len(seq) - len(keep))

    def encode_ids(self, pairs: Sequence[tuple[str, str | None]],
                   max_length: int = _MODEL_MAX_LENGTH) -> list[tuple[list[int], list[int]]]:
        """(ids, segment ids) of each (text A, text B or None), exactly as `encode` gives them, in one
        batched call: what the training batches need, without the offsets, tokens and word ids."""
        prepare = lambda text, name: None if text is None else self._prepare(_check_text(text, name))  # noqa: E731
        out, inputs = [], [(prepare(a, "Text A"), prepare(b, "Text B")) for a, b in pairs]
        for (a, b), full in zip(pairs, self._tok.encode_batch([p if p[1] is not None else p[0] for p in inputs])):
            seq = full.sequence_ids
            if not seq.count(0) or (b is not None and not seq.count(1)) or max_length < _MIN_LENGTH[b is not None]:
                self.encode(a, b, max_length)  # raises the sentence `encode` would
            left = dict(zip((0, 1), _keep_lengths(seq.count(0), seq.count(1), max_length - seq.count(None))))
            keep = [i for i, s in enumerate(seq) if s is None or _take(left, s)]  # each text cut from its end
            ids, types = full.ids, full.type_ids  # each read copies the whole list out of the Rust encoding
            out.append(([ids[i] for i in keep], [types[i] for i in keep]))
        return out

    def _prepare(self, text: str) -> str:
        # transformers only matches "[MASK]" exactly; an uncased model should also
        # accept "[mask]". Same length, so offsets into the user's text still hold.
        # A family whose mask is "<mask>" (six characters too) takes a typed [MASK] as its own.
        mask = self.specials["mask"]
        if mask != MASK and len(mask) == len(MASK):
            return _TYPED_MASK.sub(mask, text)
        return _TYPED_MASK.sub(MASK, text) if self.lowercase else text

    def _select(self, full: RawEncoding, keep: list[int], truncated: int) -> Encoding:
        # each of full's fields is copied out of the Rust encoding whole at every read: read each once
        pick = lambda values: [values[i] for i in keep]  # noqa: E731
        ids, seq, words = pick(full.ids), pick(full.sequence_ids), pick(full.word_ids)
        # tokenizers restarts word numbering in B; continue it after A's last word.
        shift = 1 + max((w for w, s in zip(words, seq) if s == 0 and w is not None), default=-1)
        words = [w + shift if s == 1 and w is not None else w for w, s in zip(words, seq)]
        return Encoding(
            tokens=[self._vocab[i] for i in ids], ids=ids,
            segment_ids=pick(full.type_ids), offsets=[tuple(o) for o in pick(full.offsets)],
            sequence_ids=seq, word_ids=words, truncated=truncated)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Turn ids back into text, joining "##" pieces onto their word."""
        checked = [self._check_id(i) for i in ids]
        return self._tok.decode(checked, skip_special_tokens=skip_special_tokens)

    def _check_id(self, i: object) -> int:
        try:
            index = operator.index(i)
        except TypeError:
            raise InputError(f"Token ids must be whole numbers, got {i!r}.") from None
        if not 0 <= index < len(self._vocab):
            raise InputError(f"Token id {index} is outside the vocabulary (0..{len(self._vocab) - 1}).")
        return index

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def vocab(self) -> list[str]:
        """A copy of the vocabulary; position is the token id."""
        return list(self._vocab)

    def token_to_id(self, token: str) -> int | None:
        return self._ids.get(token)

    def id_to_token(self, i: int) -> str:
        return self._vocab[self._check_id(i)]

    # The five special ids and tokens; _check_vocab guarantees each token exists.
    pad_id = property(lambda self: self._ids[self.specials["pad"]])
    unk_id = property(lambda self: self._ids[self.specials["unk"]])
    cls_id = property(lambda self: self._ids[self.specials["cls"]])
    sep_id = property(lambda self: self._ids[self.specials["sep"]])
    mask_id = property(lambda self: self._ids[self.specials["mask"]])
    mask_token = property(lambda self: self.specials["mask"])
    unk_token = property(lambda self: self.specials["unk"])

    @property
    def special_ids(self) -> frozenset[int]:
        return frozenset(self._ids[t] for t in self.specials.values())

