"""One neuron (layer, index): where it fires over a corpus (its top contexts, the firing token of each: the "key"),
what it writes (its value read through the MLM head: the tokens it promotes and suppresses), and what switching it
off does to the current guess (zeroed, and set to its mean over the corpus) when the text has a [MASK]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.behind import SwitchOff, switch_off
from bertviz_lab.neurons.index import NeuronIndex
from bertviz_lab.neurons.read import run, sizes, twin
from bertviz_lab.neurons.values import NO_HEAD, promoted
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.sentence import chosen_layer, chosen_token, encode, scored, tensors

CONTEXTS = 12  # top contexts shown (neurons.index.K)
PROMOTED = 10  # tokens promoted and suppressed shown


@dataclass(frozen=True)
class Firing:
    """One top context: the sentence's tokens, the firing token's position, the activation there."""

    sentence: int  # in the corpus
    position: int
    value: float
    tokens: tuple[str, ...]

    @property
    def token(self) -> str:
        return self.tokens[self.position]


@dataclass(frozen=True)
class NeuronView:
    ask: NeuronAsk
    layer: int
    neuron: int
    contexts: list[Firing]  # the corpus's top contexts, highest activation first
    mean: float  # the neuron's mean activation over the corpus's tokens
    promoted: list[tuple[str, float]] | None  # the tokens its value promotes most, with scores (None: no MLM head)
    suppressed: list[tuple[str, float]] | None  # ... and suppresses most
    no_head: str  # values.NO_HEAD for a model with no MLM head, else ""
    tokens: list[str]  # the text's tokens
    activation: np.ndarray  # (T,) this neuron's activation at each token of the text
    switch: SwitchOff | None  # neurons.behind.SwitchOff on the text's guess (None: no [MASK] and not a discriminator)
    guess: str  # the current guess at the [MASK] ("" : none)
    guess_zero: str  # the top guess with the neuron switched off (zeroed at every position)
    guess_mean: str  # ... set to its corpus mean
    position: int | None  # the [MASK] (or the discriminator's scored token), None without a switch-off
    metric: str  # what F is, in words: "logit(bread)", "logit(were) - logit(was)", "the replaced-token logit"
    corpus: str = ""  # the corpus's name

    @property
    def firing(self) -> list[str]:
        """The firing token of each top context."""
        return [c.token for c in self.contexts]


def _check_index(ckpt: Checkpoint, index: NeuronIndex) -> None:
    if index.values.shape[:2] != sizes(ckpt.model):
        layers, width = index.values.shape[:2]
        raise InputError(f"the corpus index was built for another model ({layers} layers of {width} neurons; this "
                         f"one has {sizes(ckpt.model)[0]} of {sizes(ckpt.model)[1]}): build it again for this model")


def _name(ckpt: Checkpoint, i: int) -> str:
    return "" if i < 0 else ckpt.tokenizer.id_to_token(int(i))


def neuron_view(ckpt: Checkpoint, index: NeuronIndex, ask: NeuronAsk, corpus: str = "") -> NeuronView:
    """One neuron's top contexts over `index` (neurons.index.NeuronIndex of this model), its value, and the
    switch-off on `ask.text`'s guess; `ask.neuron` None: the most active neuron at the chosen token."""
    model, tokenizer = ckpt.model, ckpt.tokenizer
    layer = chosen_layer(ckpt, ask)
    _check_index(ckpt, index)
    encoding = encode(ckpt, ask.text)
    token = chosen_token(ckpt, encoding, ask)
    ids, segments = tensors(ckpt, encoding)
    with torch.no_grad():
        out = run(twin(model), ids, segments)
    acts = out.activations[layer][0].float().cpu().numpy()  # (T, N)
    neuron = int(np.argmax(acts[token])) if ask.neuron is None else ask.neuron
    contexts = [Firing(c.sentence, c.position, c.value, c.tokens) for c in index.contexts(layer, neuron, CONTEXTS)]
    mean = float(index.mean[layer, neuron])
    up = down = None
    if model.has_mlm:
        up_ids, down_ids = promoted(model, layer, neuron, PROMOTED, tokenizer.vocab_size)
        up = [(_name(ckpt, i), s) for i, s in up_ids]
        down = [(_name(ckpt, i), s) for i, s in down_ids]
    score = scored(ckpt, encoding, ask, token, need=False)
    switch, names, position, metric = None, ("", "", ""), None, ""
    if score is not None:
        switch = switch_off(model, ids, segments, score.score, layer, neuron, mean)
        names = tuple(_name(ckpt, i) for i in (switch.top, switch.top_zero, switch.top_mean))
        position, metric = score.score.position, score.metric
    return NeuronView(ask, layer, neuron, contexts, mean, up, down, "" if model.has_mlm else NO_HEAD,
                      list(encoding.tokens), acts[:, neuron].copy(), switch, *names, position, metric, corpus)
