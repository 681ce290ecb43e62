"""values.py on a tiny random BERT: a neuron planted to write one word's direction promotes that word first (and,
negated, suppresses it), promoted() agrees with vocabulary_scores(), its lists are sorted and disjoint, and the
vocabulary is cut at the tokenizer's size. Parity with transformers' parameters is test_parity.py's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.neurons.values import key_vectors, promoted, value_vectors, vocabulary_scores

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

LAYER, NEURON, WORD = 1, 21, 42


@pytest.fixture
def planted(tiny_model):
    """tiny_model with neuron NEURON of LAYER writing WORD: its value v solves gamma * centre(W_T v) = r for a
    direction r, and WORD's embedding is 0.5 r / |r| (the others are random, about 0.02 a coordinate), so WORD's
    score 0.5 |r| stands far above the rest. Neuron NEURON + 1 writes -v."""
    head = tiny_model.cls.predictions
    with torch.no_grad():
        head.transform.LayerNorm.weight.uniform_(0.5, 1.5)  # a gain that is not all ones, so it counts
        gamma = head.transform.LayerNorm.weight
        z = torch.randn(gamma.shape[0], generator=torch.Generator().manual_seed(3))
        z -= z.mean()  # centred: centre(W_T v) = z when W_T v = z
        r = gamma * z
        v = torch.linalg.solve(head.transform.dense.weight, z)  # W_T (e, d), square here: W_T v = z
        tiny_model.bert.embeddings.word_embeddings.weight[WORD] = 0.5 * r / r.norm()
        dense = tiny_model.bert.encoder.layer[LAYER].output.dense
        dense.weight[:, NEURON], dense.weight[:, NEURON + 1] = v, -v
    return tiny_model


def test_a_planted_neuron_promotes_its_word(planted):
    up, down = promoted(planted, LAYER, NEURON, k=5)
    assert up[0][0] == WORD and up[0][1] > 5 * up[1][1]
    up_, down_ = promoted(planted, LAYER, NEURON + 1, k=5)
    assert down_[0][0] == WORD and [i for i, _ in up_] == [i for i, _ in down]  # -v: the lists swap
    np.testing.assert_allclose([s for _, s in up_], [-s for _, s in down], rtol=1e-5)
    others = promoted(planted, 0, NEURON, k=1)[0][0][0], promoted(planted, LAYER, NEURON + 2, k=1)[0][0][0]
    assert WORD not in others  # the same neuron in another layer, another neuron in the same: not planted


@pytest.mark.parametrize("neuron", [0, 7, 63])
def test_promoted_agrees_with_the_scores_sorted_and_disjoint(tiny_model, neuron):
    scores = vocabulary_scores(tiny_model, value_vectors(tiny_model, 0)[neuron][None])[0].double()  # (V,)
    up, down = promoted(tiny_model, 0, neuron, k=10)
    assert up[0][0] == int(scores.argmax()) and down[0][0] == int(scores.argmin())
    ups, downs = [s for _, s in up], [s for _, s in down]
    assert ups == sorted(ups, reverse=True) and downs == sorted(downs) and ups[-1] > 0 > downs[-1]
    assert not {i for i, _ in up} & {i for i, _ in down} and len(up) == len(down) == 10
    np.testing.assert_allclose(ups[0], float(scores.max() - scores.mean()), rtol=1e-5)  # centred: 0 the average


def test_the_vocabulary_is_cut_at_the_tokenizers_size(tiny_model):
    every, _ = promoted(tiny_model, 1, 4, k=100)
    up, down = promoted(tiny_model, 1, 4, k=30, vocab_size=60)
    assert len(up) == len(down) == 30 and max(i for i, _ in up + down) < 60
    assert sum(s for _, s in up + down) == pytest.approx(0, abs=1e-9)  # all 60 tokens, centred over the 60
    assert [i for i, _ in up] == [i for i, _ in every if i < 60][:30]  # the same order, the rows past 60 left out
    assert any(i >= 60 for i, _ in every[:30])


def test_values_and_keys_are_the_weights(tiny_model):
    layer = tiny_model.bert.encoder.layer[1]
    values = value_vectors(tiny_model, 1)
    assert values.shape == (64, 32) and torch.equal(values[5], layer.output.dense.weight[:, 5])
    w, b = key_vectors(tiny_model, 1)
    assert torch.equal(w[5], layer.intermediate.dense.weight[5]) and torch.equal(b, layer.intermediate.dense.bias)
    assert not values.requires_grad and not w.requires_grad


def test_bad_layers_and_neurons_are_one_sentence(tiny_model):
    with pytest.raises(InputError, match="layer 2 does not exist"):
        value_vectors(tiny_model, 2)
    with pytest.raises(InputError, match="layer -1 does not exist"):
        key_vectors(tiny_model, -1)
    with pytest.raises(InputError, match="neuron 64 does not exist"):
        promoted(tiny_model, 0, 64)
