"""Text in, numbers out: tokenize, run the model once (eval, no grad), return plain records.

Pages and the CLI call these; they get numpy arrays and Python numbers, never
tensors, so figures and tables need no torch. Mask prediction lives here too:
whole-word masking of clicked words, independent top-k per [MASK], left-to-right
iterative filling, and the rows the Mask & predict page shows.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, replace
from typing import Iterable

import numpy as np
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.model import BertForPreTraining, BertOutput
from bertviz_lab.tokenizer import Encoding, WordPieceTokenizer

MASK_TOKEN = "[MASK]"
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


class NothingMasked(InputError):
    """The input has no [MASK]: nothing to predict (an empty state, not a mistake)."""


@dataclass(frozen=True)
class Candidate:
    token: str
    id: int
    prob: float
    logit: float


@dataclass(frozen=True)
class MaskPrediction:
    position: int  # index in the token sequence
    candidates: list[Candidate]  # top-k, most probable first
    entropy: float  # of the full softmax, in nats: 0 = certain, log V = clueless


@dataclass(frozen=True)
class Prediction:
    encoding: Encoding
    masks: list[MaskPrediction]
    filled: list[str]  # tokens with every [MASK] replaced by its top candidate


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


def encode(tokenizer: WordPieceTokenizer, model: BertForPreTraining, text_a: str, text_b: str | None = None,
           *, allow_truncation: bool = True) -> Encoding:
    """Tokenize to fit the model; truncation is allowed (and reported) or an error."""
    if text_b is not None and not text_b.strip():
        text_b = None  # an empty second box means "one sentence"
    encoding = tokenizer.encode(text_a, text_b, max_length=model.config.max_position_embeddings)
    if encoding.truncated and not allow_truncation:
        raise InputError(f"the text is {len(encoding) + encoding.truncated} tokens long; this model reads at "
                         f"most {model.config.max_position_embeddings}")
    return encoding


@torch.no_grad()
def run(model: BertForPreTraining, encoding: Encoding, *, trace: bool = False, causal: bool = False,
        head_mask: torch.Tensor | None = None) -> BertOutput:
    """One eval-mode forward pass on a single encoded input."""
    device = next(model.parameters()).device
    ids = torch.tensor([encoding.ids], device=device)
    segments = torch.tensor([encoding.segment_ids], device=device)
    if head_mask is not None:
        head_mask = head_mask.to(device)
    model.eval()
    return model(ids, segments, trace=trace, causal=causal, head_mask=head_mask)


def predict_masks(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, *,
                  top_k: int = 5, temperature: float = 1.0, causal: bool = False,
                  head_mask: torch.Tensor | None = None) -> Prediction:
    """Top-k candidates for every [MASK] in the encoding, each predicted independently."""
    _check_options(model, tokenizer, top_k, temperature)
    positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
    if not positions:
        raise NothingMasked("the text has no [MASK] to predict: write [MASK] where a word should be guessed")
    return _predict_at(model, tokenizer, encoding, positions, top_k, temperature, causal, head_mask)


def _check_options(model: BertForPreTraining, tokenizer: WordPieceTokenizer, top_k: int, temperature: float) -> None:
    if not model.has_mlm:
        raise InputError("this model has no MLM head (it was saved as a plain BertModel), so it cannot fill masks")
    if not 1 <= top_k <= tokenizer.vocab_size:
        raise InputError(f"top-k must be between 1 and {tokenizer.vocab_size}, got {top_k}")
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature}")


def _predict_at(model, tokenizer, encoding: Encoding, positions: list[int], top_k: int, temperature: float,
                causal: bool, head_mask) -> Prediction:
    """One forward; top-k at `positions` (M of them), softmax at `temperature`."""
    logits = _mlm_logits(model, encoding, positions, causal, head_mask)[:, : tokenizer.vocab_size].double()
    # (M, V); ids past the vocabulary are never produced
    scaled = logits / temperature
    probs = scaled.softmax(-1)
    entropy = -(probs * scaled.log_softmax(-1)).sum(-1)  # (M,)
    top = probs.topk(top_k, dim=-1)
    masks, filled = [], list(encoding.tokens)
    for row, position in enumerate(positions):
        ids = top.indices[row].tolist()
        candidates = [Candidate(tokenizer.id_to_token(i), i, float(p), float(logits[row, i]))
                      for i, p in zip(ids, top.values[row].tolist())]
        masks.append(MaskPrediction(position, candidates, float(entropy[row])))
        filled[position] = candidates[0].token
    return Prediction(encoding, masks, filled)


@torch.no_grad()
def _mlm_logits(model: BertForPreTraining, encoding: Encoding, positions: list[int], causal: bool,
                head_mask: torch.Tensor | None) -> torch.Tensor:
    """MLM logits (M, V) at the given ascending positions; the head runs only there."""
    device = next(model.parameters()).device
    ids = torch.tensor([encoding.ids], device=device)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[0, positions] = True
    model.eval()
    return model(ids, torch.tensor([encoding.segment_ids], device=device), causal=causal, masked_positions=where,
                 head_mask=None if head_mask is None else head_mask.to(device)).mlm_logits


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
        prediction = _predict_at(model, tokenizer, current, remaining, top_k, temperature, causal, head_mask)


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


def attention_matrices(output: BertOutput) -> np.ndarray:
    """All attention weights of a traced pass as one (L, H, T, T) array."""
    return np.stack([steps.weights[0].float().cpu().numpy() for steps in output.trace])
