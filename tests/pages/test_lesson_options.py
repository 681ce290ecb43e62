"""The Lesson's options give nothing away (AppTest on the shipped model): each question's options are of one kind
and one form, so only the model's numbers tell them apart; the NSP step's true sentence B stays folded away until
Reveal; the contextual step's paragraph does not say its answer; the embeddings and NSP steps' notes say what holds."""

from __future__ import annotations

import re

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import lexicon
from bertviz_lab.ui.shell.state import Lesson as K
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import vector_steps as vlv
from tests.helpers.lesson_page import SHIPPED, go, options, page, paragraph

LOSS_BAND = r"(below [\d.]+: p above [\d.]+|[\d.]+ to [\d.]+: p from [\d.]+ to [\d.]+|above [\d.]+: p below [\d.]+)"


def lexicon_list(word: str) -> set[str]:
    """Every word of the lexicon lists that hold `word` (plurals left out)."""
    lists = [v.split() for n, v in vars(lexicon).items() if n.isupper() and isinstance(v, str)]
    return {w.split(":")[0] for words in lists if word in {x.split(":")[0] for x in words} for w in words}


def test_each_steps_options_share_one_kind_and_one_form():
    at = page()
    go(at, "embeddings")
    word = at.selectbox(key=K.WORD.name).value
    assert set(options(at, "embeddings")) <= lexicon_list(word) - {word} and len(options(at, "embeddings")) == 4  # "cat": four pets
    go(at, "heads")
    assert all(re.fullmatch(r"L\d+ H\d+", o) for o in options(at, "heads"))
    go(at, "softmax")
    tokens = at.session_state[K.ATTENTION.name].split()
    assert all(re.sub(r" \(\d+\)$", "", o) in ["[CLS]", "[SEP]", *tokens] for o in options(at, "softmax"))
    go(at, "guess")
    assert all(o.isalpha() for o in options(at, "guess")) and len(options(at, "guess")) == 5  # the model's top five words
    assert not set(options(at, "guess")) & {"the", "on", "sat"}  # no word of the sentence as a decoy
    go(at, "why")  # the sentence's words, in its order, none of them the blank or the framing
    assert options(at, "why") == ["the (1)", "cat", "sat", "on", "the (5)", "."]
    go(at, "loss")
    assert all(re.fullmatch(LOSS_BAND, o) for o in options(at, "loss"))
    go(at, "training")
    assert all(re.fullmatch(r"about \d+\.\d", o) for o in options(at, "training"))
    go(at, "contextual")
    assert all(re.fullmatch(r"at (layer 0|the last layer|neither)( and at the last layer| only)?", o)
               for o in options(at, "contextual")) and len(options(at, "contextual")) == 4  # four "where" phrases of one shape


def test_the_nsp_steps_sentences_look_alike_and_the_true_one_stays_folded_until_reveal():
    at = page()
    at.session_state[K.NSP_B.name] = "It was a warm afternoon."  # typed the way people type
    go(at, "nsp")
    shown = options(at, "nsp")
    assert len(shown) == 2 and "it was a warm afternoon ." in shown  # words and punctuation apart, lower case
    tokenizer = load_checkpoint(SHIPPED).tokenizer  # uncased: both in lower case, as the model reads them
    assert all(o == vl.spaced(o, tokenizer) for o in shown)  # both written alike: no spacing or capital tells
    (folded,) = [e for e in at.expander if "really comes next" in e.label]
    assert folded.proto.expanded is False and folded.text_input(key=K.NSP_B.name).value == "It was a warm afternoon."
    at.radio(key="lesson.guess.nsp").set_value(shown[0]).run()
    at.button(key="lesson.reveal.nsp").click().run()
    (opened,) = [e for e in at.expander if "really comes next" in e.label]
    assert opened.proto.expanded is True


def test_the_embeddings_step_says_how_many_words_of_its_kind_it_needs_and_nsp_how_both_bs_are_written():
    at = page()
    at.session_state[K.MASKED.name] = "the [MASK] sat ."  # no word here has a kind in the story world
    go(at, "embeddings")
    (note,) = at.info
    assert f"has at least {vlv.OPTIONS} more words of its kind, each one token too" in note.value
    go(at, "nsp")
    caption = " ".join(c.value for c in at.caption)
    assert "Both are written alike: words and punctuation apart, one space between, in lower case, as this model " \
           "reads them." in caption  # the shipped model is uncased
    assert "as the tokenizer splits them" not in caption


def test_the_contextual_steps_paragraph_leaves_the_answer_to_the_model():
    text = paragraph("contextual")
    assert "depends only on the token" not in text and "not on the words around it" not in text
    assert not any(option in text for option in vlv.CLOSER.values())
