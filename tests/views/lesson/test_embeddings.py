"""The lesson's embedding step (views/lesson/vector_steps.py) on a tiny model and on the shipped one: a word is asked
about only beside OPTIONS words of its kind, and the answer is the option whose embedding row has the highest
cosine with the word's row, computed here with numpy from the model's embedding matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.corpus import lexicon
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.lesson import questions as vl
from bertviz_lab.views.lesson import vector_steps as vlv
from tests.helpers.lab import vocab_of_size
from tests.helpers.paths import ROOT

CAT = "the cat sat on the [MASK] ."
PETS = ("puppy", "kitten", "rabbit", "hamster", "parrot")  # the story world's pets the tiny vocabulary lacks


def with_pets(n: int) -> WordPieceTokenizer:
    """The tiny vocabulary (one pet, "dog") with `n` more pets in place of its last filler tokens: 100 entries."""
    return WordPieceTokenizer.from_vocab(vocab_of_size(100 - n) + list(PETS[:n]))


def cosines(model, tokenizer: WordPieceTokenizer, word: str, others) -> dict[str, float]:
    """The cosine of each of `others`' embedding rows with `word`'s, in numpy."""
    rows = model.bert.embeddings.word_embeddings.weight.detach().numpy()  # (V, d)

    def unit(entry: str) -> np.ndarray:  # (d,)
        row = rows[tokenizer.token_to_id(entry)]
        return row / np.linalg.norm(row)
    return {w: float(unit(w) @ unit(word)) for w in others}


def test_the_embedding_answer_is_the_option_whose_row_is_nearest(tiny_model):
    tokenizer = with_pets(len(PETS))  # six pets beside "cat": dog and the five
    assert vlv.askable_words(inputs.encode(tokenizer, tiny_model, CAT), tokenizer) == ["cat"]
    quiz, options, _ = vlv.embeddings(tiny_model, tokenizer, "cat")
    cosine = cosines(tiny_model, tokenizer, "cat", quiz.question.options)
    assert len(cosine) == vlv.OPTIONS and set(cosine) <= {"dog", *PETS}
    assert quiz.answer == max(cosine, key=cosine.get)
    assert options["cosine"].tolist() == pytest.approx(sorted(cosine.values(), reverse=True), abs=1e-5)
    every = cosines(tiny_model, tokenizer, "cat", ["dog", *PETS])
    assert quiz.answer == max(every, key=every.get)  # the nearest pet of all, not only of the four shown


def test_a_word_is_asked_about_only_beside_options_words_of_its_kind(tiny_model, tiny_tokenizer):
    words = vlv.embedding_words(inputs.encode(tiny_tokenizer, tiny_model, CAT), tiny_tokenizer)
    assert words == ["the", "cat", "sat", "on"] and vlv.content_word(words) == "cat"
    for n in (0, vlv.OPTIONS - 2):  # "dog" and n more: fewer kin than options, the word itself left out
        tokenizer = with_pets(n)
        assert vlv.askable_words(inputs.encode(tokenizer, tiny_model, CAT), tokenizer) == []
        with pytest.raises(InputError, match="too few words of “cat”'s kind"):  # never options of another kind
            vlv.embeddings(tiny_model, tokenizer, "cat")
    exactly = with_pets(vlv.OPTIONS - 1)  # "dog" and three more: as many kin as options
    assert vlv.askable_words(inputs.encode(exactly, tiny_model, CAT), exactly) == ["cat"]
    assert set(vlv.embeddings(tiny_model, exactly, "cat")[0].question.options) == {"dog", *PETS[:vlv.OPTIONS - 1]}
    with pytest.raises(InputError):
        vlv.embeddings(tiny_model, tiny_tokenizer, "zebra")  # not in the tiny vocabulary

def test_the_embedding_options_are_words_of_the_same_kind_where_the_story_world_has_them():
    assert vlv.kin("cat") == [w for w in lexicon.PETS.split() if w != "cat"]
    assert "mouse" in vlv.kin("rat") and "mice" not in vlv.kin("rat") and vlv.kin("sat") == []
    shipped = load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")
    quiz, options, _ = vlv.embeddings(shipped.model, shipped.tokenizer, "cat")
    assert set(quiz.question.options) <= set(vlv.kin("cat")) and len(quiz.question.options) == 4  # pets, all four
    table = torch.nn.functional.normalize(shipped.model.bert.embeddings.word_embeddings.weight.detach(), dim=-1)
    cosine = {w: float(table[shipped.tokenizer.token_to_id(w)] @ table[shipped.tokenizer.token_to_id("cat")])
              for w in vlv.kin("cat")}
    assert quiz.answer == max(cosine, key=cosine.get)  # the nearest pet of all, not only of the four shown
    assert options["cosine"].tolist() == pytest.approx(sorted((cosine[w] for w in quiz.question.options),
                                                              reverse=True), abs=1e-5)
    assert "same kind as “cat”" in quiz.why and "dog, puppy" in quiz.why
    others = sorted(cosine[w] for w in quiz.question.options)[:3]
    assert max(others) <= cosine[quiz.answer] - vl.NEAR and quiz.scored and not quiz.also  # clear of a near tie
