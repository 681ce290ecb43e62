"""The Lesson's patching step (views/lesson/patch_step.py): the answer is the first depth whose largest cell is at the
[MASK], read off the grid of the active model (never canned: another grid, another layer marked right), a near tie
before it counts too, and no depth at the [MASK] is not scored; on the shipped model the quiz's answer and the grid
are views/patching's."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.views.lesson import patch_step as vlp
from bertviz_lab.views.lesson.questions import NEAR
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.lesson_page import SHIPPED

TOKENS = ["[CLS]", "the", "dogs", "[MASK]", "happy", "[SEP]"]
ROWS = ["embeddings", "layer 1", "layer 2", "layer 3"]


def found(values) -> vlp.AnswerPath:
    values = np.asarray(values, float)
    return vlp.AnswerPath(values, values * 4.0, ROWS, TOKENS, 3, "the dogs [MASK] happy .", "the dog [MASK] happy .",
                          "were", "was", "logit(were) - logit(was)", [])


def grid_moving_at(depth: int) -> list[list[float]]:
    """The subject (token 2) leads until `depth`, the [MASK] (token 3) from there on."""
    return [[0, 0, 0.9, 0.1, 0, 0] if d < depth else [0, 0, 0.1, 0.9, 0, 0] for d in range(len(ROWS))]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_layer_where_the_mask_takes_the_lead_is_right_and_the_others_wrong(depth):
    quiz = vlp.quiz(found(grid_moving_at(depth)))
    assert quiz.question.options == ("the embeddings", "layer 1", "layer 2", "layer 3")
    assert quiz.answer == f"layer {depth}" and quiz.scored
    assert quiz.is_right(f"layer {depth}")
    assert not any(quiz.is_right(o) for o in quiz.question.options if o != f"layer {depth}")
    assert f"At layer {depth}, the [MASK]'s vector put back alone brings back 0.90" in quiz.why
    assert "the most came from “dogs” (0.90; the [MASK]'s: 0.10)" in quiz.why


def test_a_near_tie_the_depth_before_counts_too():
    values = grid_moving_at(2)
    values[1] = [0, 0, 0.5, 0.5 - NEAR / 2, 0, 0]  # the [MASK] a hair behind the subject at layer 1
    quiz = vlp.quiz(found(values))
    assert quiz.answer == "layer 2" and quiz.also == ("layer 1",) and quiz.is_right("layer 1")
    assert not quiz.is_right("the embeddings")


def test_a_grid_where_the_mask_never_leads_is_not_scored():
    quiz = vlp.quiz(found([[0, 0, 1, 0, 0, 0]] * len(ROWS)))
    assert not quiz.scored and vlp.arrival(np.array([[0, 0, 1, 0, 0, 0.0]]), 3) is None


def test_on_the_shipped_model_the_answer_is_read_off_views_patchings_grid():
    ckpt = load_checkpoint(SHIPPED)
    quiz, path = vlp.answer_path(ckpt.model, ckpt.tokenizer)
    pair = minimal_pairs.by_key(vlp.PAIR)
    patching = vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer,
                                                                foil=pair.foil))
    grid = vpa.grid(patching, "resid", "denoise")
    np.testing.assert_allclose(path.values, grid.values, atol=1e-6)
    first = next(d for d in range(len(grid.values)) if grid.values[d].argmax() == patching.position)
    assert quiz.answer == vlp.depth(grid.rows[first]) and path.metric == "logit(were) - logit(was)"
    assert any(f"between {vlp.depth(grid.rows[first - 1])} and {grid.rows[first]}" in s for s in path.sentences)
