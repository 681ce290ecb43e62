"""What BERT learned: sense sets, one word's vectors across sentences, the logit lens, nearest neighbours,
retrieval by sense and the embeddings' geometry (views/representations/vectors.py, views/representations/neighbours.py)."""

import re

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.corpus import generate_documents
from bertviz_lab.corpus.senses import SENSE_SETS, examples, sense_of
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from bertviz_lab.views.representations import neighbours as nv
from bertviz_lab.views.representations import vectors as rv
from bertviz_lab.views.representations import words
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(SHIPPED)


@pytest.fixture(scope="module")
def corpus_sentences():
    return {s for story in generate_documents(3000, seed=0) for s in story}


# --- The sense sets -------------------------------------------------------------------------------------
def test_every_built_in_sentence_is_from_the_corpus_and_tagged_with_its_own_sense(corpus_sentences):
    for word, senses in SENSE_SETS.items():
        assert len(senses) >= 2
        for sentence, sense in examples(word):
            assert sentence in corpus_sentences, sentence
            assert re.search(rf"\b{word}\b", sentence)
            assert sense_of(word, sentence) == sense, sentence


def test_the_tagger_names_a_sense_only_when_the_sentence_shows_it(corpus_sentences):
    assert sense_of("bank", "the bank was busy in may.") is None  # either bank could be busy
    assert sense_of("bank", "i went to the bank to deposit money.") == "money"
    assert sense_of("light", "the tent was light and easy to carry.") == "not heavy"
    for word in SENSE_SETS:
        hits = [s for s in corpus_sentences if re.search(rf"\b{word}\b", s)]
        tagged = [s for s in hits if sense_of(word, s)]
        assert len(tagged) >= 0.8 * len(hits), word


# --- One word, many sentences -----------------------------------------------------------------------
def test_a_padded_batch_gives_each_sentence_its_own_vectors(tiny_model, tiny_tokenizer):
    sentences = ["the cat sat on the mat .", "i went to the bank to deposit money because it was delicious ."]
    wic = rv.word_in_context(tiny_model, tiny_tokenizer, "the", sentences)
    assert wic.vectors.shape == (3, 2, 32) and wic.positions == ((1,), (4,))
    for s, text in enumerate(sentences):  # each alone, unpadded
        out = inputs.run(tiny_model, tiny_tokenizer.encode(text))
        alone = np.stack([h[0, wic.positions[s][0]].numpy() for h in out.hidden_states])
        assert np.abs(alone - wic.vectors[:, s]).max() < 1e-5


def test_a_word_in_pieces_is_the_mean_of_its_pieces(tiny_model, tiny_tokenizer):
    sentences = ["it was unbelievable .", "the unbelievable cat sat ."]
    wic = rv.word_in_context(tiny_model, tiny_tokenizer, "unbelievable", sentences)
    assert wic.pieces == ("un", "##believ", "##able") and wic.positions == ((3, 4, 5), (2, 3, 4))
    out = inputs.run(tiny_model, tiny_tokenizer.encode(sentences[1]))
    expected = out.hidden_states[2][0, 2:5].mean(dim=0).numpy()
    assert np.abs(expected - wic.vectors[2, 1]).max() < 1e-5


def test_only_whole_words_match(tiny_tokenizer):
    text = "the cat was playing ."
    encoding = tiny_tokenizer.encode(text)  # play ##ing
    assert words.find_word(tiny_tokenizer, text, encoding, "play") is None
    assert words.find_word(tiny_tokenizer, text, encoding, "playing") == (4, 5)
    assert words.find_word(tiny_tokenizer, text, encoding, "PLAYING") == (4, 5)  # an uncased model reads it lowercased
    assert words.find_word(tiny_tokenizer, text, encoding, ".") == (6,)


def test_the_first_occurrence_and_accents_as_the_tokenizer_normalizes_them(tiny_tokenizer):
    text = "The cat and thé cat ."  # an uncased BERT reads thé as the: both are "the"
    encoding = tiny_tokenizer.encode(text)
    assert words.occurrences(tiny_tokenizer, text, encoding, "the") == [(1,), (4,)]
    assert words.find_word(tiny_tokenizer, text, encoding, "thé") == (1,)
    assert words.find_word(tiny_tokenizer, text, encoding, "he") is None  # not inside "the"


@pytest.mark.parametrize("word, sentences, message", [
    ("bank", ["i went to the bank .", "the cat sat ."], "sentence 2 does not contain"),
    ("bank", ["i went to the bank ."], "at least two sentences"),
    ("", ["a", "b"], "type a word"),
    ("zzzq", ["zzzq .", "zzzq ."], "does not know"),
    ("the", ["the " * 80, "the cat ."], "sentence 1"),
    ("the", ["the cat ."] * 30, "at most 24"),
])
def test_bad_input_is_a_clear_message(tiny_model, tiny_tokenizer, word, sentences, message):
    with pytest.raises(InputError, match=message):
        rv.word_in_context(tiny_model, tiny_tokenizer, word, sentences)


