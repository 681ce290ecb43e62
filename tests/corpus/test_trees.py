"""The story world's gold trees: one root, no cycle, projective, every word covered, the probe set's links kept."""

from __future__ import annotations

import random

import pytest

from bertviz_lab.corpus.agreement import EXAMPLE, agreement_pairs
from bertviz_lab.corpus.generator import vocabulary
from bertviz_lab.corpus.grammar import Writer
from bertviz_lab.corpus.phrases import TOWN
from bertviz_lab.corpus.probes import PROBES
from bertviz_lab.corpus.tables import CATEGORIES, VERBS
from bertviz_lab.corpus.tree import Builder, Tree, check
from bertviz_lab.corpus.tree_parts import DETERMINERS, POSSESSIVES, PREPOSITIONS, chunks, kind_of
from bertviz_lab.corpus.trees import CLASSES, probe_trees, treebank
from bertviz_lab.errors import InputError

BANK = treebank(1500, seed=3)


def test_every_tree_is_a_projective_tree_over_every_word():
    constructions = set()
    for tree in BANK:
        assert check(tree.heads) == ""
        assert tree.heads.count(-1) == 1 and tree.relations[tree.root] == "root"
        assert tree.projective(), tree.text
        assert all(r for r in tree.relations) and len(tree.words) == len(tree.text.split())
        assert tree.words[-1] == "." and tree.relations[-1] == "punct"
        constructions.add(tree.construction)
    assert constructions == {"clause", "copula", "relative", "because", "and", "purpose", "agreement"}


def test_same_seed_same_trees_and_another_seed_others():
    assert [t.text for t in treebank(50, seed=3)] == [t.text for t in BANK[:50]]
    assert [t.heads for t in treebank(50, seed=3)] == [t.heads for t in BANK[:50]]
    assert [t.text for t in treebank(50, seed=4)] != [t.text for t in BANK[:50]]


def test_words_come_from_the_story_worlds_vocabulary():
    known = set(vocabulary()) | {".", ","}
    unknown = {w for tree in BANK for w in tree.words} - known
    assert not unknown


def test_relations_are_where_the_grammar_puts_them():
    for tree in BANK:
        for i, rel in enumerate(tree.relations):
            head = tree.heads[i]
            if rel == "det":
                assert tree.upos[i] == "DET" and head > i  # a determiner comes before its noun
            if rel == "case":
                assert tree.upos[i] == "ADP" and head > i
            if rel == "cop":
                assert tree.upos[head] == "ADJ" and tree.words[i] in {"was", "were", "is", "are", "am"}
            if rel == "nsubj":
                assert tree.upos[head] in {"VERB", "ADJ"} and head > i
        for pronoun, antecedent in tree.coref:
            assert tree.upos[pronoun] == "PRON" and antecedent < pronoun
            assert tree.relations[antecedent] == "nsubj"


def test_probe_sentences_get_trees_that_agree_with_their_links():
    trees = probe_trees()
    for probe in PROBES:
        tree = trees[probe.text]
        assert tree.text == probe.text and tree.projective()
        for det, noun in probe.links.get("det_noun", ()):
            assert tree.heads[det] == noun and tree.relations[det] == "det"
        for verb, subject in probe.links.get("verb_subject", ()):
            # the subject's head is the verb, or both hang from the same word (the verb an aux or a copula)
            assert tree.relations[subject] == "nsubj"
            assert tree.heads[subject] == verb or (
                tree.heads[subject] == tree.heads[verb] and tree.relations[verb] in {"aux", "cop"})
        assert set(probe.links.get("pronoun_referent", ())) == set(tree.coref)


def test_the_animal_sentence_tree():
    tree = probe_trees()["the animal did not cross the street because it was too tired ."]
    words = tree.words
    head = {w + str(i): words[h] if h >= 0 else "ROOT" for i, (w, h) in enumerate(zip(words, tree.heads))}
    assert head == {"the0": "animal", "animal1": "cross", "did2": "cross", "not3": "cross", "cross4": "ROOT",
                    "the5": "street", "street6": "cross", "because7": "tired", "it8": "tired", "was9": "tired",
                    "too10": "tired", "tired11": "cross", ".12": "cross"}
    assert tree.relations[11] == "advcl" and tree.relations[6] == "obj" and tree.coref == ((8, 1),)


