"""What the Mask & predict page shows: the model's guesses at every [MASK], filled two ways.

`predict_masks` reads every mask from one forward pass (independent guesses);
`fill_iteratively` writes the leftmost mask's top guess and reads again, left to right;
`explore_masks` does both for the words a learner clicked and returns the page's whole
report. Records hold plain Python numbers, so tables and figures need no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from collections.abc import Iterable

import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import Encoding, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.views.inputs import mask_words, run, sentence


class NothingMasked(InputError):
    """The input has no [MASK]: nothing to predict (an empty state, not a mistake)."""


@dataclass(frozen=True)
class ReadOptions:
    """How the masks are read: the same for every pass of one request."""

    top_k: int = 5  # candidates kept per mask
    temperature: float = 1.0  # the logits are divided by it before the softmax
    causal: bool = False  # hide the right context: an ablation of a model trained to read both ways
    head_mask: torch.Tensor | None = None  # (L, H) of 0/1: heads switched off

    def check(self, model: BertForPreTraining, tokenizer: WordPieceTokenizer) -> None:
        if not model.has_mlm:
            raise InputError("this model has no MLM head (it was saved as a plain BertModel), so it cannot fill masks")
        if not 1 <= self.top_k <= tokenizer.vocab_size:
            raise InputError(f"top-k must be between 1 and {tokenizer.vocab_size}, got {self.top_k}")
        if not self.temperature > 0:
            raise InputError(f"temperature must be positive, got {self.temperature}")


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
class MaskReport:
    """Everything the Mask & predict page draws, from one call."""

    encoding: Encoding  # what the model read: the input with clicked words masked
    hidden: dict[int, str]  # position -> the token a clicked word had there before masking
    independent: Prediction  # every mask from one forward pass
    iterative: IterativeFill | None  # left-to-right filling; None with a single mask
    max_entropy: float  # log V: the entropy of a uniform guess over the vocabulary
    temperature: float = 1.0  # every probability and entropy is of softmax(logits / temperature)

    @property
    def entropy_column(self) -> str:
        return entropy_label(self.temperature)

    @property
    def independent_text(self) -> str:
        """The input with every mask replaced by its top-1 of the one pass, fills in «»."""
        return self._marked(self.independent.filled)

    @property
    def iterative_text(self) -> str | None:
        return None if self.iterative is None else self._marked(self.iterative.filled)

    def _marked(self, tokens: list[str]) -> str:
        return sentence(tokens, self.encoding.sequence_ids, [m.position for m in self.independent.masks])


def predict_masks(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, *,
                  top_k: int = 5, temperature: float = 1.0, causal: bool = False,
                  head_mask: torch.Tensor | None = None) -> Prediction:
    """Top-k candidates for every [MASK] in the encoding, each predicted independently."""
    options = ReadOptions(top_k, temperature, causal, head_mask)
    options.check(model, tokenizer)
    positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
    if not positions:
        raise NothingMasked("the text has no [MASK] to predict: write [MASK] where a word should be guessed")
    return predict_at(model, tokenizer, encoding, positions, options)


def predict_at(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding,
               positions: list[int], options: ReadOptions) -> Prediction:
    """One forward; top-k at the ascending `positions` (M of them), softmax at the options' temperature."""
    out = run(model, encoding, causal=options.causal, head_mask=options.head_mask, masked_positions=positions)
    return read_logits(tokenizer, encoding, positions, out.mlm_logits, options)


def read_logits(tokenizer: WordPieceTokenizer, encoding: Encoding, positions: list[int], mlm_logits: torch.Tensor,
                options: ReadOptions) -> Prediction:
    """Top-k at the ascending `positions` from the MLM logits there, (M, V'): what predict_at reads from its
    own forward, for a caller that already ran one (the Attention page's traced pass)."""
    logits = mlm_logits[:, : tokenizer.vocab_size].double()  # (M, V); ids past the vocabulary never come out
    scaled = logits / options.temperature
    probs = scaled.softmax(-1)
    entropy = -(probs * scaled.log_softmax(-1)).sum(-1)  # (M,)
    top = probs.topk(options.top_k, dim=-1)
    masks, filled = [], list(encoding.tokens)
    for row, position in enumerate(positions):
        ids = top.indices[row].tolist()
        candidates = [Candidate(tokenizer.id_to_token(i), i, float(p), float(logits[row, i]))
                      for i, p in zip(ids, top.values[row].tolist())]
        masks.append(MaskPrediction(position, candidates, float(entropy[row])))
        filled[position] = candidates[0].token
    return Prediction(encoding, masks, filled)