def test_cosines_sense_means_and_projection():
    v = np.array([[[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]]])  # one layer, three sentences
    sims = rv.cosines(v)
    assert np.allclose(sims[0], [[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    table = rv.sense_similarity(sims, ["a", "a", "b"])
    assert table.loc[0, rv.SAME] == 1.0 and table.loc[0, rv.CROSS] == 0.0
    assert np.isnan(rv.sense_similarity(sims, ["a", None, "b"]).loc[0, rv.SAME])  # no same-sense pair
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 6, 8))
    vectors[1] = vectors[0] * 2  # the same picture, scaled: the signs must not flip between layers
    points, explained = rv.projection(vectors)
    assert np.all(explained.sum(axis=1) <= 1 + 1e-9) and np.all(explained[:, 0] >= explained[:, 1])
    assert np.allclose(points[1], 2 * points[0])
    centred = vectors[2] - vectors[2].mean(axis=0)  # PCA keeps distances at most as large
    d_2d = np.linalg.norm(points[2][:, None] - points[2][None], axis=-1)
    d_full = np.linalg.norm(centred[:, None] - centred[None], axis=-1)
    assert np.all(d_2d <= d_full + 1e-9)


def test_on_the_shipped_model_bank_senses_separate_after_the_last_layer(shipped):
    """The BERT tutorial's lesson (seed text 002), measured: same-sense "bank" vectors are closer than different-sense
    ones at the end."""
    chosen = [(s, sense) for s, sense in examples("bank")][:3] + [(s, sense) for s, sense in examples("bank")][4:7]
    assert [sense for _, sense in chosen] == ["money"] * 3 + ["river"] * 3
    wic = rv.word_in_context(shipped.model, shipped.tokenizer, "bank", [s for s, _ in chosen])
    table = rv.sense_similarity(rv.cosines(wic.vectors), [sense for _, sense in chosen])
    last = table.iloc[-1]
    assert len(table) == 5 and last[rv.SAME] > last[rv.CROSS] + 0.1


# --- The logit lens ---------------------------------------------------------------------------------
def test_the_lens_last_layer_is_the_mask_and_predict_answer(tiny_model, tiny_tokenizer):
    encoding = tiny_tokenizer.encode("the [MASK] sat on the [MASK] .")
    lens = rv.logit_lens(tiny_model, encoding, tiny_tokenizer.mask_id)
    assert [m.position for m in lens.masks] == [2, 6] and lens.masks[0].probs.shape == (3, 100)
    assert lens.final_difference < 1e-6
    shown = vpr.predict_masks(tiny_model, tiny_tokenizer, encoding, top_k=5)
    for mask, expected in zip(lens.masks, shown.masks):
        top = mask.top(2, 5)
        assert [i for i, _ in top] == [c.id for c in expected.candidates]
        assert np.allclose([p for _, p in top], [c.prob for c in expected.candidates], atol=1e-6)
    assert np.allclose(lens.masks[0].probs.sum(axis=1), 1.0, atol=1e-5)
    assert not np.allclose(lens.masks[0].probs[0], lens.masks[0].probs[2])  # the layers do change the guess


def test_the_lens_table_ranks_the_final_answer(tiny_model, tiny_tokenizer):
    lens = rv.logit_lens(tiny_model, tiny_tokenizer.encode("the cat sat on the [MASK] ."), tiny_tokenizer.mask_id)
    table = rv.lens_table(lens.masks[0], tiny_tokenizer, 3)
    answer = tiny_tokenizer.id_to_token(lens.masks[0].top(2, 1)[0][0])
    assert list(table.columns) == ["layer", "#1", "#2", "#3", f"p({answer})", f"rank of {answer}"]
    assert table[f"rank of {answer}"].iloc[-1] == 1 and table["#1"].iloc[-1].split()[0] == answer
    ids, probs = rv.lens_grid(lens.masks[0], 3)
    assert probs.shape == (3, len(ids)) and len(set(ids)) == len(ids) and 3 <= len(ids) <= 9


def test_the_lens_needs_a_mask_and_an_mlm_head(tiny_model, tiny_tokenizer, tiny_config):
    with pytest.raises(InputError, match=r"\[MASK\]"):
        rv.logit_lens(tiny_model, tiny_tokenizer.encode("the cat sat ."), tiny_tokenizer.mask_id)
    headless = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False).eval()
    with pytest.raises(InputError, match="no MLM head"):
        rv.logit_lens(headless, tiny_tokenizer.encode("the [MASK] ."), tiny_tokenizer.mask_id)


