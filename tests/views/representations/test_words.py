"""A typed word, found in a sentence the same way for every family: by the tokenizer's character offsets, so
RoBERTa's `Ġbank` and SentencePiece's `▁b an k` are "bank" as much as WordPiece's `bank` is (issue 31, point 1).
Each page's word lookup runs on each family's random checkpoint (tests/helpers/family_models.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.cli import main
from bertviz_lab.corpus.senses import examples
from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.representations import neighbours as nv
from bertviz_lab.views.representations import vectors as rv
from bertviz_lab.views.representations import words
from tests.helpers.family_models import build
from tests.helpers.family_pages import PAGES
from tests.helpers.lab import app_test

MEMBERS = ["bert", "bert-cased", "distilbert", "roberta", "xlm-roberta", "electra-generator", "albert"]
MONEY, RIVER, START = "i went to the bank to deposit money .", "he sat by the river bank.", "Bank robbers are rare ."


@pytest.fixture(scope="module", params=MEMBERS)
def member(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(request.param, folder)
    return request.param, folder, load_checkpoint(folder)


def covered(text: str, offsets: list[tuple[int, int]], positions: tuple[int, ...]) -> str:
    """The characters of `text` that the tokens at `positions` cover, without the space a marker may hold."""
    return text[min(offsets[p][0] for p in positions):max(offsets[p][1] for p in positions)].strip()


def test_the_word_is_found_in_every_sentence_as_the_model_reads_it(member):
    name, _, ckpt = member
    sentences = [MONEY, RIVER, START]
    if ckpt.tokenizer.encode(START).tokens[1] == ckpt.tokenizer.unk_token:  # a cased vocabulary without "Bank"
        with pytest.raises(InputError, match=r"does not know 'Bank': it reads it as \[UNK\] \(sentence 3\)"):
            rv.word_in_context(ckpt.model, ckpt.tokenizer, "bank", sentences)
        sentences = sentences[:2]
    wic = rv.word_in_context(ckpt.model, ckpt.tokenizer, "bank", sentences)
    for text, positions, spelling in zip(sentences, wic.positions, wic.spellings):
        encoding = ckpt.tokenizer.encode(text)
        assert covered(text, encoding.offsets, positions).lower() == "bank", (text, positions)
        assert spelling == tuple(encoding.tokens[p] for p in positions)  # what the model reads there
        assert not any(encoding.special_mask[p] for p in positions)
    if name == "roberta":  # byte-level BPE writes a word after a space with its space: Ġbank, not b ank
        assert wic.spellings[:2] == (("Ġbank",), ("Ġbank",)) and wic.pieces == ("Ġbank",)
    out = inputs.run(ckpt.model, ckpt.tokenizer.encode(RIVER))
    expected = np.stack([h[0, list(wic.positions[1])].mean(dim=0).numpy() for h in out.hidden_states])
    assert np.abs(expected - wic.vectors[:, 1]).max() < 1e-4


def test_a_sentence_without_the_word_and_an_unknown_word_keep_their_messages(member):
    _, _, ckpt = member
    with pytest.raises(InputError, match="sentence 2 does not contain the word 'bank'"):
        rv.word_in_context(ckpt.model, ckpt.tokenizer, "bank", [MONEY, "the banks were shut ."])  # not "banks"
    unknown = ckpt.tokenizer.encode("the zzzq .").tokens
    if ckpt.tokenizer.unk_token in unknown:  # byte-level BPE reads every byte: it has no unknown word
        with pytest.raises(InputError, match="does not know 'zzzq'"):
            rv.word_in_context(ckpt.model, ckpt.tokenizer, "zzzq", ["the zzzq .", "a zzzq ."])


def test_the_static_neighbours_word_is_the_spelling_a_sentence_holds(member):
    name, _, ckpt = member
    tok = ckpt.tokenizer
    encoding = tok.encode(MONEY)
    spelling = [encoding.tokens[p] for p in words.find_word(tok, MONEY, encoding, "bank")]
    if name == "roberta":
        assert spelling == ["Ġbank"]
    if len(spelling) == 1:
        assert nv.vocabulary_id(tok, "bank") == tok.token_to_id(spelling[0])
    else:  # several pieces: not one row of the embedding matrix
        with pytest.raises(InputError, match="one word of the vocabulary"):
            nv.vocabulary_id(tok, "bank")


def test_neighbours_and_retrieval_by_sense_find_the_word(member):
    _, _, ckpt = member
    model, tok = ckpt.model, ckpt.tokenizer
    sentences = [s for s, _ in examples("bank")] + [MONEY, "the cat sat on the mat ."]
    bank = nv.build_bank(model, tok, sentences)
    sets = {s.word: s for s in nv.sense_vectors(model, tok, bank)}
    assert len(sets["bank"].queries) == len(examples("bank")) and len(sets["bank"].pool) == len(examples("bank")) + 1
    table = nv.precision_at_k(list(sets.values()), 1)
    assert table[table["word"] == "bank"]["precision"].between(0, 1).all()
    encoding = tok.encode(MONEY)
    sense = nv.sense_words(tok, MONEY, encoding)
    position = min(sense)  # the Nearest neighbours tab's default token: the first piece of "bank"
    assert sense[position] == "bank" and position in words.find_word(tok, MONEY, encoding, "bank")
    layer = model.config.num_hidden_layers
    query = nv.token_vectors(model, encoding, position)[layer]
    found = nv.contextual_neighbours(bank, tok, query, layer, 40, word="bank", own=tuple(encoding.tokens))
    assert len(found) == 40 and MONEY not in set(found[nv.SENTENCE].str.replace("[«»]", "", regex=True))
    for token, sentence, sense in zip(found[nv.TOKEN], found[nv.SENTENCE], found[nv.SENSE]):
        assert (sense != "") == marks_the_word(sentence), (token, sentence, sense)
    assert (found[nv.SENSE] != "").any()


def marks_the_word(marked: str, word: str = "bank") -> bool:
    """Whether the characters «marked» in a neighbour's sentence lie inside `word` there."""
    before, inside, after = re.fullmatch(r"(.*)«(.+)»(.*)", marked).groups()
    start, end = len(before), len(before) + len(inside)
    return any(m.start() <= start and end <= m.end() for m in re.finditer(rf"\b{word}\b", before + inside + after))


