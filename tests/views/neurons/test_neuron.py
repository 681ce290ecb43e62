"""neuron.py: one neuron's top contexts, value and switch-off on the shipped model (the switch-off's F agrees with
the causal test's), the discriminator (no vocabulary, the replaced-token logit), and an index of another model."""

from __future__ import annotations

import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.neurons.values import NO_HEAD
from bertviz_lab.views.neurons import corpus as vne_corpus
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.behind import behind_view
from bertviz_lab.views.neurons.neuron import CONTEXTS, neuron_view
from bertviz_lab.views.neurons.sentence import sentence_view

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the shark eats [MASK] ."


@pytest.fixture(scope="module")
def index(shipped, tmp_path_factory):
    return vne_corpus.index(shipped, vne_corpus.story_sentences(120), folder=tmp_path_factory.mktemp("index"))


def test_one_neuron_on_the_shipped_model(shipped, index):
    view = neuron_view(shipped, index, NeuronAsk(TEXT, layer=2, neuron=17), corpus="the story world")
    assert (view.layer, view.neuron) == (2, 17) and len(view.contexts) == CONTEXTS
    values = [c.value for c in view.contexts]
    assert values == sorted(values, reverse=True) and values[0] == float(index.values[2, 17, 0])
    first = view.contexts[0]
    assert view.firing[0] == index.sentences[first.sentence][first.position]
    assert view.mean == float(index.mean[2, 17]) and view.activation.shape == (7,)
    assert len(view.promoted) == len(view.suppressed) == 10
    assert view.promoted[0][1] > 0 > view.suppressed[0][1]
    assert view.guess == "fish" and view.metric == "logit(fish)" and view.position == 4
    f = behind_view(shipped, NeuronAsk(TEXT, k=1, draws=1, method="grad")).test.f
    assert view.switch.f == pytest.approx(f, abs=1e-5)  # the same F, read by two paths


def test_the_default_neuron_is_the_most_active_at_the_token(shipped, index):
    view = neuron_view(shipped, index, NeuronAsk(TEXT, layer=1))
    seen = sentence_view(shipped, NeuronAsk(TEXT, layer=1))
    assert view.neuron == int(seen.activations[1, 4].argmax()) == seen.neuron
    assert view.activation[4] == seen.activations[1, 4].max()


def test_without_a_mask_there_is_no_switch_off(shipped, index):
    view = neuron_view(shipped, index, NeuronAsk("the shark eats fish .", layer=0, neuron=3))
    assert view.switch is None and view.guess == "" and view.metric == ""


def test_an_index_of_another_model_is_one_sentence(family, index):
    with pytest.raises(InputError, match="built for another model"):
        neuron_view(family("bert"), index, NeuronAsk("the cat sat on the [MASK] .", layer=0))


def test_the_discriminator_has_no_vocabulary_and_scores_the_replaced_token(family, tmp_path):
    ckpt = family("electra-discriminator")
    built = vne_corpus.index(ckpt, ["the cat sat on the mat .", "the dog sat ."], folder=tmp_path)
    view = neuron_view(ckpt, built, NeuronAsk("the cat sat on the mat .", layer=1, neuron=5, token=2))
    assert view.promoted is None and view.suppressed is None and view.no_head == NO_HEAD
    assert view.metric.startswith("the replaced-token logit at") and view.position == 2
    assert view.switch is not None and view.guess == view.guess_zero == ""
