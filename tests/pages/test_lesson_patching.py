"""The Lesson's step "Where is the answer made?" (AppTest on the shipped model): it comes right after "Which word
mattered most?"; its options are the depths; Reveal marks the depth computed from the patching grid right and another
wrong, then shows the grid (its numbers views/patching's), the sentences written from it and the way to the full page;
a link of before the step existed still opens the step it opened."""

from __future__ import annotations

import json

import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.views.lesson import patch_step as vlp
from bertviz_lab.views.lesson import steps as vls
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.figure_data import array
from tests.helpers.lesson_page import SHIPPED, answer, go, options, page
from tests.helpers.patch_grids import assert_same_grid
from tests.ui.shell.test_links import open_link

STEP = "patching"


@pytest.fixture(scope="module")
def grid():
    ckpt = load_checkpoint(SHIPPED)
    pair = minimal_pairs.by_key(vlp.PAIR)
    patching = vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer,
                                                                foil=pair.foil))
    return patching, vpa.grid(patching, "resid", "denoise")


def computed_answer(patching, grid) -> str:
    first = next(d for d in range(len(grid.values)) if grid.values[d].argmax() == patching.position)
    return "the embeddings" if first == 0 else f"layer {first}"


def test_the_step_comes_right_after_which_word_mattered():
    assert vls.STEPS[vls.position(STEP) - 2].id == "why" and vls.position(STEP) == 7
    at = go(page(), STEP)
    assert at.subheader[0].value == "7. Where is the answer made?"
    assert options(at, STEP) == ["the embeddings", "layer 1", "layer 2", "layer 3", "layer 4"]
    assert not at.get("plotly_chart")  # nothing revealed before the guess


def test_the_computed_depth_is_right_and_reveal_shows_the_grid_and_its_sentences(grid):
    patching, expected = grid
    right = computed_answer(patching, expected)
    at = go(page(), STEP)
    verdict = answer(at, STEP, right)
    assert verdict.startswith("Right!") and f"The model's answer: **{right}**" in verdict
    (chart,) = at.get("plotly_chart")
    drawn = json.loads(chart.proto.spec)["data"][0]
    seen = assert_same_grid(patching, expected, array(drawn["z"]))
    assert drawn["y"] == expected.rows and len(drawn["x"]) == len(patching.tokens)
    shown = next(m.value for m in at.markdown if m.value.startswith("- ")).replace("\\", "")
    assert all(s in shown for s in vpa_read.sentences(patching, seen))
    assert at.button(key="lesson.reveal.open_patching").label == "Open “Where is the answer made?”"


def test_another_depth_is_marked_wrong(grid):
    right = computed_answer(*grid)
    at = go(page(), STEP)
    wrong = next(o for o in options(at, STEP) if o != right)
    verdict = answer(at, STEP, wrong)
    assert verdict.startswith("Not this time.") and f"The model's answer: **{right}**" in verdict


@pytest.mark.parametrize(("number", "title"), [(6, "Which word mattered most?"), (7, "The MLM loss"),
                                               (11, "Contextual vectors")])
def test_an_old_numbered_link_opens_the_step_it_opened_before(number, title):
    at = open_link("lesson", {"step": str(number)})
    assert at.session_state["lesson.step"] == vls.from_link(str(number))
    assert at.subheader[0].value == f"{vls.position(vls.from_link(str(number)))}. {title}"


def test_a_link_names_the_new_step_by_its_id():
    at = open_link("lesson", {"step": STEP})
    assert at.subheader[0].value == "7. Where is the answer made?"
