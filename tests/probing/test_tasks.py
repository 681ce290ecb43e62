"""The probing tasks' examples (probing/tasks.py) from hand-built trees: each task's labels, words and pairs; the split
by sentence; the caps; the one-sentence errors; the control task (Hewitt & Liang) fixed per word type and drawn from
the training labels; the majority rate."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError

from bertviz_lab.probing.features import stacked
from bertviz_lab.probing.records import Examples
from bertviz_lab.probing.tasks import NUMBER, control_labels, examples, majority

# the cats chased a dog .   /   the boy said that he saw Mia .
CATS = Tree(("the", "cats", "chased", "a", "dog", "."), (1, 2, -1, 4, 2, 2),
            ("det", "nsubj", "root", "det", "obj", "punct"), ("DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"))
BOY = Tree(("the", "boy", "said", "that", "he", "saw", "Mia", "."), (1, 2, -1, 5, 5, 2, 5, 2),
           ("det", "nsubj", "root", "mark", "nsubj", "ccomp", "obj", "punct"),
           ("DET", "NOUN", "VERB", "SCONJ", "PRON", "VERB", "PROPN", "PUNCT"), coref=((4, 1),))
TREES = [CATS, BOY] * 40  # 80 sentences: 60 train, 20 test
SPLIT = 60


def features_of(trees):
    return stacked([np.zeros((1, len(t), 2), dtype=np.float32) for t in trees])  # only the rows matter here


@pytest.fixture(scope="module")
def feats():
    return features_of(TREES)


def test_part_of_speech_labels_each_word_with_its_upos(feats):
    ex = examples("pos", TREES, feats, SPLIT)
    assert ex.classes == tuple(sorted(set(CATS.upos + BOY.upos))) and ex.second is None
    assert ex.first.tolist() == list(range(len(ex))) and len(ex) == 40 * 14  # every word, in order, under the caps
    assert [ex.classes[k] for k in ex.labels[:14]] == list(CATS.upos + BOY.upos)
    assert ex.texts[:6] == CATS.words and ex.keys[6:14] == BOY.words


def test_dependency_pairs_read_the_dependent_and_its_head(feats):
    ex = examples("dep", TREES, feats, SPLIT)
    assert len(ex) == 40 * 12  # every word but the two roots
    first = [(int(f), int(s), ex.classes[k], t) for f, s, k, t in zip(ex.first, ex.second, ex.labels, ex.texts)][:5]
    assert first == [(0, 1, "det", "the -> cats"), (1, 2, "nsubj", "cats -> chased"), (3, 4, "det", "a -> dog"),
                     (4, 2, "obj", "dog -> chased"), (5, 2, "punct", ". -> chased")]


def test_coreference_pairs_the_pronoun_with_every_noun_and_name_of_its_sentence(feats):
    ex = examples("coref", TREES, feats, SPLIT)
    base = len(CATS)  # BOY's first row
    assert len(ex) == 40 * 2 and ex.classes == ("other", "referent")
    assert [(int(f) - base, int(s) - base, ex.classes[k]) for f, s, k in zip(ex.first[:2], ex.second[:2],
                                                                             ex.labels[:2])] == [
        (4, 1, "referent"), (4, 6, "other")]
    assert ex.texts[:2] == ("he -> boy", "he -> Mia") and ex.keys[:2] == ("boy", "Mia")


def test_number_labels_the_lexicons_nouns(feats):
    ex = examples("number", TREES, feats, SPLIT)
    assert ex.classes == ("plural", "singular") and len(ex) == 40 * 3  # cats, dog, boy ("Mia" is a name)
    assert [(t, ex.classes[k]) for t, k in zip(ex.texts[:3], ex.labels[:3])] == [
        ("cats", "plural"), ("dog", "singular"), ("boy", "singular")]
    assert all(NUMBER[t] == ex.classes[k] for t, k in zip(ex.texts, ex.labels))


def test_the_split_is_by_sentence(feats):
    for task in ("pos", "dep", "coref", "number"):
        ex = examples(task, TREES, feats, SPLIT)
        assert np.array_equal(ex.train, feats.sentence[ex.first] < SPLIT)
        assert ex.train.any() and (~ex.train).any()


def test_each_split_is_capped_by_a_seeded_draw(feats, monkeypatch):
    monkeypatch.setattr("bertviz_lab.probing.tasks.MAX_TRAIN", 50)
    monkeypatch.setattr("bertviz_lab.probing.tasks.MAX_TEST", 30)
    ex = examples("pos", TREES, feats, SPLIT, seed=1)
    assert int(ex.train.sum()) == 50 and int((~ex.train).sum()) == 30
    assert np.all(np.diff(ex.first[ex.train]) > 0) and np.all(np.diff(ex.first[~ex.train]) > 0)  # corpus order
    again, other = examples("pos", TREES, feats, SPLIT, seed=1), examples("pos", TREES, feats, SPLIT, seed=2)
    assert np.array_equal(ex.first, again.first) and not np.array_equal(ex.first, other.first)


def test_a_task_that_cannot_be_probed_is_one_sentence(feats):
    with pytest.raises(InputError, match="no probing task 'tense'"):
        examples("tense", TREES, feats, SPLIT)
    few = TREES[:10]
    with pytest.raises(InputError, match="training and .* test examples; a probe needs at least 40 and 20"):
        examples("pos", few, features_of(few), 8)
    singular = [Tree(("the", "dog", "ran", "."), (1, 2, -1, 2), ("det", "nsubj", "root", "punct"),
                     ("DET", "NOUN", "VERB", "PUNCT"))] * 80
    with pytest.raises(InputError, match="every training example has the label 'singular'"):
        examples("number", singular, features_of(singular), SPLIT)
    no_coref = [CATS] * 80
    with pytest.raises(InputError, match="no pronoun's referent"):
        examples("coref", no_coref, features_of(no_coref), SPLIT)
    with pytest.raises(InputError, match="must be the same"):
        examples("pos", TREES[:-1], feats, SPLIT)


def test_the_control_gives_each_word_type_one_label_from_the_training_distribution():
    rng = np.random.Generator(np.random.PCG64(0))
    n, types = 6000, 2000
    keys = tuple(f"w{i}" for i in rng.integers(0, types, n))
    labels = (rng.random(n) < 0.25).astype(np.int64)  # 75% class 0
    train = np.arange(n) < 4500
    ex = Examples("pos", ("A", "B"), labels, keys, np.arange(n), None, train, keys)
    control = control_labels(ex, seed=3)
    per_type = {}
    for key, label in zip(keys, control):
        assert per_type.setdefault(key, label) == label  # fixed per type
    share = Counter(per_type.values())[0] / len(per_type)
    assert abs(share - np.mean(labels[train] == 0)) < 0.04  # drawn from the training distribution
    shuffled = np.random.Generator(np.random.PCG64(1)).permutation(n)
    turned = Examples("pos", ("A", "B"), labels[shuffled], tuple(keys[i] for i in shuffled), np.arange(n), None,
                      train[shuffled], keys)
    assert np.array_equal(control_labels(turned, seed=3), control[shuffled])  # whatever the order
    assert not np.array_equal(control_labels(ex, seed=4), control)


def test_majority_is_the_commonest_training_labels_share_of_the_test_split():
    ex = Examples("pos", ("A", "B", "C"), np.array([0, 0, 1, 1, 0, 2, 2, 2]), ("x",) * 8, np.arange(8), None,
                  np.array([True] * 5 + [False] * 3), ("x",) * 8)
    assert majority(ex) == 0.0  # class 0 is commonest in training; the test rows are all 2
    assert majority(ex, np.array([1, 1, 1, 0, 0, 1, 0, 1])) == 2 / 3
