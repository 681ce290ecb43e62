"""ask.py: NeuronAsk's defaults, and every bad input as one InputError sentence."""

from __future__ import annotations

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.views.neurons.ask import DRAWS, FACTORS, TOP_K, NeuronAsk


def test_defaults_and_normalising():
    ask = NeuronAsk("the shark eats [MASK] .", method=" IG ", answer=None)
    assert (ask.layer, ask.neuron, ask.token, ask.factors, ask.k, ask.draws, ask.seed) == \
        (None, None, None, FACTORS, TOP_K, DRAWS, 0)
    assert ask.method == "ig" and ask.answer == "" and ask.foil == ""


@pytest.mark.parametrize("kwargs, said", [
    (dict(text="   "), "the text is empty"),
    (dict(text=3), "the text must be text"),
    (dict(layer=-1), "the layer must be a whole number from 0"),
    (dict(layer=True), "the layer must be a whole number"),
    (dict(neuron=1.5), "the neuron must be a whole number"),
    (dict(token="2"), "the token must be a whole number"),
    (dict(factors=0), "the number of factors must be a whole number from 1 to 10"),
    (dict(factors=11), "the number of factors"),
    (dict(k=0), "the number of top neurons"),
    (dict(draws=101), "the number of random draws"),
    (dict(seed=0.5), "the seed must be a whole number"),
    (dict(steps=0), "integrated-gradient steps"),
    (dict(method="lime"), "no attribution method called 'lime'"),
    (dict(answer="fish", foil="fish"), "the foil is the answer itself"),
])
def test_every_bad_input_is_one_sentence(kwargs, said):
    fields = {"text": "the shark eats [MASK] .", **kwargs}
    with pytest.raises(InputError, match=said) as caught:
        NeuronAsk(**fields)
    assert "\n" not in str(caught.value)