# --- Nearest neighbours and geometry ------------------------------------------------------------------
@pytest.fixture
def tiny_bank(tiny_model, tiny_tokenizer):
    sentences = ["the cat sat on the mat .", "i went to the bank .", "the dog sat on the rug .", "it was tired ."]
    return nv.build_bank(tiny_model, tiny_tokenizer, sentences)


def test_the_bank_keeps_every_word_token_at_unit_length(tiny_bank, tiny_tokenizer):
    words = sum(len(tiny_tokenizer.encode(s)) - 2 for s in tiny_bank.sentences)
    assert tiny_bank.size == words and tiny_bank.vectors.shape == (3, words, 32)
    assert np.allclose(np.linalg.norm(tiny_bank.vectors.astype(np.float32), axis=-1), 1.0, atol=2e-3)
    for n in range(tiny_bank.size):
        s, p = tiny_bank.sentence_of[n], tiny_bank.position[n]
        assert tiny_tokenizer.token_to_id(tiny_bank.tokens[s][p]) == tiny_bank.token_ids[n]
    assert not set(tiny_bank.token_ids) & set(tiny_tokenizer.special_ids)


def test_a_bank_token_is_its_own_nearest_neighbour(tiny_bank, tiny_model, tiny_tokenizer):
    sentence = "i went to the bank ."
    query = nv.token_vectors(tiny_model, tiny_tokenizer.encode(sentence), 5)  # "bank"
    table = nv.contextual_neighbours(tiny_bank, tiny_tokenizer, query[2], 2, 3, word="bank")
    assert table.loc[0, nv.TOKEN] == "bank" and table.loc[0, nv.COSINE] > 0.999
    assert table.loc[0, nv.SENTENCE] == "i went to the «bank» ."
    assert table.loc[0, nv.SENSE] == "—"  # the sentence does not say which bank
    assert list(table[nv.COSINE]) == sorted(table[nv.COSINE], reverse=True)
    own = tuple(tiny_tokenizer.encode(sentence).tokens)
    left_out = nv.contextual_neighbours(tiny_bank, tiny_tokenizer, query[2], 2, 30, word="bank", own=own)
    assert len(left_out) == tiny_bank.size - 6  # all but its own sentence's six word tokens
    assert "i went to the «" not in "".join(left_out[nv.SENTENCE])
    assert left_out.loc[0, nv.COSINE] < 0.999 and (left_out[nv.SENSE] == "").all()  # no other bank in the bank


def test_a_neighbour_is_marked_in_its_sentence_as_written(tiny_tokenizer):
    text = "the cat was playing ."
    encoding = tiny_tokenizer.encode(text)
    assert nv.marked(text, encoding, 5) == "the cat was play«ing» ."
    assert nv.marked(text, encoding, 1) == "«the» cat was playing ."


def test_static_neighbours_are_the_nearest_other_rows(tiny_model, tiny_tokenizer):
    cat = tiny_tokenizer.token_to_id("cat")
    table = nv.static_neighbours(tiny_model, tiny_tokenizer, cat, 5)
    weights = torch.nn.functional.normalize(tiny_model.bert.embeddings.word_embeddings.weight.detach(), dim=-1)
    scores = (weights @ weights[cat]).numpy()
    scores[[cat, *tiny_tokenizer.special_ids]] = -2
    assert list(table[nv.TOKEN]) == [tiny_tokenizer.id_to_token(i) for i in np.argsort(-scores)[:5]]
    assert "cat" not in set(table[nv.TOKEN]) and not {"[PAD]", "[CLS]"} & set(table[nv.TOKEN])
    with pytest.raises(InputError, match="one word of the vocabulary"):
        nv.vocabulary_id(tiny_tokenizer, "unbelievable")


def test_anisotropy_is_the_mean_cosine_of_unrelated_pairs(tiny_bank):
    table = nv.anisotropy(tiny_bank, pairs=300)
    assert list(table["layer"]) == [0, 1, 2] and table["mean cosine"].between(-1, 1).all()
    again = nv.anisotropy(tiny_bank, pairs=300)
    assert table.equals(again)  # seeded


def test_position_cosines(tiny_model):
    sims = nv.position_cosines(tiny_model, 10)
    assert sims.shape == (10, 10) and np.allclose(np.diag(sims), 1) and np.allclose(sims, sims.T)


def test_retrieval_by_sense_beats_chance_on_the_shipped_model(shipped, monkeypatch):
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)
    bank = nv.build_bank(shipped.model, shipped.tokenizer, nv.bank_sentences(shipped.model))
    assert any(t == "bank" for t in (shipped.tokenizer.id_to_token(int(i)) for i in bank.token_ids))
    table = nv.precision_at_k(nv.sense_vectors(shipped.model, shipped.tokenizer, bank), 3)
    assert set(table["word"]) == set(SENSE_SETS) and table["layer"].max() == 4
    last = table[table["layer"] == 4]
    assert (last["precision"] > last["chance"]).all()
    assert table["precision"].between(0, 1).all()