def fill_iteratively(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding, *,
                     top_k: int = 5, temperature: float = 1.0, causal: bool = False,
                     head_mask: torch.Tensor | None = None, max_steps: int | None = None) -> IterativeFill:
    """Fill the masks left to right: predict them all, write the leftmost's top-1, run again, ...

    One forward per step. With `max_steps`, the last allowed step writes every mask still
    open at once, so the sentence always ends up filled; `IterativeFill.at_once` says how many.
    """
    prediction = predict_masks(model, tokenizer, encoding, top_k=top_k, temperature=temperature,
                               causal=causal, head_mask=head_mask)
    return _fill_from(model, tokenizer, prediction, ReadOptions(top_k, temperature, causal, head_mask), max_steps)


def _fill_from(model: BertForPreTraining, tokenizer: WordPieceTokenizer, prediction: Prediction,
               options: ReadOptions, max_steps: int | None) -> IterativeFill:
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
        prediction = predict_at(model, tokenizer, current, remaining, options)


def explore_masks(model: BertForPreTraining, tokenizer: WordPieceTokenizer, encoding: Encoding,
                  masked_words: Iterable[int] = (), *, top_k: int = 5, temperature: float = 1.0,
                  causal: bool = False, max_steps: int | None = 12) -> MaskReport:
    """Mask the chosen words, predict every mask at once, and fill them left to right.

    Costs min(masks, max_steps) forwards: the independent view is the iterative one's first
    step. Raises NothingMasked when nothing is masked.
    """
    masked = mask_words(encoding, tokenizer.mask_id, masked_words, tokenizer.mask_token)
    independent = predict_masks(model, tokenizer, masked, top_k=top_k, temperature=temperature, causal=causal)
    iterative = None
    if len(independent.masks) > 1:
        options = ReadOptions(top_k, temperature, causal)
        iterative = _fill_from(model, tokenizer, independent, options, max_steps)
    hidden = {m.position: encoding.tokens[m.position] for m in independent.masks
              if encoding.ids[m.position] != tokenizer.mask_id}
    return MaskReport(masked, hidden, independent, iterative, math.log(tokenizer.vocab_size), temperature)


def entropy_label(temperature: float) -> str:
    """The entropy's name: at τ ≠ 1 it is the entropy of the tempered distribution, not the model's own."""
    return "entropy (nats)" if temperature == 1 else f"entropy at τ = {temperature:g} (nats)"


def share(p: float) -> str:
    """A probability as a percentage a reader can tell apart from zero: whole percents from 10%, two significant
    digits below (an untrained model's guesses read "0.046%", not "0%"), as the guesses chart's axis does."""
    if p >= 0.1:
        return f"{p:.0%}"
    return f"{100 * p:.2g}%" if 100 * p >= 0.001 else "< 0.001%"


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
               "independent": best.token, "p (independent)": best.prob, report.entropy_column: mask.entropy}
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


def replaced_rows(model: BertForPreTraining, encoding: Encoding) -> list[dict]:
    """ELECTRA's discriminator on every word token: the probability it gives that the token was replaced by
    the generator (the sigmoid of its logit), in sentence order; [CLS] and [SEP] are left out."""
    if not model.has_rtd:
        raise InputError("this model has no replaced-token head: only an ELECTRA discriminator has one")
    logits = run(model, encoding).rtd_logits[0].float().cpu()  # (T,)
    probs = torch.sigmoid(logits)
    return [{"position": i, "token": token, "logit": float(logits[i]), "p(replaced)": float(probs[i])}
            for i, (token, s) in enumerate(zip(encoding.tokens, encoding.sequence_ids)) if s is not None]
