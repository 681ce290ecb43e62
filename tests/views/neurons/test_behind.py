"""behind.py: the built-in guesses are what the shipped model guesses; the causal test on both (the top neurons beat
random ones on the shipped model, the grammatical guess and the fact alike); bad input; every family."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.behind import PAIRS, behind_view, by_key, niu_view
from bertviz_lab.views.neurons.sentence import sentence_view
from tests.views.neurons.conftest import FAMILIES

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_built_in_guesses_are_the_shipped_models_top_guesses(shipped):
    assert [g.key for g in PAIRS] == ["grammar", "knowledge"] and by_key("knowledge") is PAIRS[1]
    for guess in PAIRS:
        seen = sentence_view(shipped, NeuronAsk(guess.text))
        assert seen.guess == guess.answer
        assert guess.foil in [w for w, _ in seen.guesses[1:3]]  # the foil is a close second or third
    with pytest.raises(InputError, match="no built-in guess called 'x'"):
        by_key("x")


def test_the_causal_test_on_both_guesses_of_the_shipped_model(shipped):
    niu = niu_view(shipped, k=10, draws=20, seed=0)
    for guess, view in zip(PAIRS, niu.views):
        assert (view.answer, view.foil) == (guess.answer, guess.foil)
        assert view.metric == f"logit({guess.answer}) - logit({guess.foil})"
        assert len(view.top) == 10 and [r.score for r in view.top] == sorted([r.score for r in view.top], reverse=True)
        assert view.test.beats_random  # measured: drops 1.61 and 0.71 against at most 0.09 and 0.01 for random
        assert np.abs(view.attribution.gaps).max() < 1e-3  # IG's completeness


def test_the_top_rows_read_the_attribution_and_the_activations(shipped):
    view = behind_view(shipped, NeuronAsk(PAIRS[1].text, k=3, draws=2, method="grad"))
    seen = sentence_view(shipped, NeuronAsk(PAIRS[1].text))
    for row, (layer, neuron, score) in zip(view.top, view.attribution.top(3)):
        assert (row.layer, row.neuron, row.score) == (layer, neuron, score)
        assert row.activation == seen.activations[layer, 4, neuron] and row.promoted


@pytest.mark.parametrize("kwargs, said", [
    (dict(text="the shark eats fish ."), r"the text has no \[MASK\]"),
    (dict(k=100, draws=1), None),
    (dict(answer="zzqx"), "not a single token"),
])
def test_bad_input_is_one_sentence(shipped, kwargs, said):
    ask = NeuronAsk(**{"text": "the shark eats [MASK] .", "method": "grad", "draws": 2, **kwargs})
    if said is None:
        assert len(behind_view(shipped, ask).top) == 100
        return
    with pytest.raises(InputError, match=said):
        behind_view(shipped, ask)


def test_k_must_leave_random_neurons(family):
    with pytest.raises(InputError, match="k must be below the layer's 64 neurons"):
        behind_view(family("bert"), NeuronAsk("the cat sat on the [MASK] .", k=64))


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family(family, name):
    ckpt = family(name)
    mask = ckpt.tokenizer.mask_token
    text = "the cat sat on the mat ." if name == "electra-discriminator" else f"the cat sat on the {mask} ."
    view = behind_view(ckpt, NeuronAsk(text, k=3, draws=4, method="grad", token=2))
    assert len(view.top) == 3 and view.test.f_random.shape == (4,)
    if name == "electra-discriminator":
        assert view.replaced and view.answer == "" and view.position == 2 and view.top[0].promoted == ""
    else:
        assert not view.replaced and view.answer and view.top[0].promoted
