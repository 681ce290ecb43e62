"""Filling masks for the Mask & predict page: whole-word masking of clicked words,
left-to-right iterative filling, readable sentences, and the report and rows the page shows.

Built on `analysis.predict_masks`: every prediction here is one eval forward pass.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, replace
from typing import Iterable

import torch

from bertviz_lab.analysis import MASK_TOKEN, MaskPrediction, Prediction, predict_at, predict_masks
from bertviz_lab.errors import InputError
from bertviz_lab.model import BertForPreTraining
from bertviz_lab.tokenizer import Encoding, WordPieceTokenizer

_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


@dataclass(frozen=True)
class FillStep:
    """One pass of left-to-right filling: what the model saw and what it wrote."""

    positions: list[int]  # filled at this step: the leftmost mask, or all that remain at the cap
    prediction: Prediction  # every remaining mask, predicted from the sentence as it stood
    tokens: list[str]  # the sentence after this step's fill

    @property
    def fills(self) -> list[MaskPrediction]:
        return [m for m in self.prediction.masks if m.position in self.positions]


@dataclass(frozen=True)
class IterativeFill:
    encoding: Encoding  # the masked input
    steps: list[FillStep]
    filled: list[str]  # tokens with every mask filled

    @property
    def at_once(self) -> int:
        """How many masks the last step filled together because the step cap was reached (0: none)."""
        last = len(self.steps[-1].positions) if self.steps else 0
        return last if last > 1 else 0


@dataclass(frozen=True)
class Word:
    """One word of the input as the pills show it."""

    index: int  # the encoding's word id
    text: str  # as typed (from the offsets), invisible characters removed
    label: str  # text, with a subscript occurrence number when the same text came before ("the₂")
    positions: tuple[int, ...]  # its token positions (several for a word split into pieces)
    is_mask: bool  # a typed [MASK]


@dataclass(frozen=True)
class MaskReport:
    """Everything the Mask & predict page draws, from one call."""

    encoding: Encoding  # what the model read: the input with clicked words masked
    hidden: dict[int, str]  # position -> the token a clicked word had there before masking
    independent: Prediction  # every mask from one forward pass
    iterative: IterativeFill | None  # left-to-right filling; None with a single mask
    max_entropy: float  # log V: the entropy of a uniform guess over the vocabulary

    @property
    def masked_text(self) -> str:
        """The input as the model reads it, [MASK]s included."""
        return sentence(self.encoding.tokens, self.encoding.sequence_ids)

    @property
    def independent_text(self) -> str:
        """The input with every mask replaced by its top-1 of the one pass, fills in «»."""
        return self._marked(self.independent.filled)

    @property
    def iterative_text(self) -> str | None:
        return None if self.iterative is None else self._marked(self.iterative.filled)

    def _marked(self, tokens: list[str]) -> str:
        return sentence(tokens, self.encoding.sequence_ids, [m.position for m in self.independent.masks])


def mask_words(encoding: Encoding, mask_id: int, word_indices: Iterable[int],
               mask_token: str = MASK_TOKEN) -> Encoding:
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


def fill_iteratively(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, *,
                     top_k: int = 5, temperature: float = 1.0, causal: bool = False,
                     head_mask: torch.Tensor | None = None, max_steps: int | None = None) -> IterativeFill:
    """Fill the masks left to right: predict them all, write the leftmost's top-1, run again, ...

    One forward per step. With `max_steps`, the last allowed step writes every mask still
    open at once, so the sentence always ends up filled; `IterativeFill.at_once` says how many.
    """
    prediction = predict_masks(model, tokenizer, encoding, top_k=top_k, temperature=temperature,
                               causal=causal, head_mask=head_mask)
    return _fill_from(model, tokenizer, prediction, top_k, temperature, causal, head_mask, max_steps)


def _fill_from(model, tokenizer, prediction: Prediction, top_k: int, temperature: float, causal: bool,
               head_mask, max_steps: int | None) -> IterativeFill:
    """fill_iteratively, starting from the first step's prediction (saves one forward)."""
    encoding = prediction.encoding
    remaining = [m.position for m in prediction.masks]  # tracked here, so a fill that is [MASK] still ends
    limit = len(remaining) if max_steps is None else max(1, min(max_steps, len(remaining)))
    ids, tokens, steps = list(encoding.ids), list(encoding.tokens), []
    while True:
        chosen = prediction.masks if len(steps) + 1 == limit else prediction.masks[:1]
        for mask in chosen:
            ids[mask.position], tokens[mask.position] = mask.candidates[0].id, mask.candidates[0].token
        steps.append(FillStep([m.position for m in chosen], prediction, list(tokens)))
        remaining = remaining[len(chosen):]
        if not remaining:
            return IterativeFill(encoding, steps, tokens)
        current = replace(encoding, ids=list(ids), tokens=list(tokens))
        prediction = predict_at(model, tokenizer, current, remaining, top_k, temperature, causal, head_mask)


