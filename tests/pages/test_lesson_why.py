"""The Lesson's step "Which word mattered most?" (AppTest on the shipped model): it comes right after the guess at
[MASK]; its options are the sentence's words; Reveal shows occlusion's word and the most-attended word as
views/why/explanation.py computes them, their numbers in the two charts, and a sentence on whether they agree that the numbers
bear out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.lesson import why_step as vlw
from bertviz_lab.views.lesson.vector_steps import shown
from tests.helpers.lesson_page import answer, go, options, page

STEP = "why"


@pytest.fixture(scope="module")
def shipped():
    from tests.helpers.lesson_page import SHIPPED
    return load_checkpoint(SHIPPED)


def explained(ckpt, text: str) -> tuple[list[str], str, str, vw.Why]:
    """The page's options, and occlusion's and attention's first word, as views.why ranks them."""
    result = vw.why(ckpt.model, ckpt.tokenizer, inputs.encode(ckpt.tokenizer, ckpt.model, text))
    labels = vl.token_options([shown(t) for t in result.encoding.tokens])
    values, movable = result.explanation.values, result.explanation.movable
    return ([labels[i] for i in movable], labels[vw.strongest(values["occlusion"], movable)],
            labels[vw.strongest(values["attention"], movable)], result)


def test_the_step_comes_right_after_the_guess_at_the_mask():
    assert vls.STEPS[vls.position(STEP) - 2].title == "The guess at [MASK]" and vls.position(STEP) == 6
    at = go(page(), STEP)
    assert at.subheader[0].value == f"{vls.position(STEP)}. Which word mattered most?"


def test_reveal_shows_occlusions_word_and_the_attended_word_as_views_why_computes_them(shipped):
    at = go(page(), STEP)
    words, occluded, attended, result = explained(shipped, K.MASKED.default)
    assert options(at, STEP) == words
    wrong = next(w for w in words if w != occluded and w != attended)
    verdict = answer(at, STEP, wrong)
    assert verdict.startswith("Not this time.") and f"The model's answer: **{occluded}**" in verdict
    assert f"The most-attended word (last layer, mean over heads) is “{attended}”" in verdict
    assert ("attention and occlusion agree" in verdict) == (occluded == attended)
    assert ("they disagree" in verdict) == (occluded != attended)
    assert f"“{shown(result.target)}”" in verdict  # the guess explained: the top guess
    drops, weights = (json.loads(c.proto.spec)["data"][0]["x"] for c in at.get("plotly_chart"))
    movable = result.explanation.movable
    # A drop is a difference of two float32 logits near 10, whose last bit is 1e-6: the page's run and this one may
    # take different thread counts (ui/shell/turns.py), and on another CPU's BLAS (an AMD's AVX2 path) a different sum order.
    np.testing.assert_allclose(drops, result.explanation.values["occlusion"][movable], rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(weights, result.explanation.values["attention"][movable], rtol=1e-6, atol=1e-6)


def test_the_agreement_sentence_follows_the_numbers_on_other_sentences(shipped):
    seen = set()
    for text in ("the dog sat on the [MASK] .", "i went to the bank to deposit [MASK] .",
                 "the animal did not cross the street because [MASK] was too tired .",
                 "the girl read a [MASK] because she was bored ."):
        _, occluded, attended, _ = explained(shipped, text)
        quiz, found = vlw.word_that_mattered(shipped.model, shipped.tokenizer,
                                             inputs.encode(shipped.tokenizer, shipped.model, text))
        assert (quiz.answer, found.attended) == (occluded, attended)
        assert ("attention and occlusion agree" in quiz.why) == (occluded == attended)
        seen.add(occluded == attended)
    assert seen == {True, False}  # both readings, on real sentences (they agree on the girl's book only)


def mattered(drop, weight) -> vlw.Mattered:
    return vlw.Mattered(["the", "cat", "sat", "on", "."], np.array(drop, float), np.array(weight, float), "mat",
                        "<mask>")


def test_agreement_near_ties_and_a_score_no_word_lowers_are_said_from_the_numbers():
    agree = vlw.quiz(mattered([0.1, 2.0, 0.5, 0.3, 0.0], [0.1, 0.5, 0.2, 0.1, 0.1]))
    assert agree.answer == "cat" and "attention and occlusion agree" in agree.why and not agree.also
    assert "by 2.000, the most of the 5 words" in agree.why and "<mask>" in agree.question.prompt
    assert "[MASK]" not in agree.question.prompt + agree.why
    differ = vlw.quiz(mattered([0.1, 2.0, 1.99, 0.3, 0.0], [0.1, 0.2, 0.1, 0.1, 0.5]))
    assert differ.also == ("sat",) and differ.is_right("sat") and "Within 2% of that: “sat” (1.990)" in differ.why
    assert "is “.”, with weight 0.500: they disagree" in differ.why
    assert "Occlusion ranks “.” 5 of 5" in differ.why and "attention ranks “cat” 2 of 5 (weight 0.200)" in differ.why
    none = vlw.quiz(mattered([-0.5, -0.1, -0.3, -0.2, -0.9], [0.1, 0.5, 0.2, 0.1, 0.1]))
    assert none.answer == "cat" and "hiding no word lowers the score of “mat”" in none.why


def test_the_reveal_opens_why_this_guess_on_the_lessons_sentence(monkeypatch):
    """The step's button carries the Lesson's sentence to the Why-this-guess page (as the learner's sentence, so the
    page opens on it) and switches there; that page then explains the sentence's top guess."""
    import streamlit as st
    from tests.helpers.why_page import page as why_page

    opened = []
    monkeypatch.setattr(st, "switch_page", opened.append)  # a page file alone has no menu to switch in
    at = go(page(), STEP)
    sentence = "the dog sat on the [MASK] ."
    at.text_input(key=K.MASKED.name).set_value(sentence).run()
    answer(at, STEP, options(at, STEP)[0])
    at.button(key=f"{K.REVEAL.name}.why").click().run()
    assert not at.exception, at.exception
    assert opened == ["pages/why.py"]
    carried = {k: at.session_state[k] for k in ("why.text_a", "why.pair", "why.target", "why.contrast", "why.mask")}
    assert carried == {"why.text_a": sentence, "why.pair": False, "why.target": "", "why.contrast": "", "why.mask": 0}
    why = why_page(**{k.replace(".", "__"): v for k, v in carried.items()}, yours__sentence=at.session_state[
        "yours.sentence"])
    assert why.text_area[0].value == sentence
    assert any(m.value.startswith("**F = logit(") for m in why.markdown)
