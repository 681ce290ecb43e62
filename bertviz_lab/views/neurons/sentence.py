"""One sentence inside the feed-forward layers: every layer's activations (after the activation function), the most
active neurons at a chosen token with what each writes (its top promoted tokens), the chosen layer's activations
factorised into a few parts (NMF, as Ecco), and the guess at the [MASK] if there is one.

One forward pass on a twin of the model (neurons.read.one_sentence), one NMF of a (T, d_ff) matrix, and one
vocabulary reading of the top neurons' value vectors: fast enough for a base-sized model (bench/neurons.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.errors import InputError
from bertviz_lab.explain.score import Score
from bertviz_lab.neurons.factors import Factors, factorise
from bertviz_lab.neurons.read import check_neuron, run, sizes, twin
from bertviz_lab.neurons.values import NO_HEAD, promoted
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.why.explanation import target_id, top_guess

MAX_TOKENS = 128  # the longest text read
TOP_NEURONS = 10  # neurons listed at the chosen token
PROMOTED = 5  # tokens shown for each top neuron's value
GUESSES = 5


@dataclass(frozen=True)
class TopNeuron:
    neuron: int  # in the chosen layer, counted from 0
    activation: float  # at the chosen token
    promoted: tuple[str, ...]  # the tokens its value promotes most (() : the model has no MLM head)


@dataclass(frozen=True)
class SentenceView:
    ask: NeuronAsk
    encoding: Encoding
    tokens: list[str]  # (T,) specials included
    activations: np.ndarray  # (L, T, N) float32, after the activation function
    layer: int  # the chosen layer (ask.layer, or the last)
    token: int  # the chosen token position (ask.token, or the first [MASK], or the first word)
    neuron: int  # the chosen neuron (ask.neuron, or the most active at `token` in `layer`)
    top: list[TopNeuron]  # the most active neurons at `token` in `layer`, most active first
    factors: Factors  # of activations[layer] (T, N): strengths (T, k), loadings (k, N)
    mask: int | None  # the first [MASK]'s position (None: no [MASK])
    guesses: tuple[tuple[str, float], ...]  # the top guesses at the [MASK] with their probabilities (() : none)
    replaced: float | None = None  # ELECTRA's discriminator: p(replaced) at `token`; None otherwise
    no_head: str = ""  # values.NO_HEAD where the model has no MLM head

    @property
    def layers(self) -> int:
        return self.activations.shape[0]

    @property
    def width(self) -> int:
        return self.activations.shape[2]

    @property
    def guess(self) -> str:
        """The top guess at the [MASK] ("" : no [MASK], or no MLM head)."""
        return self.guesses[0][0] if self.guesses else ""


def encode(ckpt: Checkpoint, text: str) -> Encoding:
    """The text's encoding; an InputError sentence for a text of no words or longer than MAX_TOKENS."""
    encoding = ckpt.tokenizer.encode(text)
    if not any(not special for special in encoding.special_mask):
        raise InputError("the text has no words this model can read: type a sentence")
    if len(encoding) > MAX_TOKENS:
        raise InputError(f"the text is {len(encoding)} tokens long; this page reads texts of up to {MAX_TOKENS} "
                         "tokens: keep the sentence or two you want to look inside")
    return encoding


def masks(ckpt: Checkpoint, encoding: Encoding) -> list[int]:
    """The [MASK] positions."""
    return [i for i, t in enumerate(encoding.ids) if t == ckpt.tokenizer.mask_id]


def default_token(ckpt: Checkpoint, encoding: Encoding) -> int:
    """The first [MASK]'s position, else the first word's."""
    found = masks(ckpt, encoding)
    return found[0] if found else next(i for i, special in enumerate(encoding.special_mask) if not special)


def chosen_token(ckpt: Checkpoint, encoding: Encoding, ask: NeuronAsk) -> int:
    """`ask.token`, checked against the text, or `default_token`."""
    if ask.token is None:
        return default_token(ckpt, encoding)
    if not 0 <= ask.token < len(encoding):
        raise InputError(f"token {ask.token} does not exist: this text has tokens 0 to {len(encoding) - 1} "
                         f"({' '.join(encoding.tokens)})")
    return ask.token


def chosen_layer(ckpt: Checkpoint, ask: NeuronAsk) -> int:
    """`ask.layer` (checked against the model: neurons.read.check_neuron), or the last layer; and `ask.neuron`
    checked with it."""
    layer = sizes(ckpt.model)[0] - 1 if ask.layer is None else ask.layer
    check_neuron(ckpt.model, layer, ask.neuron)
    return layer


def tensors(ckpt: Checkpoint, encoding: Encoding) -> tuple[torch.Tensor, torch.Tensor]:
    """(1, T) ids and segment ids on the model's device."""
    device = next(ckpt.model.parameters()).device
    return (torch.tensor([encoding.ids], device=device), torch.tensor([encoding.segment_ids], device=device))


