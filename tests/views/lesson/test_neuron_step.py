"""The Lesson's neuron step (views/lesson/neuron_step.py): the neuron asked about is the one whose top contexts fire on
one word most often (words only, its top activations breaking ties), the sentence is one with that word that is none
of its top contexts, the answer is the word of largest activation computed by a forward hook here (never canned), a
near tie counts, a neuron that does not fire is not scored; every family works, ELECTRA's discriminator (no MLM
head) too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.neurons.index import K, NeuronIndex, build
from bertviz_lab.views.lesson import neuron_step as vln
from bertviz_lab.views.lesson.questions import NEAR
from tests.helpers.family_models import build as build_family

pytestmark = pytest.mark.usefixtures("one_thread")

SPECIALS = {"[CLS]", "[SEP]"}
SENTENCES = (("[CLS]", "on", "monday", "we", "ran", ".", "[SEP]"),
             ("[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]"),
             ("[CLS]", "a", "dog", "ran", ".", "[SEP]"),
             ("[CLS]", "the", "cat", "ran", "to", "a", "park", "now", ".", "[SEP]"))


def index_of(places: dict[tuple[int, int], list[tuple[int, int]]], values: dict | None = None) -> NeuronIndex:
    """An index of 2 layers x 3 neurons with the given top contexts (sentence, position) per (layer, neuron)."""
    where = np.full((2, 3, K, 2), -1, np.int32)
    top = np.full((2, 3, K), -np.inf, np.float32)
    for (layer, neuron), found in places.items():
        for k, place in enumerate(found):
            where[layer, neuron, k] = place
            top[layer, neuron, k] = (values or {}).get((layer, neuron), 1.0) - 0.01 * k
    return NeuronIndex("test", SENTENCES, top, where, np.zeros((2, 3)), 30)


def test_the_clearest_neuron_fires_on_one_word_most_often_and_punctuation_does_not_count():
    index = index_of({(0, 0): [(0, 5), (1, 7), (2, 4), (3, 8)],  # "." four times: not a word
                      (0, 1): [(1, 2), (3, 2), (2, 2)],  # cat, cat, dog: 2
                      (1, 2): [(0, 1), (1, 4), (3, 4)]})  # on, on, to: 2, higher values win the tie
    assert vln.clearest(index_of({(0, 1): [(1, 2), (3, 2), (2, 2)]}), SPECIALS) == (0, 1, "cat", 2)
    tied = index_of({(0, 1): [(1, 2), (3, 2)], (1, 2): [(0, 1), (1, 4)]}, {(0, 1): 1.0, (1, 2): 3.0})
    assert vln.clearest(tied, SPECIALS) == (1, 2, "on", 2)
    assert vln.clearest(index, SPECIALS)[3] == 2  # the four full stops are not a share of four


def test_the_sentence_asked_about_has_the_word_and_is_none_of_the_top_contexts():
    index = index_of({(0, 1): [(1, 2)]})  # its top context: sentence 1's "cat"
    assert vln.asked_sentence(index, 0, 1, "cat") == 3  # sentence 3 has "cat" too
    assert vln.asked_sentence(index_of({(1, 0): [(2, 1)]}), 1, 0, "the") == 3  # "the" once: not sentence 1 (twice)
    assert vln.asked_sentence(index_of({(0, 1): [(1, 2), (3, 2)]}), 0, 1, "cat") == 1  # none left: its top context


def fired(values, labels=("the", "cat", "sat")) -> vln.Fired:
    return vln.Fired(0, 1, "cat", 2, [vln.Context(("the", "cat"), 1, 2.5), vln.Context(("a", "cat"), 1, 2.4),
                                      vln.Context(("a", "dog"), 1, 2.1)], 0.01, list(labels),
                     np.asarray(values, float), " ".join(labels))


def test_the_answer_is_the_word_of_largest_activation_and_a_near_tie_counts():
    quiz = vln.quiz(fired([0.1, 2.0, -0.1]))
    assert quiz.answer == "cat" and quiz.scored and quiz.question.options == ("the", "cat", "sat")
    assert not quiz.is_right("the") and "Its activation at “cat” is 2.000" in quiz.why
    assert "the next largest, at “the”, is 0.100 (its mean over the story world's tokens: 0.010)" in quiz.why
    assert "is 0.000 (" in vln.quiz(fired([-0.0001, 2.0, -0.1])).why  # rounded first: never -0.000
    assert "2 of its 3 top contexts in the story world fire on “cat”, at 2.100 to 2.500." in quiz.why
    near = vln.quiz(fired([2.0 * (1 - NEAR / 2), 2.0, 0.0]))
    assert near.answer == "cat" and near.also == ("the",) and near.is_right("the") and not near.is_right("sat")


def test_a_neuron_that_fires_on_no_word_is_not_scored():
    quiz = vln.quiz(fired([-0.1, -0.05, -0.2]))
    assert not quiz.scored and quiz.answer == "cat" and "does not fire" in quiz.why


# The module that reads a layer's activations (W_2), in transformers' names: a pre-hook sees what it reads. ALBERT's
# one layer serves every depth: its call number is the depth.
W2 = {"bert": "bert.encoder.layer.{l}.output.dense", "roberta": "roberta.encoder.layer.{l}.output.dense",
      "distilbert": "distilbert.transformer.layer.{l}.ffn.lin2",
      "albert": "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output",
      "electra-discriminator": "electra.encoder.layer.{l}.output.dense"}


def hooked(hf, family: str, ids: list[int], layer: int) -> np.ndarray:
    """(T, d_ff) the layer's activations as transformers' own model computes them, read by a forward pre-hook."""
    calls = []
    module = hf.get_submodule(W2[family].format(l=layer))
    handle = module.register_forward_pre_hook(lambda _m, args: calls.append(args[0].detach()))
    try:
        with torch.no_grad():
            hf(input_ids=torch.tensor([ids]))
    finally:
        handle.remove()
    return calls[layer if family == "albert" else 0][0].double().numpy()


CORPUS = ["the cat sat on the mat .", "the dog went to the river .", "i went to the bank .", "it was tired .",
          "the animal did not cross the street .", "she sat on the rug .", "they love delicious food .",
          "he went to the city because it was raining ."]


@pytest.mark.parametrize("family", list(W2))
def test_every_family_gets_a_quiz_whose_answer_transformers_confirms(tmp_path, family):
    hf, _ = build_family(family, tmp_path)
    ckpt = load_checkpoint(tmp_path)
    index = build(ckpt.model, ckpt.tokenizer, CORPUS, k=4)
    quiz, found = vln.neuron_fires(ckpt.model, ckpt.tokenizer, index)
    specials = {ckpt.tokenizer.id_to_token(i) for i in ckpt.tokenizer.special_ids}
    assert (found.layer, found.neuron, found.share) == tuple(vln.clearest(index, specials)[i] for i in (0, 1, 3))
    tokens = next(s for s in index.sentences
                  if " ".join(vln.shown(t) for t in s if t not in specials) == found.sentence)
    expected = hooked(hf, family, [ckpt.tokenizer.token_to_id(t) for t in tokens], found.layer)[:, found.neuron]
    words = [i for i, t in enumerate(tokens) if t not in specials]
    np.testing.assert_allclose(found.values, expected[words], atol=1e-5)
    assert quiz.answer == found.labels[int(np.argmax(expected[words]))]
    assert len(found.contexts) == len(index.contexts(found.layer, found.neuron))
    assert found.mean == pytest.approx(float(index.mean[found.layer, found.neuron]))


def test_on_the_shipped_model_the_neuron_fires_on_its_word_in_the_story_world(tmp_path):
    from bertviz_lab.views.neurons.corpus import story_sentences
    from tests.helpers.lesson_page import SHIPPED

    ckpt = load_checkpoint(SHIPPED)
    index = build(ckpt.model, ckpt.tokenizer, story_sentences(400))
    quiz, found = vln.neuron_fires(ckpt.model, ckpt.tokenizer, index)
    assert found.share >= K // 2 and found.word in found.labels and quiz.scored
    assert sum(c.words[c.position] == found.word for c in found.contexts) == found.share
    assert found.contexts[0].value > 10 * max(found.mean, 0.01)  # a clear pattern: far above its mean
