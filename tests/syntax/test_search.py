"""exBERT's corpus search over one head: the picks of a hand-made reading named in both directions with exact
histograms and base rates, then a tiny model's corpus: the strongest pick is the corpus's largest weight, the
shares add up to 1, and a text without trees still searches."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.encode import SentenceReading, read_corpus
from bertviz_lab.syntax.search import NO_RELATION, search_head

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

CAT = Tree(("the", "cat", "sat", "."), (1, 2, -1, 2), ("det", "nsubj", "root", "punct"),
           ("DET", "NOUN", "VERB", "PUNCT"), ("det", "pet", "verb", "punct"))
TREES = [CAT,
         Tree(("a", "dog", "went", "to", "the", "river", "."), (1, 2, -1, 5, 5, 2, 2),
              ("det", "nsubj", "root", "case", "det", "obl:to", "punct"),
              ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT")),
         Tree(("they", "love", "delicious", "food", "!"), (1, -1, 3, 1, 1), ("nsubj", "root", "amod", "obj", "punct"),
              ("PRON", "VERB", "ADJ", "NOUN", "PUNCT")),
         Tree(("rain",), (-1,), ("root",), ("NOUN",))]


def reading(words: tuple[str, ...], rows: list[list[float]]) -> SentenceReading:
    return SentenceReading(words, ("[CLS]", *words, "[SEP]"), tuple((i + 1,) for i in range(len(words))),
                           np.array(rows, dtype=np.float32)[None, None])


def test_picks_are_named_in_both_directions():
    # the -> cat (its head): det; cat -> sat (its head): nsubj; sat -> cat (its dependent): nsubj reversed;
    # . -> the: no relation. Self-attention (the diagonal) is the largest in every row and never picked.
    rows = [[0.9, 0.6, 0.1, 0.1], [0.2, 0.9, 0.5, 0.1], [0.1, 0.7, 0.9, 0.1], [0.4, 0.3, 0.2, 0.9]]
    found = search_head([reading(CAT.words, rows)], [CAT], 0, 0, top=3)
    assert [(p.query, p.key, p.relation) for p in found.picks] == [
        (2, 1, "nsubj (head → dependent)"), (0, 1, "det"), (1, 2, "nsubj")]
    assert [p.weight for p in found.picks] == pytest.approx([0.7, 0.6, 0.5])
    assert (found.picks[0].query_kind, found.picks[0].key_kind, found.total) == ("verb", "pet", 4)
    # 12 ordered pairs: each of the 3 edges twice, 6 with no relation between the words
    expected = {"det": (1, 1), "nsubj": (1, 1), "nsubj (head → dependent)": (1, 1), NO_RELATION: (1, 6),
                "det (head → dependent)": (0, 1), "punct": (0, 1), "punct (head → dependent)": (0, 1)}
    assert {s.label: (s.share, s.base) for s in found.relations} == {k: (a / 4, b / 12) for k, (a, b) in expected.items()}
    kinds = {s.label: (s.share, s.base) for s in found.kinds}
    assert kinds["verb → pet"] == pytest.approx((0.25, 1 / 12)) and "pet → pet" not in kinds
    assert found.relations[0].label == NO_RELATION and found.relations[0].lift == pytest.approx(0.5)
    assert next(s for s in found.relations if s.label == "det").lift == pytest.approx(3)


@pytest.fixture
def readings(tiny_model, tiny_tokenizer):
    return read_corpus(tiny_model, tiny_tokenizer, TREES, batch_size=2)


def test_search_over_a_corpus(readings):
    found = search_head(readings, TREES, 1, 2, top=5)
    strongest = max((r.attention[1, 2] * (1 - np.eye(len(r)))).max() for r in readings)
    assert found.picks[0].weight == pytest.approx(float(strongest))
    assert [p.weight for p in found.picks] == sorted((p.weight for p in found.picks), reverse=True)
    assert found.total == sum(len(t) for t in TREES if len(t) > 1)
    for histogram in (found.relations, found.kinds):
        assert sum(s.share for s in histogram) == pytest.approx(1)
        assert sum(s.base for s in histogram) == pytest.approx(1)
    for pick in found.picks:
        tree = TREES[pick.sentence]
        assert pick.query != pick.key and pick.words == tree.words
        assert pick.relation in (NO_RELATION, tree.base_relation(pick.query),
                                 tree.base_relation(pick.key) + " (head → dependent)")
    assert "obl" in {s.label for s in found.relations}  # obl:to counts as obl


def test_search_without_trees(tiny_model, tiny_tokenizer):
    texts = ["the cat sat on the mat .", "he went to the bank because it was delicious"]
    found = search_head(read_corpus(tiny_model, tiny_tokenizer, texts), None, 0, 1, top=100)
    assert len(found.picks) == found.total == 16 and (found.relations, found.kinds) == ((), ())
    assert {(p.relation, p.query_kind, p.key_kind) for p in found.picks} == {("", "", "")}


def test_search_checks_its_input(readings):
    with pytest.raises(InputError, match="layer must be"):
        search_head(readings, TREES, 2, 0)
    with pytest.raises(InputError, match="readings for"):
        search_head(readings, TREES[:2], 0, 0)


def test_the_base_rate_is_a_random_pick_per_word_whatever_the_sentence_lengths():
    from bertviz_lab.syntax.search import NO_RELATION, REVERSED, _base_rates

    short = Tree(("the", "cat"), (1, -1), ("det", "root"), ("DET", "NOUN"))
    longer = Tree(("dogs", "bark", "."), (1, -1, 1), ("nsubj", "root", "punct"), ("NOUN", "VERB", "PUNCT"))
    relations, _, total = _base_rates([short, longer])
    assert total == 5  # one pick per word
    shares = {label: weight / total for label, weight in relations.items()}
    # "the" picks "cat" for sure (1 of 1), "dogs" picks "bark" half the time: not 2 of all 8 ordered pairs
    assert shares["det"] == shares["det" + REVERSED] == 0.2
    assert shares["nsubj"] == shares["punct" + REVERSED] == 0.1
    assert abs(shares[NO_RELATION] - 0.2) < 1e-12 and abs(sum(shares.values()) - 1) < 1e-12
