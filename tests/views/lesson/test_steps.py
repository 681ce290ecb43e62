"""The Lesson as one list (views/lesson/steps.py): every step has a unique id, a renderer bound to it and a question
its renderer asks; links name a step by its id, and a link shared when steps had numbers opens the step it opened
then; the session keeps each guess and answer with its step, whatever the list's order (AppTest on the shipped
model)."""

from __future__ import annotations

import inspect
import re

import pytest

from bertviz_lab.ui.lesson.steps import RENDERERS, renders
from bertviz_lab.ui.shell import links
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.views.lesson import runs as lesson_runs
from bertviz_lab.views.lesson import steps as vls
from tests.helpers.lab import app_test
from tests.helpers.lesson_page import PAGE, answer, go, page, score, widget

# What `?step=N` opened before steps had ids: the page's titles, in the order of that time. Written out here, not read
# from views/, so a change to views/lesson/steps.py's frozen table fails this test.
SHARED_AS_NUMBERS = {1: "Tokens", 2: "Embeddings", 3: "Attention heads", 4: "The softmax steps",
                     5: "The guess at [MASK]", 6: "Which word mattered most?", 7: "The MLM loss",
                     8: "Next sentence prediction", 9: "A short training run", 10: "A linear probe",
                     11: "Contextual vectors"}


def test_every_step_has_a_unique_id_a_link_can_carry():
    ids = [step.id for step in vls.STEPS]
    assert len(ids) == len(set(ids)), ids
    assert all(re.fullmatch(r"[a-z]+", i) for i in ids), ids  # plain in a URL and in a widget's CSS class
    assert len({step.title for step in vls.STEPS}) == len(ids) and all(step.paragraph for step in vls.STEPS)


def test_every_step_has_a_renderer_and_a_question_its_renderer_asks():
    assert list(RENDERERS) == vls.ids()  # no step without a renderer, no renderer without a step
    for step in vls.STEPS:
        assert callable(step.quiz) and step.quiz.__module__.startswith("bertviz_lab.views.lesson."), step.id
        source = inspect.getsource(RENDERERS[step.id])
        assert re.search(rf"\.{step.quiz.__name__}\b", source), (step.id, step.quiz.__name__)


def test_a_renderer_binds_only_to_a_step_of_the_list_and_only_once():
    with pytest.raises(KeyError):
        renders("no such step")
    with pytest.raises(ValueError, match="two renderers"):
        renders("tokens")(lambda ckpt, frame: None)
    assert RENDERERS["tokens"].__name__ == "tokens"


@pytest.mark.parametrize("number", sorted(SHARED_AS_NUMBERS))
def test_a_link_with_a_steps_old_number_opens_the_step_it_opened_when_shared(number):
    assert vls.by_id(vls.from_link(str(number))).title == SHARED_AS_NUMBERS[number]


def test_the_frozen_order_of_numbered_links_names_only_steps_of_the_list():
    assert len(vls.LINKED_BY_NUMBER) == len(SHARED_AS_NUMBERS)
    assert set(vls.LINKED_BY_NUMBER) <= set(vls.ids())


def test_a_step_added_later_is_linked_by_its_id_only():
    assert "patching" not in vls.LINKED_BY_NUMBER and vls.ids().index("patching") == vls.ids().index("why") + 1
    assert "neurons" not in vls.LINKED_BY_NUMBER and vls.ids().index("neurons") == vls.ids().index("patching") + 1
    assert vls.from_link("7") == "loss" and vls.position("loss") == 9  # ?step=7 opens what it opened when shared


def test_a_link_names_a_step_by_its_id_and_reads_it_back():
    (param,) = [p for p in links.PAGES["lesson"] if p.name == "step"]
    for step in vls.ids():
        assert param.read(step) == step == vls.from_link(f" {step} ")


@pytest.mark.parametrize(("value", "said"), [
    ("0", "is not a step's number (1 to 11)"), ("12", "is not a step's number (1 to 11)"),
    ("-1", "is not a step of the Lesson (one of tokens, "), ("Softmax", "is not a step of the Lesson"),
    ("<b>heads</b>", "is not a step of the Lesson"), ("", "is not a step of the Lesson"),
    ("9" * 40, "is not a step of the Lesson"),
])
def test_a_bad_step_value_is_refused_with_a_sentence(value, said):
    with pytest.raises(ValueError) as refused:
        vls.from_link(value)
    assert said in str(refused.value)


def test_guesses_and_answers_stay_with_their_step_when_the_list_is_reordered(monkeypatch):
    at = page()
    assert answer(at, "tokens", 9).startswith("Right!")
    go(at, "probe")
    widget(at, "probe").set_value(lesson_runs.PRETRAINED).run()  # a guess, not revealed
    saved = {key.name: at.session_state[key.name] for key in (K.STEP, K.ANSWERS, K.GUESSES["probe"])}
    monkeypatch.setattr(vls, "STEPS", tuple(reversed(vls.STEPS)))  # a new order: every step at another place
    again = app_test(PAGE)  # the session's state, read by the Lesson in its new order
    for name, value in saved.items():
        again.session_state[name] = value
    again.run()
    assert not again.exception, again.exception
    assert again.subheader[0].value == "2. A linear probe" and widget(again, "probe").value == lesson_runs.PRETRAINED
    go(again, "contextual")  # now first, where "tokens" stood: nothing of tokens' answer follows the place
    assert again.subheader[0].value == "1. Contextual vectors" and widget(again, "contextual").value is None
    assert again.button(key="lesson.reveal.contextual").disabled and again.button(key="lesson.back").disabled
    go(again, "tokens")  # now last: its answer came along
    assert again.subheader[0].value == "13. Tokens" and again.button(key="lesson.next").disabled
    assert "The model's answer: **9**" in again.success[0].value
    assert score(again) == "**Score:** 1 of 1 right so far"
