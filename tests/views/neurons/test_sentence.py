"""sentence.py: one sentence's activations, top neurons, factors and guess on the shipped model and on every family;
bad layers, neurons and tokens as one sentence."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.neurons.read import one_sentence
from bertviz_lab.neurons.values import NO_HEAD, promoted
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.sentence import TOP_NEURONS, scored, sentence_view, tensors
from tests.views.neurons.conftest import FAMILIES

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the shark eats [MASK] ."


def test_the_shipped_model_reads_the_sentence(shipped):
    view = sentence_view(shipped, NeuronAsk(TEXT))
    layers, width = shipped.config.num_hidden_layers, shipped.config.intermediate_size
    assert view.tokens == ["[CLS]", "the", "shark", "eats", "[MASK]", ".", "[SEP]"]
    assert view.activations.shape == (layers, 7, width) and view.activations.dtype == np.float32
    assert (view.layer, view.token, view.mask) == (layers - 1, 4, 4)  # the last layer, at the [MASK]
    at = view.activations[view.layer, view.token]
    assert [t.neuron for t in view.top] == list(np.argsort(-at, kind="stable")[:TOP_NEURONS])
    assert view.neuron == view.top[0].neuron and view.top[0].activation == float(at.max())
    up, _ = promoted(shipped.model, view.layer, view.neuron, 5, shipped.tokenizer.vocab_size)
    assert view.top[0].promoted == tuple(shipped.tokenizer.id_to_token(i) for i, _ in up)
    assert view.guess == "fish" and view.guesses[0][1] > view.guesses[1][1]
    assert view.factors.strengths.shape == (7, 4) and view.factors.loadings.shape == (4, width)
    ids, segments = tensors(shipped, view.encoding)
    np.testing.assert_array_equal(view.activations, np.stack(one_sentence(shipped.model, ids, segments)))


def test_a_chosen_layer_token_and_neuron_are_kept(shipped):
    view = sentence_view(shipped, NeuronAsk("the painters were calm .", layer=1, token=2, neuron=7, factors=2))
    assert (view.layer, view.token, view.neuron, view.mask, view.guesses) == (1, 2, 7, None, ())
    assert view.factors.strengths.shape[1] == 2
    assert view.top[0].activation == float(view.activations[1, 2].max())


@pytest.mark.parametrize("kwargs, said", [
    (dict(layer=4), r"layer 4 does not exist: this model's layers are 0 to 3"),
    (dict(neuron=1024), r"neuron 1024 does not exist: each layer has neurons 0 to 1023"),
    (dict(token=7), r"token 7 does not exist: this text has tokens 0 to 6"),
    (dict(text="the " * 200), "tokens long"),
])
def test_what_does_not_exist_is_one_sentence(shipped, kwargs, said):
    with pytest.raises(InputError, match=said):
        sentence_view(shipped, NeuronAsk(**{"text": TEXT, **kwargs}))


def test_scoring_needs_a_mask_and_a_known_word(shipped):
    view = sentence_view(shipped, NeuronAsk("the shark eats fish ."))
    assert scored(shipped, view.encoding, view.ask, view.token, need=False) is None
    with pytest.raises(InputError, match=r"the text has no \[MASK\]"):
        scored(shipped, view.encoding, view.ask, view.token)
    masked = sentence_view(shipped, NeuronAsk(TEXT)).encoding
    with pytest.raises(InputError, match="not a single token"):
        scored(shipped, masked, NeuronAsk(TEXT, answer="zzqx"), 4)
    got = scored(shipped, masked, NeuronAsk(TEXT, foil="leaves"), 4)
    assert (got.answer, got.foil, got.metric) == ("fish", "leaves", "logit(fish) - logit(leaves)")


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family(family, name):
    ckpt = family(name)
    mask = ckpt.tokenizer.mask_token
    view = sentence_view(ckpt, NeuronAsk(f"the cat sat on the {mask} .", layer=0))
    assert view.activations.shape[0] == ckpt.config.num_hidden_layers
    assert view.activations.shape[2] == ckpt.config.intermediate_size == 64
    assert np.isfinite(view.activations).all() and len(view.top) == TOP_NEURONS
    if name == "electra-discriminator":
        assert view.guesses == () and view.no_head == NO_HEAD and 0 < view.replaced < 1
        assert all(t.promoted == () for t in view.top)
    else:
        assert len(view.guesses) == 5 and view.no_head == "" and view.replaced is None
        assert all(len(t.promoted) == 5 for t in view.top)
