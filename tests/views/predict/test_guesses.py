"""Mask filling for the Mask & predict page: whole-word masking, iterative filling, words, sentences."""

import math

import pytest

from bertviz_lab.bert.tokenizer import Encoding
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr


def encode(model, tokenizer, a, b=None):
    return inputs.encode(tokenizer, model, a, b)


def test_mask_words_masks_every_piece_of_a_word_and_nothing_else(tiny_model, tiny_tokenizer):
    enc = encode(tiny_model, tiny_tokenizer, "the cat unbelievable sat")
    pieces = [i for i, w in enumerate(enc.word_ids) if w == 2]
    assert len(pieces) == 3  # un ##believ ##able
    masked = inputs.mask_words(enc, tiny_tokenizer.mask_id, [2])
    assert [i for i, t in enumerate(masked.ids) if t == tiny_tokenizer.mask_id] == pieces
    assert masked.tokens[pieces[0]] == "[MASK]" and masked.tokens[1] == "the"
    assert enc.tokens[pieces[0]] == "un"  # the input is not changed
    with pytest.raises(InputError, match="not in the text"):
        inputs.mask_words(enc, tiny_tokenizer.mask_id, [9])


def test_iterative_fill_goes_left_to_right_and_starts_like_independent(tiny_model, tiny_tokenizer):
    enc = encode(tiny_model, tiny_tokenizer, "the [MASK] sat on the [MASK] [MASK]")
    independent = vpr.predict_masks(tiny_model, tiny_tokenizer, enc)
    fill = vpr.fill_iteratively(tiny_model, tiny_tokenizer, enc)
    assert [s.positions for s in fill.steps] == [[2], [6], [7]]
    assert fill.steps[0].prediction.masks == independent.masks
    # step 2 is a fresh prediction on the sentence with the first mask written in
    written = list(enc.ids)
    written[2] = independent.masks[0].candidates[0].id
    again = vpr.predict_masks(tiny_model, tiny_tokenizer, Encoding(
        **{**enc.__dict__, "ids": written, "tokens": fill.steps[0].tokens}))
    assert fill.steps[1].fills[0].candidates == again.masks[0].candidates
    assert "[MASK]" not in fill.filled and fill.at_once == 0


def test_step_cap_fills_the_rest_at_once(tiny_model, tiny_tokenizer):
    enc = encode(tiny_model, tiny_tokenizer, "[MASK] [MASK] [MASK] [MASK] [MASK]")
    fill = vpr.fill_iteratively(tiny_model, tiny_tokenizer, enc, max_steps=2)
    assert len(fill.steps) == 2 and fill.at_once == 4 and "[MASK]" not in fill.filled


def test_words_keep_what_was_typed_and_label_repeats(tiny_model, tiny_tokenizer):
    text = "The cat sat on the\u200b mat"
    enc = encode(tiny_model, tiny_tokenizer, text)
    words = inputs.words(enc, text)
    assert [w.text for w in words] == ["The", "cat", "sat", "on", "the", "mat"]
    assert [w.label for w in words][4] == "the" and words[0].label == "The"
    enc2 = encode(tiny_model, tiny_tokenizer, "the cat the [MASK]")
    labels = inputs.words(enc2, "the cat the [MASK]")
    assert [w.label for w in labels] == ["the", "cat", "the₂", "[MASK]"] and labels[3].is_mask


def test_sentence_glues_pieces_and_marks_fills():
    tokens = ["[CLS]", "un", "##believ", "##able", "cat", "[SEP]", "it", "[SEP]"]
    seq = [None, 0, 0, 0, 0, None, 1, None]
    assert inputs.sentence(tokens, seq) == "unbelievable cat [SEP] it"
    assert inputs.sentence(tokens, seq, marked=[4]) == "unbelievable «cat» [SEP] it"


def test_explore_masks_reports_both_views_and_hidden_words(tiny_model, tiny_tokenizer):
    enc = encode(tiny_model, tiny_tokenizer, "the cat sat on the [MASK]")
    report = vpr.explore_masks(tiny_model, tiny_tokenizer, enc, [1])
    assert [m.position for m in report.independent.masks] == [2, 6]
    assert report.hidden == {2: "cat"} and report.iterative is not None
    assert report.max_entropy == pytest.approx(math.log(tiny_tokenizer.vocab_size))
    rows = vpr.mask_rows(report)
    assert [r["hidden word"] for r in rows] == ["cat", ""] and all("left-to-right" in r for r in rows)
    single = vpr.explore_masks(tiny_model, tiny_tokenizer, enc)
    assert single.iterative is None
    assert inputs.sentence(single.encoding.tokens, single.encoding.sequence_ids) == "the cat sat on the [MASK]"
    with pytest.raises(vpr.NothingMasked):
        vpr.explore_masks(tiny_model, tiny_tokenizer, encode(tiny_model, tiny_tokenizer, "the cat"))