@dataclass(frozen=True)
class Scored:
    """What F is for a text: the Score (explain/score.py), the answer and foil as the vocabulary spells them ("" for
    the discriminator; foil "" : none), and F in words."""

    score: Score
    answer: str
    foil: str
    metric: str  # "logit(fish)", "logit(were) - logit(was)", "the replaced-token logit at 'bakes'"


def scored(ckpt: Checkpoint, encoding: Encoding, ask: NeuronAsk, token: int, need: bool = True) -> Scored | None:
    """F for the guess `ask` names: at the first [MASK], logit(answer) (- logit(foil)), the answer "" : the top
    guess; on ELECTRA's discriminator, the replaced-token logit at `token`. None (or, with `need`, an InputError
    sentence) where there is nothing to score: no [MASK], or no head."""
    model, tokenizer = ckpt.model, ckpt.tokenizer
    if model.has_rtd and not model.has_mlm:
        if encoding.special_mask[token]:
            raise InputError(f"token {token} ('{encoding.tokens[token]}') is not a word: the discriminator scores "
                             "whether a word was replaced")
        return Scored(Score(token, None), "", "", f"the replaced-token logit at '{encoding.tokens[token]}'")
    found = masks(ckpt, encoding)
    if not model.has_mlm or not found:
        if not need:
            return None
        if not model.has_mlm:
            raise InputError("this model has no masked-language-model head (it was saved as a plain BertModel), so "
                             "it makes no guess to look behind")
        raise InputError(f"the text has no {tokenizer.mask_token}: write {tokenizer.mask_token} where the guess goes "
                         f"(for example: the shark eats {tokenizer.mask_token} .)")
    at = found[0]
    answer = target_id(tokenizer, ask.answer, "answer") if ask.answer.strip() else top_guess(model, tokenizer,
                                                                                            encoding)
    foil = target_id(tokenizer, ask.foil, "foil") if ask.foil.strip() else None
    if foil == answer:
        raise InputError(f"the foil is the answer itself ('{tokenizer.id_to_token(answer)}'): pick another word, or "
                         "none")
    name = tokenizer.id_to_token
    metric = f"logit({name(answer)})" + ("" if foil is None else f" - logit({name(foil)})")
    return Scored(Score(at, answer, foil, tokenizer.vocab_size), name(answer), "" if foil is None else name(foil),
                  metric)


def _guesses(ckpt: Checkpoint, hidden: torch.Tensor, mask: int | None) -> tuple[tuple[str, float], ...]:
    """The top GUESSES at the [MASK] from the last layer's output (1, T, d), softmax over the tokenizer's vocabulary
    (as Mask & predict reads it)."""
    if mask is None or not ckpt.model.has_mlm:
        return ()
    with torch.no_grad():
        logits = ckpt.model.mlm_head(hidden[0, mask]).double()[: ckpt.tokenizer.vocab_size]  # (V,)
    p = logits.softmax(-1)
    top = torch.topk(p, min(GUESSES, p.shape[0]))
    return tuple((ckpt.tokenizer.id_to_token(int(i)), float(v)) for v, i in zip(top.values, top.indices))


def _top(ckpt: Checkpoint, layer: int, at: np.ndarray) -> list[TopNeuron]:
    """The TOP_NEURONS neurons of largest activation `at` (N,), with what each one's value promotes."""
    order = [int(i) for i in np.argsort(-at, kind="stable")[:TOP_NEURONS]]
    out = []
    for n in order:
        words: tuple[str, ...] = ()
        if ckpt.model.has_mlm:
            up, _ = promoted(ckpt.model, layer, n, PROMOTED, ckpt.tokenizer.vocab_size)
            words = tuple(ckpt.tokenizer.id_to_token(i) for i, _ in up)
        out.append(TopNeuron(n, float(at[n]), words))
    return out


def sentence_view(ckpt: Checkpoint, ask: NeuronAsk) -> SentenceView:
    """What one sentence does in the feed-forward layers; an InputError sentence for a layer, neuron or token that
    does not exist in this model or text."""
    model = ckpt.model
    layer = chosen_layer(ckpt, ask)
    encoding = encode(ckpt, ask.text)
    token = chosen_token(ckpt, encoding, ask)
    ids, segments = tensors(ckpt, encoding)
    with torch.no_grad():
        out = run(twin(model), ids, segments)
    activations = np.stack([a[0].float().cpu().numpy() for a in out.activations])  # (L, T, N)
    at = activations[layer, token]  # (N,)
    neuron = int(np.argmax(at)) if ask.neuron is None else ask.neuron
    found = masks(ckpt, encoding)
    mask = found[0] if found else None
    replaced = None
    if model.has_rtd and not model.has_mlm:
        with torch.no_grad():
            replaced = float(torch.sigmoid(model.cls.discriminator(out.hidden[:, token][:, None])[0, 0]))
    return SentenceView(
        ask, encoding, list(encoding.tokens), activations, layer, token, neuron, _top(ckpt, layer, at),
        factorise(activations[layer], ask.factors, ask.seed), mask, _guesses(ckpt, out.hidden, mask), replaced,
        "" if model.has_mlm else NO_HEAD)
