"""Text in, numbers out: tokenize, run the model once (eval, no grad), return plain records.

Pages and the CLI call these; they get numpy arrays and Python numbers, never
tensors, so figures and tables need no torch. `filling.py` builds the Mask &
predict page's report (whole-word masking, iterative filling) on `predict_masks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.model import BertForPreTraining, BertOutput
from bertviz_lab.tokenizer import Encoding, WordPieceTokenizer

MASK_TOKEN = "[MASK]"


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
    check_options(model, tokenizer, top_k, temperature)
    positions = [i for i, t in enumerate(encoding.ids) if t == tokenizer.mask_id]
    if not positions:
        raise NothingMasked("the text has no [MASK] to predict: write [MASK] where a word should be guessed")
    return predict_at(model, tokenizer, encoding, positions, top_k, temperature, causal, head_mask)


def check_options(model: BertForPreTraining, tokenizer: WordPieceTokenizer, top_k: int, temperature: float) -> None:
    if not model.has_mlm:
        raise InputError("this model has no MLM head (it was saved as a plain BertModel), so it cannot fill masks")
    if not 1 <= top_k <= tokenizer.vocab_size:
        raise InputError(f"top-k must be between 1 and {tokenizer.vocab_size}, got {top_k}")
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature}")


def predict_at(model, tokenizer, encoding: Encoding, positions: list[int], top_k: int, temperature: float,
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


def attention_matrices(output: BertOutput) -> np.ndarray:
    """All attention weights of a traced pass as one (L, H, T, T) array."""
    return np.stack([steps.weights[0].float().cpu().numpy() for steps in output.trace])
