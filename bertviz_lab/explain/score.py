"""F, the number a Why-this-guess explanation explains, and p, the probability a deletion curve follows.

For a masked-LM guess, F is the target word's logit at one [MASK]; with a contrast word ("why *mat* rather
than *rug*?"), F = logit(target) - logit(contrast), which cancels what the two words share, and the deletion
curve follows sigmoid(F) = p(target) / (p(target) + p(contrast)), a function of F alone: p(target) would fall just
as far when a removal kills both words. For an ELECTRA
discriminator, which guesses no words, F is its replaced-token logit at one chosen token. Every attribution
method explains this one function of the input.
"""

from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import packed_caches


@dataclass(frozen=True)
class Score:
    """Which logit is explained: `target`'s (minus `contrast`'s) at `position`, or, with target None, the
    discriminator's replaced-token logit at `position`. `vocab_size`: the tokenizer's (the softmax of p runs
    over it, as the guesses' table does)."""

    position: int
    target: int | None
    contrast: int | None = None
    vocab_size: int = 0

    @property
    def replaced(self) -> bool:
        """True for ELECTRA's discriminator: F is "was this token replaced?", p its sigmoid."""
        return self.target is None

    @property
    def follows(self) -> str:
        """What a deletion curve follows (`followed`): "p(target)", "sigmoid(F)" with a contrast, or "p(replaced)"."""
        return "p(replaced)" if self.replaced else "sigmoid(F)" if self.contrast is not None else "p(target)"

    def followed(self, model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        """(B,) what a deletion curve follows: p(target), or with a contrast sigmoid(F), the probability of the
        target among the two words (p(replaced) for the discriminator, which is sigmoid(F) too)."""
        f, p = self.evaluate(model, ids, segments)
        return torch.sigmoid(f) if self.contrast is not None else p

    def __call__(self, model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor,
                 inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """F for every row of a (B, T) batch: (B,)."""
        return self.evaluate(model, ids, segments, inputs_embeds)[0]

    def read(self, model: BertForPreTraining, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                                           torch.Tensor | None]:
        """(F, p, logits) in float64 from final hidden states (R, d) at this position, differentiable: logits (R, V')
        over the tokenizer's vocabulary for an MLM, None for the discriminator (whose F is its one logit). The
        readers that run the layers themselves (activation patching, the feed-forward neurons) score with this."""
        if self.replaced:
            logit = model.cls.discriminator(hidden[:, None])[:, 0].double()  # (R,)
            return logit, torch.sigmoid(logit), None
        logits = model.mlm_head(hidden).double()[:, : self.vocab_size or None]  # (R, V')
        f = logits[:, self.target] - (logits[:, self.contrast] if self.contrast is not None else 0)
        return f, logits.softmax(-1)[:, self.target], logits

    def evaluate(self, model: BertForPreTraining, ids: torch.Tensor, segments: torch.Tensor,
                 inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(F, p) for every row of a (B, T) batch, from one forward: p is p(target) at the position (softmax
        over the vocabulary), or the discriminator's p(replaced)."""
        segments = segments.expand(ids.shape[0], -1)
        if self.replaced:
            logit = model(ids, segments, inputs_embeds=inputs_embeds).rtd_logits[:, self.position]  # (B,)
            return logit, torch.sigmoid(logit)
        where = torch.zeros_like(ids, dtype=torch.bool)
        where[:, self.position] = True
        logits = model(ids, segments, masked_positions=where, inputs_embeds=inputs_embeds).mlm_logits  # (B, V')
        logits = logits[:, : self.vocab_size or logits.shape[-1]]
        f = logits[:, self.target] - (logits[:, self.contrast] if self.contrast is not None else 0)
        return f, logits.softmax(-1)[:, self.target]


class WordVectors(nn.Module):
    """The model's word-embedding lookup as a module of its own, made for one explanation: Captum hooks the
    module whose output it differentiates by, and hooking this one leaves the shared model (which other
    pages and sessions are running at the same time) untouched. Same weight, same rows."""

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        self.weight = embedding.weight  # the model's own tensor, not a copy
        self.padding_idx = embedding.padding_idx

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight, self.padding_idx)  # (B, T, e)


def scorer(model: BertForPreTraining, score: Score, segments: torch.Tensor) -> tuple[WordVectors, callable]:
    """A fresh WordVectors for `model` and F as a function of input ids that looks words up through it:
    what Captum's layer methods take (the layer, and the forward function)."""
    vectors = WordVectors(model.bert.embeddings.word_embeddings)

    def forward(ids: torch.Tensor) -> torch.Tensor:
        return score(model, ids, segments, inputs_embeds=vectors(ids))

    return vectors, forward


_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TWINS_LOCK = threading.Lock()


def frozen(model: BertForPreTraining) -> BertForPreTraining:
    """The same model in eval mode with parameters that ask for no gradient, sharing the weights' memory (and their
    packed copies). Attribution differentiates F by the input only, but the fast path's oneDNN linear (ops.py)
    computes a weight's gradient whenever the weight asks for one: on this twin it does not, and integrated gradients
    on BERT-base at 32 tokens take a quarter less time (figures in docs/benchmarks.md, "Why this guess: speed"). Made once per model, and again if its weights were moved or replaced
    (`.to(device)`, `.half()`, a state_dict loaded without copy); the shared model itself is never changed."""
    signature = tuple((p.data_ptr(), p.dtype, p.device) for p in model.parameters())
    with _TWINS_LOCK:
        entry = _TWINS.get(model)
        if entry is None or entry[0] != signature:
            memo = {id(p): nn.Parameter(p.detach(), requires_grad=False) for p in model.parameters()}
            memo.update(packed_caches(model))
            entry = _TWINS[model] = (signature, copy.deepcopy(model, memo).eval())
        twin = entry[1]
        twin.fast = model.fast  # settings a page may have changed since
        twin.attention_backend = model.attention_backend
        return twin