@pytest.mark.parametrize("cls", CLASSES)
def test_every_template_used_has_the_chunk_shape(cls):
    w = Writer(random.Random(0))
    for _verb, tails in VERBS[cls]:
        for template in tails:
            for _ in range(3):
                b = Builder()
                words = w.fill(template, poss="his").split()
                made = chunks(b, words)
                assert b.words == words and made
                assert all(h != -2 for i, h in enumerate(b.heads) if i not in {c for _, c in made})


def test_every_purpose_is_a_verb_andchunks():
    w = Writer(random.Random(0))
    for purposes in TOWN.values():
        for template in purposes:
            first, *rest = w.fill(template, poss="her").split()
            assert first not in DETERMINERS | PREPOSITIONS | POSSESSIVES  # a verb comes first
            if rest:
                assert chunks(Builder(), rest)


def test_kinds_come_from_the_lexicon():
    assert kind_of("cat") == "pet" and kind_of("apple") == "fruit" and kind_of("happy") == "describing"
    assert kind_of("zzz") == ""
    tree = probe_trees()["the cat sat on the mat ."]
    assert tree.kinds[1] == "pet" and tree.kinds[5] == "seat"


def test_agreement_pairs_count_their_attractors():
    pairs = agreement_pairs(30, seed=1)
    assert pairs[0].tree.text == EXAMPLE and pairs[0].right == "were" and pairs[0].attractors == 1
    by = {k: [p for p in pairs if p.attractors == k] for k in range(4)}
    assert all(len(v) >= 30 for v in by.values())
    for pair in pairs:
        tree = pair.tree
        subject = [i for i, r in enumerate(tree.relations) if r == "nsubj"][0]
        assert tree.words[pair.verb] == pair.right and tree.relations[pair.verb] == "cop"
        nouns = [i for i, r in enumerate(tree.relations) if r == "nmod"]
        assert subject < min(nouns, default=pair.verb) and max(nouns, default=subject) < pair.verb
        plural_subject = pair.right in {"were", "are"}
        assert plural_subject == pair.plural
        assert {pair.right, pair.wrong} in ({"was", "were"}, {"is", "are"})
        assert pair.masked_words("[MASK]")[pair.verb] == "[MASK]"
    assert len({p.plural for p in pairs}) == 2 and len({p.right for p in pairs}) == 4
    for k, these in by.items():  # half the subjects plural at each count: always one form scores 50%
        assert abs(2 * sum(p.plural for p in these) - len(these)) <= 1, k
    alike = {n.sg for items in CATEGORIES.values() for n in items if getattr(n, "pl", None) == getattr(n, "sg", 0)}
    assert {"sheep", "deer", "fish"} <= alike
    for pair in agreement_pairs(200, seed=2):
        subject = pair.tree.relations.index("nsubj")
        assert pair.tree.words[subject] not in alike  # "the sheep was/were": both right, so never asked


def test_bad_requests_are_refused():
    with pytest.raises(InputError):
        treebank(-1)
    with pytest.raises(InputError):
        agreement_pairs(0)
    with pytest.raises(InputError, match="root"):
        Tree(("a", "b"), (-1, -1), ("root", "root"), ("X", "X"))
    with pytest.raises(InputError, match="cycle"):
        Tree(("a", "b", "c"), (-1, 2, 1), ("root", "dep", "dep"), ("X", "X", "X"))


def test_tree_distances_and_depths():
    tree = probe_trees()["the cat sat on the mat ."]
    d = tree.distances()
    assert (d == d.T).all() and (d.diagonal() == 0).all()
    assert d[0, 4] == 4 and d[0, 5] == 3  # the -> cat -> sat -> mat (-> the)
    assert list(tree.depths()) == [2, 1, 0, 2, 2, 1, 1]
    assert len(tree.edges()) == 6 and len(tree.edges(skip_punct=True)) == 5


def test_the_story_worlds_trees_round_trip_through_conllu(tmp_path):
    from bertviz_lab.syntax.treebank import read_treebank, write_treebank
    path = write_treebank(BANK[:60], tmp_path / "story.conllu")
    back = read_treebank(path)
    assert back.n_skipped == 0 and len(back.trees) == 60
    for a, b in zip(BANK[:60], back.trees):
        assert (a.words, a.heads, a.relations, a.upos) == (b.words, b.heads, b.relations, b.upos)
