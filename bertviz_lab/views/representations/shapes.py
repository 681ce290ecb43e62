"""Shapes and padding: sentences of different lengths batched with [PAD], one forward pass, its shapes.

Two inputs: the learner's sentences (2 to 4, tokenized and right-padded by `pad_batch`), or seed
002's hand-typed `input_ids` and `attention_mask`. Two models: a randomly initialised BERT whose
sizes the learner edits (seeded, so everyone sees the same weights), or the active model.
`shapes_of` runs the batch once with the attention traced and returns what the tab shows as plain
numbers: every tensor's shape, the largest weight any query puts on a [PAD] key (exactly 0), and
how far each padded sentence's hidden states are from the same sentence run alone (float rounding).
A model without a pooler (DistilBERT, RoBERTa's masked-LM checkpoints, ELECTRA, token-tagging
fine-tunes) returns no pooler_output: the view says so instead of giving it a shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bertviz_lab.bert.config import BertConfig, show
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.rng import global_rng
from bertviz_lab.bert.tokenizer import CLS, PAD, WordPieceTokenizer
from bertviz_lab.errors import ConfigError, InputError
from bertviz_lab.views import inputs

# The BERT tutorial's offline example (seed text 002), as typed there: two samples padded with 0s to 7 positions,
# vocab_size=100.
SEED002_IDS = ((1, 5, 8, 9, 2, 0, 0), (1, 7, 6, 3, 4, 2, 0))
SEED002_MASK = ((1, 1, 1, 1, 1, 0, 0), (1, 1, 1, 1, 1, 1, 0))
SEED002_VOCAB = 100
# The sizes the learner edits -> the largest this tab builds: BERT-base's. A random model that size builds
# in about a second on 2 CPU cores and shows every shape a bigger one would.
LIMITS = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
MIN_SENTENCES, MAX_SENTENCES = 2, 4
SEED = 0  # torch.manual_seed of the random model (under bert/rng.py's `global_rng`): the same weights, every time


def random_config(vocab_size: int, pad_token_id: int = 0, **sizes: int) -> BertConfig:
    """A BertConfig of the edited sizes (the rest as Hugging Face's defaults); a bad size is an InputError."""
    for name, high in LIMITS.items():
        value = sizes.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise InputError(f"{name} must be a whole number from 1 to {high:,} here (BERT-base's size), "
                             f"got {show(value)}")
    try:
        return BertConfig(vocab_size=vocab_size, pad_token_id=pad_token_id, **sizes)
    except ConfigError as exc:  # e.g. heads that do not divide hidden_size: BertConfig's own words
        raise InputError(str(exc)) from None


def random_model(config: BertConfig) -> BertForPreTraining:
    """Hugging Face's `BertModel(config)`: embeddings, encoder, pooler, no heads, weights from seed 0."""
    with global_rng(SEED):
        return BertForPreTraining(config, mlm_head=False, nsp_head=False).eval()


def sentences(text: str) -> list[str]:
    """One sentence per line: 2 to 4 lines, none empty (blank lines at the very start or end are dropped)."""
    lines = text.splitlines() if isinstance(text, str) else []
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise InputError(f"line {number} is empty: write one sentence per line, with no blank lines")
    if not MIN_SENTENCES <= len(lines) <= MAX_SENTENCES:
        raise InputError(f"write {MIN_SENTENCES} to {MAX_SENTENCES} sentences, one per line "
                         f"(there {'is' if len(lines) == 1 else 'are'} {len(lines)})")
    return lines


@dataclass(frozen=True)
class Padded:
    """A batch ready for the model, with the token each position shows."""

    batch: inputs.Batch
    tokens: tuple[tuple[str, ...], ...]  # (B, T): the pad token where the attention_mask is 0
    pad_token: str = PAD  # how this tokenizer spells [PAD] and [CLS] (RoBERTa: <pad>, <s>)
    cls_token: str = CLS


def text_batch(tokenizer: WordPieceTokenizer, model: BertForPreTraining, lines: list[str]) -> Padded:
    """Each line encoded alone ([CLS] ... [SEP]), then right-padded with the pad token to the longest."""
    encodings = []
    for number, line in enumerate(lines, 1):
        try:
            encodings.append(inputs.encode(tokenizer, model, line, allow_truncation=False))
        except InputError as exc:
            raise InputError(f"sentence {number}: {str(exc).replace('Text A has', 'it has')}") from None
    device = next(model.parameters()).device
    batch = inputs.pad_batch(encodings, tokenizer.pad_id, device)
    T = batch.ids.shape[1]
    pad = tokenizer.specials["pad"]
    tokens = tuple(tuple(e.tokens) + (pad,) * (T - len(e)) for e in encodings)
    return Padded(batch, tokens, pad, tokenizer.specials["cls"])


def seed002_batch() -> Padded:
    """The BERT tutorial's ids and mask exactly (seed text 002); without its vocabulary, a token is shown as its id."""
    ids, mask = torch.tensor(SEED002_IDS), torch.tensor(SEED002_MASK)
    batch = inputs.Batch(ids, torch.zeros_like(ids), mask, tuple(int(n) for n in mask.sum(1)))
    tokens = tuple(tuple(f"id {i}" if m else PAD for i, m in zip(row, row_mask))
                   for row, row_mask in zip(SEED002_IDS, SEED002_MASK))
    return Padded(batch, tokens)


@dataclass(frozen=True)
class ShapesView:
    """What one forward pass of a padded batch shows. B sentences, T positions, d hidden, L layers."""

    tokens: tuple[tuple[str, ...], ...]  # (B, T)
    ids: np.ndarray  # (B, T) input_ids
    attention_mask: np.ndarray  # (B, T): 1 real token, 0 [PAD]
    lengths: tuple[int, ...]  # real tokens per sentence
    shapes: dict[str, tuple[int, ...]]  # tensor name -> its shape, read from the tensors (no pooler: no entry)
    layers: int  # L: hidden_states holds L + 1 tensors, attentions L
    row: int  # the sentence whose attention is kept
    weights: np.ndarray  # (L, heads, T, T) that sentence's attention weights, every layer and head
    pad_weight: float | None  # the largest weight any query put on a [PAD] key; None: no [PAD] in the batch
    alone_difference: float | None  # max |padded - alone| over the padded sentences; None: none padded
    pad_token: str = PAD  # the tokenizer's own spellings, for the captions
    cls_token: str = CLS

    def __post_init__(self) -> None:
        for array in (self.ids, self.attention_mask, self.weights):
            array.setflags(write=False)  # shared by every rerun and session through the cache

    @property
    def has_pooler(self) -> bool:
        return "pooler_output" in self.shapes

    def frame(self, what: str) -> pd.DataFrame:
        """"tokens", "input_ids" or "attention_mask" as a table: one row per sentence, one column per position."""
        values = {"tokens": self.tokens, "input_ids": self.ids, "attention_mask": self.attention_mask}[what]
        index = [f"sentence {b + 1}" for b in range(len(self.tokens))]
        return pd.DataFrame([list(row) for row in values], index=index,
                            columns=[str(t) for t in range(len(self.tokens[0]))])

    def evenly_spread(self, layer: int, head: int, within: float = 0.1) -> bool:
        """True when, in this layer and head, every query gives each real key 1/n of its weight to within
        `within` (relative): what small random weights do, their scores q·k being all near 0."""
        real = self.lengths[self.row]
        return bool(np.allclose(self.weights[layer, head][:, :real], 1 / real, rtol=within, atol=0))

    def printout(self) -> str:
        """Every shape as a printout; the last_hidden_state and pooler_output lines are seed text 002's, verbatim
        (a model without a pooler returns pooler_output=None, as Hugging Face's does)."""
        s = {name: f"torch.Size({list(shape)})" for name, shape in self.shapes.items()}
        L = self.layers
        return "\n".join([
            f"input_ids shape: {s['input_ids']}",
            f"attention_mask shape: {s['attention_mask']}",
            f"last_hidden_state shape: {s['last_hidden_state']}",
            f"pooler_output shape : {s['pooler_output']}" if self.has_pooler else "pooler_output: None (no pooler)",
            f"hidden_states: {L + 1} tensors (the embeddings, then {L} layers), each {s['hidden_states']}",
            f"attentions: {L} tensors (one per layer), each {s['attentions']}"])


def _pad_weight(trace: list, attention_mask: torch.Tensor) -> float | None:
    """The largest weight any query, in any layer and head, puts on a [PAD] key."""
    pad_keys = attention_mask == 0  # (B, T)
    if not pad_keys.any():
        return None
    per_layer = [steps.weights.masked_select(pad_keys[:, None, None, :]).max() for steps in trace]
    return float(torch.stack(per_layer).max())


def _alone_difference(model: BertForPreTraining, batch: inputs.Batch, output) -> float | None:
    """Max |difference|, over every hidden state (all L + 1) of each padded sentence's real tokens and its
    pooler_output (when the model has a pooler), between the padded batch and the same sentence run by itself,
    unpadded."""
    T, worst = batch.ids.shape[1], None
    for b, n in enumerate(batch.lengths):
        if n == T:
            continue
        alone = inputs.Batch(batch.ids[b:b + 1, :n], batch.segments[b:b + 1, :n],
                             batch.attention_mask[b:b + 1, :n], (n,))
        own = inputs.run_batch(model, alone)
        gaps = [(padded[b, :n] - mine[0]).abs().max() for padded, mine in zip(output.hidden_states, own.hidden_states)]
        if output.pooled is not None:
            gaps.append((output.pooled[b] - own.pooled[0]).abs().max())
        gap = float(torch.stack(gaps).max())
        worst = gap if worst is None else max(worst, gap)
    return worst


def shapes_of(model: BertForPreTraining, padded: Padded, row: int = 0) -> ShapesView:
    """One traced forward pass of the batch; `row` picks the sentence whose attention weights are kept."""
    batch = padded.batch
    B = batch.ids.shape[0]
    if not 0 <= row < B:
        raise InputError(f"there is no sentence {row + 1}: the batch has {B}")
    out = inputs.run_batch(model, batch, trace=True)
    shapes = {"input_ids": batch.ids.shape, "attention_mask": batch.attention_mask.shape,
              "last_hidden_state": out.hidden_states[-1].shape,
              **({} if out.pooled is None else {"pooler_output": out.pooled.shape}),
              "hidden_states": out.hidden_states[0].shape, "attentions": out.trace[0].weights.shape}
    weights = torch.stack([steps.weights[row] for steps in out.trace])  # (L, heads, T, T)
    return ShapesView(
        tokens=padded.tokens, ids=batch.ids.cpu().numpy(), attention_mask=batch.attention_mask.cpu().numpy(),
        lengths=tuple(batch.lengths), shapes={k: tuple(v) for k, v in shapes.items()}, layers=len(out.trace),
        row=row, weights=weights.float().cpu().numpy(), pad_weight=_pad_weight(out.trace, batch.attention_mask),
        alone_difference=_alone_difference(model, batch, out), pad_token=padded.pad_token,
        cls_token=padded.cls_token)