def words(encoding: Encoding, text_a: str, text_b: str | None = None) -> list[Word]:
    """The words of the input, in order, with the text the user typed for each."""
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
            label = f"{text}{str(seen).translate(_SUBSCRIPTS)}"
        used.add(label)
        is_mask = all(encoding.tokens[p] == MASK_TOKEN for p in positions)
        found.append(Word(index, text, label, tuple(positions), is_mask))
    return found


def _visible(text: str) -> str:
    """Drop control, format (zero-width, direction marks) and unassigned characters."""
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("C")).strip()


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
    return " [SEP] ".join(" ".join(segments[s]) for s in sorted(segments))


def explore_masks(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding,
                  masked_words: Iterable[int] = (), *, top_k: int = 5, temperature: float = 1.0,
                  causal: bool = False, max_steps: int | None = 12) -> MaskReport:
    """Mask the chosen words, predict every mask at once, and fill them left to right.

    Costs min(masks, max_steps) forwards: the independent view is the iterative one's first
    step. Raises NothingMasked when nothing is masked.
    """
    masked = mask_words(encoding, tokenizer.mask_id, masked_words)
    independent = predict_masks(model, tokenizer, masked, top_k=top_k, temperature=temperature, causal=causal)
    iterative = None
    if len(independent.masks) > 1:
        iterative = _fill_from(model, tokenizer, independent, top_k, temperature, causal, None, max_steps)
    hidden = {m.position: encoding.tokens[m.position] for m in independent.masks
              if encoding.ids[m.position] != tokenizer.mask_id}
    return MaskReport(masked, hidden, independent, iterative, math.log(tokenizer.vocab_size))


def candidate_rows(mask: MaskPrediction) -> list[dict]:
    """One mask's top-k as table rows: rank, token, probability, logit."""
    return [{"rank": rank, "token": c.token, "probability": c.prob, "logit": c.logit}
            for rank, c in enumerate(mask.candidates, start=1)]


def mask_rows(report: MaskReport) -> list[dict]:
    """One row per mask: the hidden word, the independent guess and, with several masks, the iterative one."""
    picks = {}
    for number, step in enumerate(report.iterative.steps if report.iterative else [], start=1):
        picks.update({m.position: (m.candidates[0], number) for m in step.fills})
    rows = []
    for number, mask in enumerate(report.independent.masks, start=1):
        best = mask.candidates[0]
        row = {"mask": number, "position": mask.position, "hidden word": report.hidden.get(mask.position, ""),
               "independent": best.token, "p (independent)": best.prob, "entropy (nats)": mask.entropy}
        if mask.position in picks:
            pick, step = picks[mask.position]
            row.update({"left-to-right": pick.token, "p (left-to-right)": pick.prob, "step": step})
        rows.append(row)
    return rows


def step_rows(fill: IterativeFill) -> list[dict]:
    """One row per left-to-right step: what was written where, and the sentence after it."""
    return [{"step": number, "positions": ", ".join(str(p) for p in step.positions),
             "wrote": " ".join(m.candidates[0].token for m in step.fills),
             "probability": step.fills[0].candidates[0].prob if len(step.fills) == 1 else None,
             "sentence after this step": sentence(step.tokens, fill.encoding.sequence_ids, step.positions)}
            for number, step in enumerate(fill.steps, start=1)]
