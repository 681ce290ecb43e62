"""The neurons a [MASK] guess rests on: the guess's F (logit(answer), or logit(answer) - logit(foil)) attributed to
every feed-forward neuron's activation at the [MASK] (integrated gradients as Dai et al. 2022, or activation x
gradient), the top neurons, and the causal test: switch off the top k and compare with k random neurons drawn from
the same layers, `draws` times (neurons.behind).

`PAIRS` holds two built-in guesses, one grammatical (number agreement) and one of word knowledge (a story-world fact
the shipped model knows); `niu_view` runs the causal test on both, so the page shows side by side whether the top
neurons of a "fact" matter more than those of agreement (Niu et al. 2024: the same edits move syntax too).
ELECTRA's discriminator: F is the replaced-token logit at the scored token, and no vocabulary reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertviz_lab.bert.checkpoint import Checkpoint
from bertviz_lab.corpus.minimal_pairs import by_key as by_pair
from bertviz_lab.errors import InputError
from bertviz_lab.neurons.behind import Attribution, CausalTest, attribute, causal_test
from bertviz_lab.neurons.read import run, sizes, twin
from bertviz_lab.neurons.values import promoted
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.sentence import chosen_token, encode, scored, tensors


@dataclass(frozen=True)
class Guess:
    """A built-in guess: a sentence with a [MASK], its answer and foil, and what it tests."""

    key: str  # "grammar" | "knowledge"
    title: str  # for a picker
    text: str
    answer: str
    foil: str
    note: str  # what it asks, in a sentence


_AGREEMENT = by_pair("agreement-0")  # "the painters [MASK] calm .": were, not was
# A story-world fact (corpus/lexicon.py ANIMAL_FOOD: sharks eat fish), the shipped model's top guess here: p(fish)
# 0.22, the next guess 'leaves' (what giraffes eat) 0.13 (tests/views/neurons/test_behind.py checks it).
PAIRS: tuple[Guess, Guess] = (
    Guess("grammar", "number agreement", _AGREEMENT.clean, _AGREEMENT.answer, _AGREEMENT.foil,
          "a grammatical guess: the verb agrees with its plural subject"),
    Guess("knowledge", "word knowledge", "the shark eats [MASK] .", "fish", "leaves",
          "a fact of the story world: what sharks eat"),
)


@dataclass(frozen=True)
class TopRow:
    layer: int
    neuron: int
    score: float  # attribution of F to its activation at the position
    activation: float  # its activation there
    promoted: str  # the token its value promotes most ("" : no MLM head)


@dataclass(frozen=True)
class BehindView:
    ask: NeuronAsk
    tokens: list[str]
    position: int  # the [MASK] (the discriminator: the token scored)
    answer: str  # "" for the discriminator
    foil: str  # "" : none
    metric: str  # F in words
    attribution: Attribution
    top: list[TopRow]  # the k neurons of largest attribution, largest first
    test: CausalTest
    replaced: bool = False  # ELECTRA's discriminator

    @property
    def f(self) -> float:
        return self.test.f


@dataclass(frozen=True)
class NiuView:
    """The causal test on both built-in guesses, grammatical first."""

    views: tuple[BehindView, ...]
    guesses: tuple[Guess, ...]


def by_key(key: str) -> Guess:
    """The built-in guess called `key`, or an InputError sentence naming them."""
    for guess in PAIRS:
        if guess.key == key:
            return guess
    raise InputError(f"no built-in guess called {key!r}: pick one of {', '.join(g.key for g in PAIRS)}")


def _rows(ckpt: Checkpoint, attribution: Attribution, at: np.ndarray, k: int) -> list[TopRow]:
    """The top k neurons by attribution, each with its activation `at` (L, N) and the token it promotes most."""
    out = []
    for layer, neuron, score in attribution.top(k):
        word = ""
        if ckpt.model.has_mlm:
            up, _ = promoted(ckpt.model, layer, neuron, 1, ckpt.tokenizer.vocab_size)
            word = ckpt.tokenizer.id_to_token(up[0][0])
        out.append(TopRow(layer, neuron, score, float(at[layer, neuron]), word))
    return out


def behind_view(ckpt: Checkpoint, ask: NeuronAsk) -> BehindView:
    """The attribution, the top neurons and the causal test for the guess `ask` names; an InputError sentence for a
    text without a [MASK] (on a model with an MLM head), an answer or foil not in the vocabulary."""
    model = ckpt.model
    width = sizes(model)[1]
    if ask.k >= width:
        raise InputError(f"k must be below the layer's {width} neurons, to leave random ones to compare with; got "
                         f"{ask.k}")
    encoding = encode(ckpt, ask.text)
    token = chosen_token(ckpt, encoding, ask)
    what = scored(ckpt, encoding, ask, token)
    ids, segments = tensors(ckpt, encoding)
    attribution = attribute(model, ids, segments, what.score, ask.method, ask.steps)
    test = causal_test(model, ids, segments, what.score, attribution, ask.k, ask.draws, ask.seed)
    with torch.no_grad():
        acts = run(twin(model), ids, segments).activations
    at = np.stack([a[0, what.score.position].float().cpu().numpy() for a in acts])  # (L, N)
    return BehindView(ask, list(encoding.tokens), what.score.position, what.answer, what.foil, what.metric,
                      attribution, _rows(ckpt, attribution, at, ask.k), test, what.score.replaced)


def niu_view(ckpt: Checkpoint, k: int = 10, draws: int = 20, seed: int = 0, method: str = "ig") -> NiuView:
    """`behind_view` on each of PAIRS, with the same k, draws, seed and method (ELECTRA's discriminator: each
    sentence's answer filled in, scored on the replaced-token logit there, since it makes no guess)."""
    views = []
    for guess in PAIRS:
        if ckpt.model.has_mlm:
            ask = NeuronAsk(guess.text, answer=guess.answer, foil=guess.foil, k=k, draws=draws, seed=seed,
                            method=method)
        else:
            text = guess.text.replace("[MASK]", guess.answer)
            ask = NeuronAsk(text, token=_word_at(ckpt, text, guess.answer), k=k, draws=draws, seed=seed,
                            method=method)
        views.append(behind_view(ckpt, ask))
    return NiuView(tuple(views), PAIRS)


def _word_at(ckpt: Checkpoint, text: str, word: str) -> int | None:
    """The position of `word`'s first token in `text` (None: not found, so the default token)."""
    encoding = ckpt.tokenizer.encode(text)
    pieces = [t.lstrip("Ġ▁").lower() for t in encoding.tokens]
    return pieces.index(word) if word in pieces else None
