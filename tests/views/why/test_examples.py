"""The Why-this-guess page's examples: the checked-in sentences (views/why/found.py, written by
`python -m bench.why_disagree`) still are what the search finds on the shipped model, a pronoun sentence among them;
`examples` offers Abnar & Zuidema's sentence only with a real BERT, and writes each family's own mask token."""

from __future__ import annotations

import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.tokenizer import MASK, WordPieceTokenizer
from bertviz_lab.views.why import examples as why_examples
from bertviz_lab.views.why.found import FOUND, SEARCH
from tests.helpers.family_models import build
from tests.helpers.lab import vocab_of_size
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(SHIPPED)


@pytest.mark.parametrize("found", FOUND, ids=lambda r: r["text"])
def test_each_stored_example_scores_as_the_search_found_it(shipped, found):
    scored = why_examples.score(shipped.model, shipped.tokenizer, found["text"])
    assert scored.rho == pytest.approx(found["rho"], abs=1e-6)
    assert scored.rho < SEARCH["median_rho"]  # attention disagrees with occlusion more than on most sentences
    assert (scored.note, scored.result.target) == (found["note"], found["target"])
    assert len(scored.result.explanation.movable) >= SEARCH["min_words"]
    assert found["text"].count(MASK) == 1 and found["word"] not in ("", MASK)


def test_the_examples_are_the_search_s_lowest_and_hold_a_pronoun_sentence():
    assert len(FOUND) == 5 and SEARCH["sentences"] >= 200
    assert any(r["kind"] in ("pronoun", "antecedent") for r in FOUND)
    assert [r["rho"] for r in FOUND[:-1]] == sorted(r["rho"] for r in FOUND[:-1])  # lowest first (the last may be
    # the pronoun sentence brought in)
    assert all(f"ρ = {r['rho']:.2f}" in e.note and r["note"] in e.note for r, e in zip(FOUND, why_examples.built_in()))


def test_the_real_bert_sentence_comes_only_with_a_real_bert_vocabulary(shipped):
    small = why_examples.examples(shipped.tokenizer, "bert")
    assert [e.text for e in small] == [r["text"] for r in FOUND] and all(str(e) == e.text for e in small)
    big = WordPieceTokenizer.from_vocab(vocab_of_size(30_522))
    (first, *rest) = why_examples.examples(big, "bert")
    assert first.text == why_examples.REAL_BERT_EXAMPLE == "the author talked to sara about [MASK] book ." and rest == small
    assert why_examples.REAL_BERT_EXAMPLE not in [e.text for e in why_examples.examples(big, "distilbert")]  # family bert only


def test_each_family_reads_its_own_mask_token(tmp_path):
    build("roberta", tmp_path)
    tokenizer = load_checkpoint(tmp_path).tokenizer
    assert tokenizer.mask_token == "<mask>"
    shown = why_examples.examples(tokenizer, "roberta")
    assert [e.text for e in shown] == [r["text"].replace(MASK, "<mask>") for r in FOUND]
    assert all("[MASK]" not in e.text for e in shown)
