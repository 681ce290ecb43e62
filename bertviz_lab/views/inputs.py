"""A learner's text as the model reads it: the encoding, its words, masked words, one forward.

`encode` tokenizes to fit the model, `run` is one eval-mode forward pass (no grad) on
one encoding, and the rest turns tokens back into what a person typed: the words
(with their token positions, for the clickable pills), whole-word masking of chosen
words, and tokens joined back into a readable sentence (a repeated word's label numbered with `subscript`).
Every page's view starts here.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, replace
from collections.abc import Iterable

import numpy as np
import torch

from bertviz_lab.bert.model import BertForPreTraining, BertOutput
from bertviz_lab.bert.tokenizer import MASK, SEP, Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")  # see `subscript`
_JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner: in emoji sequences, Persian and Indic words
_SELECTORS = "\ufe0e\ufe0f"  # text and emoji presentation: the red heart emoji is U+2764 U+FE0F
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), first and last of each range: drawn as nothing
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


@dataclass(frozen=True)
class Word:
    """One word of the input as the pills show it."""

    index: int  # the encoding's word id
    text: str  # as typed (from the offsets), invisible characters removed
    label: str  # text, with a subscript occurrence number when the same text came before ("the₂")
    positions: tuple[int, ...]  # its token positions (several for a word split into pieces)
    is_mask: bool  # a typed [MASK]


def subscript(n: int) -> str:
    """`n` in subscript digits, as labels write a count: the second "the" is "the₂", the last head of four h₃."""
    return str(n).translate(_SUBSCRIPTS)


def encode(tokenizer: WordPieceTokenizer, model: BertForPreTraining, text_a: str, text_b: str | None = None,
           *, allow_truncation: bool = True) -> Encoding:
    """Tokenize to fit the model; truncation is allowed (and reported) or an error."""
    if text_b is not None and not text_b.strip():
        text_b = None  # an empty second box means "one sentence"
    encoding = tokenizer.encode(text_a, text_b, max_length=model.config.max_tokens)
    if encoding.truncated and not allow_truncation:
        raise InputError(f"the text is {len(encoding) + encoding.truncated} tokens long; this model reads at "
                         f"most {model.config.max_tokens}")
    return encoding


@torch.no_grad()
def run(model: BertForPreTraining, encoding: Encoding, *, trace: bool = False, causal: bool = False,
        head_mask: torch.Tensor | None = None, masked_positions: list[int] | None = None,
        encoder_only: bool = False) -> BertOutput:
    """One eval-mode forward pass on a single encoded input.

    With `masked_positions` (ascending), the MLM head runs only there and `mlm_logits` is (M, V);
    with `encoder_only`, the encoder and pooler only (hidden states, no logits).
    """
    device = next(model.parameters()).device
    ids = torch.tensor([encoding.ids], device=device)  # (1, T)
    segments = torch.tensor([encoding.segment_ids], device=device)
    where = None
    if masked_positions is not None:
        where = torch.zeros_like(ids, dtype=torch.bool)
        where[0, masked_positions] = True
    model.eval()
    return model(ids, segments, trace=trace, causal=causal, masked_positions=where, encoder_only=encoder_only,
                 head_mask=None if head_mask is None else head_mask.to(device))


@dataclass(frozen=True)
class Batch:
    """Encodings of different lengths stacked into (B, T) tensors, the shorter ones padded with [PAD]."""

    ids: torch.Tensor  # (B, T)
    segments: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T): 1 for a real token, 0 for [PAD]
    lengths: tuple[int, ...]  # each encoding's own length


def pad_batch(encodings: list[Encoding], pad_id: int, device: torch.device | str = "cpu") -> Batch:
    """Right-pad every encoding to the longest one, as Hugging Face's tokenizers do with padding=True."""
    T = max(len(e) for e in encodings)
    ids = torch.full((len(encodings), T), pad_id, dtype=torch.long)
    segments = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, :len(e)] = torch.tensor(e.ids)
        segments[row, :len(e)] = torch.tensor(e.segment_ids)
        mask[row, :len(e)] = 1
    return Batch(ids.to(device), segments.to(device), mask.to(device), tuple(len(e) for e in encodings))


@torch.no_grad()
def run_batch(model: BertForPreTraining, batch: Batch, *, trace: bool = False, encoder_only: bool = True) -> BertOutput:
    """One eval-mode forward pass on a padded batch; [PAD] keys get attention weight 0.

    With `encoder_only` (the default) it is the encoder and pooler only: hidden states, no (B, T, V) logits."""
    model.eval()
    return model(batch.ids, batch.segments, batch.attention_mask, trace=trace, encoder_only=encoder_only)


def attention_matrices(output: BertOutput) -> np.ndarray:
    """All attention weights of a traced pass as one (L, H, T, T) numpy array."""
    return np.stack([steps.weights[0].float().cpu().numpy() for steps in output.trace])