def test_the_similarity_command_follows_the_word(member, capsys):
    name, folder, ckpt = member
    assert main(["similarity", "--checkpoint", str(folder), "--device", "cpu", "--json", "--word", "bank",
                 MONEY, RIVER]) == 0
    result = json.loads(capsys.readouterr().out)
    assert np.array(result["layers"]).shape == (ckpt.config.num_hidden_layers + 1, 2, 2) and result["word"] == "bank"
    if name == "roberta":
        assert result["tokens"] == [["Ġbank"], ["Ġbank"]]


def test_the_representations_page_follows_the_word_for_roberta(tmp_path, monkeypatch):
    """The Same-word tab and Nearest neighbours on RoBERTa: no "does not contain", and `Ġbank` is the word."""
    build("roberta", tmp_path)
    tokenizer = load_checkpoint(tmp_path).tokenizer
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)
    at = app_test(str(PAGES / "representations.py"), 120)
    at.session_state["model.path"] = str(tmp_path)
    at.run()
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    assert at.get("plotly_chart")
    at.session_state["repr.tab"] = "Nearest neighbours"
    at.run()
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key="repr.nn_token").value == 7  # <s> i Ġ w ent Ġto Ġthe Ġbank: the sense-set word
    contextual = at.dataframe[1].value
    assert "Ġbank" in set(contextual[nv.TOKEN]) and (contextual[nv.SENSE] != "").any()
    query = tokenizer.encode(MONEY).tokens  # the default query: never its own sentence, however it is written
    shown = contextual[nv.SENTENCE].str.replace("[«»]", "", regex=True)
    assert all(tokenizer.encode(s).tokens != query for s in shown)
