"""The Lesson's step "Inside the feed-forward layer" (AppTest on the shipped model): it comes right after "Where is the
answer made?"; the neuron it asks about is the one whose story-world contexts fire on one word most often (counted
here with a Counter over the index), its options are the sentence's words, Reveal marks the word of largest
activation (computed here by a forward hook on the model) right and another wrong, then shows the activations and
the top contexts with the firing word in bold; old numbered links still open the step they opened."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.lesson.vector_steps import shown
from bertviz_lab.views.neurons.corpus import index as corpus_index
from bertviz_lab.views.neurons.corpus import story
from tests.helpers.figure_data import array
from tests.helpers.lab import app_test
from tests.helpers.lesson_neurons import activations, asked, clearest, expected
from tests.helpers.lesson_page import PAGE, SHIPPED, answer, go, options, page, widget
from tests.ui.shell.test_links import open_link

STEP = "neurons"
@pytest.fixture(scope="module")
def shipped():
    ckpt = load_checkpoint(SHIPPED)
    return ckpt, corpus_index(ckpt, story())  # the index the step reads (kept on disk after the first build)


def test_the_step_comes_right_after_patching_and_asks_about_the_clearest_neuron(shipped):
    ckpt, index = shipped
    assert vls.STEPS[vls.position(STEP) - 2].id == "patching" and vls.position(STEP) == 8
    at = go(page(), STEP)
    assert at.subheader[0].value == "8. Inside the feed-forward layer"
    neuron, layer, sentence = asked(at)
    specials = {ckpt.tokenizer.id_to_token(i) for i in ckpt.tokenizer.special_ids}
    assert (layer, neuron) == clearest(index, specials)[:2]
    assert options(at, STEP) == list(activations(ckpt, layer, neuron, sentence))
    assert not at.get("plotly_chart")  # nothing revealed before the guess


def test_the_word_of_largest_activation_is_right_and_reveal_shows_activations_and_contexts(shipped):
    ckpt, index = shipped
    at = go(page(), STEP)
    neuron, layer, sentence = asked(at)
    values = activations(ckpt, layer, neuron, sentence)
    right = max(values, key=values.get)
    verdict = answer(at, STEP, right)
    assert verdict.startswith("Right!") and f"The model's answer: **{right}**" in verdict
    (chart,) = at.get("plotly_chart")
    drawn = json.loads(chart.proto.spec)["data"][0]
    np.testing.assert_allclose(array(drawn["x"]), list(values.values()), atol=1e-4)
    contexts = next(m.value for m in at.markdown if m.value.startswith("**Its top")).replace("\\", "")
    for c in index.contexts(layer, neuron):
        assert f"**{shown(c.tokens[c.position])}**" in contexts and f"{c.value:.3f}" in contexts
    assert at.button(key="lesson.reveal.open_neurons").label == "Open “Inside the feed-forward layer”"


def test_another_word_is_marked_wrong(shipped):
    ckpt, _ = shipped
    at = go(page(), STEP)
    right, accepted = expected(ckpt, at)
    wrong = next(o for o in options(at, STEP) if o not in accepted)
    verdict = answer(at, STEP, wrong)
    assert verdict.startswith("Not this time.") and f"The model's answer: **{right}**" in verdict


def test_a_model_without_any_head_is_asked_too(headless_checkpoint):
    at = app_test(PAGE)
    at.session_state["model.path"] = str(headless_checkpoint)
    at.run()
    go(at, STEP)
    assert not at.info and not at.warning, [m.value for m in [*at.info, *at.warning]]
    neuron, layer, _ = asked(at)
    assert 0 <= layer < 2 and 0 <= neuron < 64  # the tiny config's layers and neurons
    assert widget(at, STEP).options and f"lesson.reveal.{STEP}" in [b.key for b in at.button]


@pytest.mark.parametrize(("number", "title"), [(6, "Which word mattered most?"), (7, "The MLM loss"),
                                               (11, "Contextual vectors")])
def test_an_old_numbered_link_opens_the_step_it_opened_before(number, title):
    at = open_link("lesson", {"step": str(number)})
    assert at.session_state["lesson.step"] == vls.from_link(str(number))
    assert at.subheader[0].value == f"{vls.position(vls.from_link(str(number)))}. {title}"
    assert STEP not in vls.LINKED_BY_NUMBER


def test_a_link_names_the_new_step_by_its_id():
    at = open_link("lesson", {"step": STEP})
    assert at.subheader[0].value == "8. Inside the feed-forward layer"