def mask_words(encoding: Encoding, mask_id: int, word_indices: Iterable[int], mask_token: str = MASK) -> Encoding:
    """A copy of `encoding` with every piece of the chosen words (by word id) replaced by [MASK].

    Whole-word masking: "unbelievable" = un ##believ ##able becomes [MASK] [MASK] [MASK].
    [CLS] and [SEP] belong to no word and are never masked; the input is not changed.
    """
    chosen = set(word_indices)
    present = {w for w in encoding.word_ids if w is not None}
    missing = sorted(chosen - present)
    if missing:
        raise InputError(f"word {missing[0]} is not in the text, which has {len(present)} words (0 to "
                         f"{len(present) - 1})")
    hit = [w is not None and w in chosen for w in encoding.word_ids]
    return replace(encoding, ids=[mask_id if h else i for h, i in zip(hit, encoding.ids)],
                   tokens=[mask_token if h else t for h, t in zip(hit, encoding.tokens)],
                   segment_ids=list(encoding.segment_ids), offsets=list(encoding.offsets),
                   sequence_ids=list(encoding.sequence_ids), word_ids=list(encoding.word_ids))


def words(encoding: Encoding, text_a: str, text_b: str | None = None, mask_token: str = MASK) -> list[Word]:
    """The words of the input, in order, with the text the user typed for each (`mask_token`: the model's)."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(encoding.word_ids):
        if word is not None:
            groups.setdefault(word, []).append(position)
    found, used = [], set()
    for index, positions in groups.items():
        source = text_a if encoding.sequence_ids[positions[0]] == 0 else (text_b or "")
        start, end = encoding.offsets[positions[0]][0], encoding.offsets[positions[-1]][1]
        text = _visible(source[start:end]) or _join_pieces([encoding.tokens[p] for p in positions])
        label, seen = text, 1
        while label in used:  # pills need distinct labels: "the", "the₂"
            seen += 1
            label = f"{text}{subscript(seen)}"
        used.add(label)
        is_mask = all(encoding.tokens[p] == mask_token for p in positions)
        found.append(Word(index, text, label, tuple(positions), is_mask))
    return found


def _visible(text: str) -> str:
    """Drop control, format (zero-width, direction marks) and unassigned characters."""
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("C")).strip()


def hidden_characters(text: str) -> list[str]:
    """The invisible or direction-changing characters in `text` as code points ("U+202E"), each once, in order.

    These are Unicode's format characters (bidi marks, embeddings, overrides and isolates, zero-width spaces, the
    byte-order mark, the soft hyphen, tag characters), its default-ignorable code points (Hangul fillers, variation
    selectors, the combining grapheme joiner) and the line and paragraph separators. A text box draws them as
    nothing, or draws the words around them in another order, so what a reader sees is not what the model reads.
    Writing is not counted: a zero-width joiner or non-joiner between two visible characters that are not ASCII
    (an emoji sequence, a Persian or Indic word), and an emoji or text presentation selector (U+FE0F, U+FE0E) right
    after one (the red heart U+2764 U+FE0F, the rainbow flag U+1F3F3 U+FE0F U+200D U+1F308) or in a keycap
    ("1" U+FE0F U+20E3).
    """
    found: dict[str, None] = {}  # an ordered set
    for i, ch in enumerate(text):
        if invisible(ch) and not _writing(text, i):
            found.setdefault(f"U+{ord(ch):04X}")
    return list(found)


def invisible(ch: str) -> bool:
    """True for a format character, a line or paragraph separator, or a default-ignorable code point."""
    return unicodedata.category(ch) in ("Cf", "Zl", "Zp") or any(low <= ord(ch) <= high for low, high in _IGNORABLE)


def _writing(text: str, i: int) -> bool:
    """True if the invisible text[i] is part of the writing around it (see `hidden_characters`)."""
    if text[i] in _JOINERS:
        after_selector = i > 1 and text[i - 1] in _SELECTORS and _drawn(text[i - 2])  # the rainbow flag's ZWJ
        return 0 < i < len(text) - 1 and (_drawn(text[i - 1]) or after_selector) and _drawn(text[i + 1])
    if text[i] in _SELECTORS:
        keycap = text[i] == "\ufe0f" and text[i - 1:i] in tuple("0123456789#*") and text[i + 1:i + 2] == "\u20e3"
        return (i > 0 and _drawn(text[i - 1])) or keycap
    return False


def _drawn(ch: str) -> bool:
    """A visible character that is not ASCII."""
    return ord(ch) > 127 and not ch.isspace() and not unicodedata.category(ch).startswith("C") and not invisible(ch)


def _join_pieces(tokens: list[str]) -> str:
    return "".join(t[2:] if t.startswith("##") else t for t in tokens)


def sentence(tokens: list[str], sequence_ids: list[int | None], marked: Iterable[int] = ()) -> str:
    """Tokens back to readable text: "##" pieces glued, [CLS] dropped, segments joined by [SEP].

    Tokens at the `marked` positions are wrapped in «», so the filled words stand out.
    """
    marked = set(marked)
    segments: dict[int, list[str]] = {}
    for position, (token, segment) in enumerate(zip(tokens, sequence_ids)):
        if segment is None:
            continue
        words_so_far = segments.setdefault(segment, [])
        piece = token[2:] if token.startswith("##") and len(token) > 2 else token
        piece = f"«{piece}»" if position in marked else piece
        if token.startswith("##") and len(token) > 2 and words_so_far:
            words_so_far[-1] += piece
        else:
            words_so_far.append(piece)
    return f" {SEP} ".join(" ".join(segments[s]) for s in sorted(segments))
