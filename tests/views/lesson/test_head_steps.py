"""views/lesson/head_steps.py on a tiny model: the previous-token head and the strongest key against the attention
weights read here, near ties between heads, and the pronoun head chosen without the example and scored on
sentences held out from the choice."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from bertviz_lab.pretrain import head_roles
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import head_steps as vlh
from tests.helpers.paths import ROOT


def encoded(model, tokenizer, text: str):
    return inputs.encode(tokenizer, model, text)


def test_the_previous_token_head_is_found_even_when_planted(tiny_model, tiny_tokenizer):
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, "the animal did not cross the street ."))
    quiz, table = vlh.previous_token(view)
    w = view.weights
    T = w.shape[-1]
    scores = np.array([[w[layer, head, np.arange(1, T - 1), np.arange(0, T - 2)].mean() for head in range(4)]
                       for layer in range(2)])
    layer, head = np.unravel_index(scores.argmax(), scores.shape)
    assert quiz.answer == f"L{layer} H{head}" and len(quiz.question.options) == 8
    assert table["score"].is_monotonic_decreasing
    planted = w.copy()
    planted[1, 3] = np.eye(T, k=-1) + np.eye(T, k=0) * (np.arange(T) == 0)[:, None]  # L1 H3 looks one back
    quiz, _ = vlh.previous_token(dataclasses.replace(view, weights=planted))
    assert quiz.answer == "L1 H3" and "100.0%" in quiz.why


def test_a_planted_near_tie_of_two_heads_accepts_both(tiny_model, tiny_tokenizer):
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, "the animal did not cross the street ."))
    T = view.weights.shape[-1]
    look_back = np.eye(T, k=-1) + np.eye(T, k=0) * (np.arange(T) == 0)[:, None]
    planted = view.weights.copy()
    planted[1, 3], planted[0, 1] = look_back, 0.99 * look_back + 0.01 * np.eye(T)  # L0 H1 1% behind L1 H3
    quiz, _ = vlh.previous_token(dataclasses.replace(view, weights=planted))
    assert quiz.answer == "L1 H3" and quiz.is_right("L0 H1") and not quiz.is_right("L0 H0") and quiz.scored


def test_no_head_under_twice_even_attention_is_named_as_doing_it_and_the_step_is_not_scored(tiny_model,
                                                                                           tiny_tokenizer):
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, "the animal did not cross the street ."))
    T = view.weights.shape[-1]
    even = np.full_like(view.weights, 1 / T)  # every head spreads its attention evenly
    even[1, 3] = 0.8 / T + np.eye(T, k=-1) * 1.1 / T  # L1 H3 gives the previous token 1.9/T: more, but under 2/T
    quiz, _ = vlh.previous_token(dataclasses.replace(view, weights=even))
    assert quiz.question.prompt == "On this sentence, which head puts the most weight on the previous token?"
    assert quiz.answer == "L1 H3" and not quiz.scored and quiz.unclear == "No head clearly does it"
    assert f"1/{T} = {1 / T:.1%}" in quiz.why and "no head clearly looks at the previous token" in quiz.why
    assert not vl.Answered((), "L1 H3", quiz).right  # not scored: not right, not counted
    look_back = np.eye(T, k=-1) + np.eye(T, k=0) * (np.arange(T) == 0)[:, None]
    even[1, 3] = look_back
    assert vlh.previous_token(dataclasses.replace(view, weights=even))[0].scored


def test_the_previous_token_head_is_scored_on_other_sentences_too(tiny_model, tiny_tokenizer):
    example = "the animal did not cross the street because it was too tired ."
    elsewhere = vlh.previous_elsewhere(tiny_model, tiny_tokenizer, example)
    others = vlh.other_sentences(example)
    assert example not in others and len(others) == elsewhere.sentences == len(set(others))
    assert "the cat sat on the mat ." in others  # the probe set, and the pronoun sentences
    scores, even = [], []
    for text in others:  # by hand: each word token's weight on the token just before it, mean over the words
        enc = tiny_tokenizer.encode(text)
        w = head_roles.attention(tiny_model, [enc])[0]
        T = len(enc.ids)
        scores.append(w[:, :, np.arange(1, T - 1), np.arange(0, T - 2)].mean(-1))
        even.append(1 / T)
    assert elsewhere.scores == pytest.approx(np.mean(scores, axis=0), abs=1e-5)
    assert elsewhere.even == pytest.approx(np.mean(even))
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, example))
    quiz, table = vlh.previous_token(view, elsewhere)
    layer, head = (int(p[1:]) for p in table["head"][0].split())
    assert f"On {len(others)} other sentences" in quiz.why
    assert f"{table['head'][0]} gives the previous token {elsewhere.scores[layer, head]:.1%}" in quiz.why


def test_the_strongest_key_is_the_largest_weight_of_the_query_row(tiny_model, tiny_tokenizer):
    text = "the animal did not cross because it was tired ."
    view = av.explore(tiny_model, encoded(tiny_model, tiny_tokenizer, text))
    query = av.default_query(view)
    assert view.tokens[query] == "it"
    for layer, head in ((0, 0), (1, 2)):
        quiz, steps = vlh.strongest_key(view, layer, head, query)
        best = int(np.argmax(view.weights[layer, head, query]))
        assert quiz.answer == vl.token_options(view.tokens)[best]
        assert steps[av.WEIGHT].sum() == pytest.approx(1.0) and f"{steps[av.WEIGHT].max():.4f}" in quiz.why


def test_the_pronoun_head_is_chosen_without_the_example_and_scored_on_sentences_held_out(tiny_model,
                                                                                       tiny_tokenizer):
    example = "the animal did not cross the street because it was too tired ."  # a probe sentence
    found = vlh.pronoun_heads(tiny_model, tiny_tokenizer, example.replace(" .", "."))
    assert example not in found.chosen_on + found.held_out and not set(found.chosen_on) & set(found.held_out)
    assert len(found.chosen_on) + len(found.held_out) == len(vlh.PRONOUN_SENTENCES) - 1 and found.held_out
    by_text = {p.text: p for p in vlh.PRONOUN_SENTENCES}

    def weight(text):  # (L, H): the pronoun's first token to every token of its noun, by hand
        enc = tiny_tokenizer.encode(text)
        w = head_roles.attention(tiny_model, [enc])[0]
        pronoun, noun = by_text[text].links[vlh.ROLE][0]
        return w[:, :, enc.word_ids.index(pronoun)][..., [i for i, x in enumerate(enc.word_ids) if x == noun]].sum(-1)
    choosing = np.mean([weight(t) for t in found.chosen_on], axis=0)
    assert found.choosing == pytest.approx(choosing, abs=1e-5)
    layer, head = np.unravel_index(choosing.argmax(), choosing.shape)
    assert found.best == f"L{layer} H{head}"
    held = [weight(t)[layer, head] for t in found.held_out]
    note = found.note(int(layer), int(head))
    assert f"{np.mean(held):.2f} of the pronoun's attention" in note and f"{len(found.held_out)} held-out" in note
    assert "A weight shows where a head looks, not what the model does" in note


def test_the_held_out_pronoun_sentences_test_more_than_one_construction(tiny_model, tiny_tokenizer):
    first_noun = {p.text: p.links[vlh.ROLE][0][1] == 1 for p in vlh.PRONOUN_SENTENCES}  # the referent is word 1
    assert sum(not first for first in first_noun.values()) >= 4
    for example in ("the animal did not cross the street because it was too tired .", "the cat sat on the mat ."):
        found = vlh.pronoun_heads(tiny_model, tiny_tokenizer, example)
        for side in (found.chosen_on, found.held_out):  # a referent later in the sentence on both sides
            assert {first_noun[t] for t in side} == {True, False}, side


def test_the_extra_pronoun_sentences_link_a_pronoun_to_a_noun_of_the_shipped_vocabulary():
    vocab = set(ROOT.joinpath("checkpoints/bertviz-mini/vocab.txt")
                .read_text(encoding="utf-8").split())
    for text, pronoun, noun in vlh.MORE_PRONOUNS:
        words = text.split()
        assert set(words) <= vocab, text
        assert words[pronoun] in av.PRONOUNS and words[noun] not in av.PRONOUNS and words[noun - 1] == "the"
