"""Representations with the learner's own sentences (issue 33, point 4): two sentences span one direction, so the
map is one honest line with plain numbers, and the one cosine that exists is drawn with a note on the missing one."""


import numpy as np
from streamlit.testing.v1 import AppTest

from bertviz_lab.ui.representations.vectors import OWN
from bertviz_lab.views.representations import vectors as rv
from tests.helpers.figure_data import array, figures
from tests.helpers.lab import app_test
from tests.helpers.model_numbers import cosine_matrix, word_vectors
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "representations.py")
TWO = ["i went to the bank to deposit money .", "we sat on the bank of the river ."]


def own(lines: str) -> AppTest:
    at = app_test(PAGE, 120).run()
    at.selectbox(key="repr.set").select(OWN).run()
    at.text_area(key="repr.sentences").input(lines).run()
    assert not at.exception and not at.warning
    return at


def titled(at: AppTest, start: str) -> dict:
    """The one chart whose title starts with `start`."""
    (spec,) = [s for s in figures(at) if s["layout"]["title"]["text"].startswith(start)]
    return spec


def test_two_sentences_are_drawn_on_one_axis_with_plain_numbers_and_a_sentence_why(shipped):
    at = own(f"money | {TWO[0]}\nriver | {TWO[1]}")
    scatter = titled(at, "The principal component ·")
    layout = scatter["layout"]
    assert layout["xaxis"]["title"]["text"] == "PC1 (100% of the variance)"
    assert layout["yaxis"]["showticklabels"] is False and "title" not in layout["yaxis"]  # no "PC2 (0%)" of noise
    assert layout["xaxis"]["tickformat"] == ".3~g" and layout["xaxis"]["exponentformat"] == "power"  # no "1.8f"
    x = np.concatenate([array(t["x"]) for t in scatter["data"]])
    y = np.concatenate([array(t["y"]) for t in scatter["data"]])
    assert np.all(y == 0.0)  # the rounding-level second component is not drawn
    last = word_vectors(shipped, "bank", TWO)[-1]  # (2, d): the model run here, one sentence at a time
    distance = np.linalg.norm(last[0] - last[1])
    assert abs(abs(x[0] - x[1]) - distance) < 1e-4 * distance  # the line holds the whole distance
    low, high = layout["xaxis"]["range"]
    room = 0.1 * (high - low)  # no point on the edge, where its number would sit under the legend
    assert low + room < x.min() and x.max() < high - room
    assert any("Two points span one direction" in c.value and "three sentences or more" in c.value
               for c in at.caption)


def test_three_sentences_get_the_2d_map_with_both_axes_padded():
    at = own(f"money | {TWO[0]}\nriver | {TWO[1]}\nmoney | the bank gave me a loan .")
    layout = titled(at, "Two principal components ·")["layout"]
    assert layout["yaxis"]["title"]["text"].startswith("PC2 (") and layout["yaxis"].get("showticklabels", True)
    assert not any("Two points span" in c.value for c in at.caption)


def test_two_sentences_of_different_senses_draw_their_one_cosine_with_a_note(shipped):
    at = own(f"money | {TWO[0]}\nriver | {TWO[1]}")
    lines = titled(at, "Cosine of the one")
    assert lines["layout"]["title"]["text"] == "Cosine of the one different-sense pair by layer"
    assert [t["name"] for t in lines["data"]] == [rv.CROSS]
    expected = [cosine_matrix(layer)[0, 1] for layer in word_vectors(shipped, "bank", TWO)]  # every layer
    np.testing.assert_allclose(array(lines["data"][0]["y"]), expected, atol=1e-5)
    notes = [i.value for i in at.info]
    assert any("1 different-sense pair and no same-sense pair" in n and "add a sentence with a sense one of them already has" in n
               for n in notes), notes


def test_one_sense_only_draws_the_same_sense_line():
    at = own(f"money | {TWO[0]}\nmoney | the bank gave me a loan .\nmoney | the bank was closed .")
    lines = titled(at, "Mean similarity by layer")
    assert [t["name"] for t in lines["data"]] == [rv.SAME]
    assert any("3 same-sense pairs and no different-sense pair" in i.value for i in at.info)


def test_pairs_are_counted_as_the_means_take_them():
    assert rv.pairs(["a", "a", "b", None]) == (1, 2)
    assert rv.pairs([None, None]) == (0, 0) and rv.pairs(["a", "b"]) == (0, 1)
