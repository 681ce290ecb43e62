"""syntax/probe.py: the spanning tree and UUAS agree with networkx, a gold tree scores itself perfectly, a probe finds
a tree hidden in the vectors as squared distances and not one that is absent, and bad input is refused."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from bertviz_lab.corpus.tree import Tree
from bertviz_lab.errors import InputError
from bertviz_lab.syntax.probe import (
    distance_spearman,
    linear_uuas,
    mst_edges,
    predict,
    probe_layers,
    root_accuracy,
    spearman,
    uuas,
    uuas_counts,
)
from tests.helpers.probe_corpus import corpus, random_tree

pytestmark = pytest.mark.usefixtures("one_thread")


def networkx_mst(distances: np.ndarray) -> set[frozenset[int]]:
    graph = nx.Graph()
    n = len(distances)
    graph.add_weighted_edges_from((i, j, distances[i, j]) for i in range(n) for j in range(i + 1, n))
    return {frozenset(e) for e in nx.minimum_spanning_tree(graph).edges()}


@pytest.mark.parametrize("n", [2, 3, 7, 15, 40])
def test_the_spanning_tree_is_networkx_s(n):
    rng = np.random.default_rng(n)
    for _ in range(5):
        points = rng.normal(size=(n, 4))
        distances = ((points[:, None] - points[None]) ** 2).sum(-1)
        assert mst_edges(distances) == networkx_mst(distances)
        assert len(mst_edges(distances)) == n - 1


def test_uuas_counts_are_a_networkx_spanning_tree_over_the_words_that_are_not_punctuation():
    rng = np.random.default_rng(1)
    for _ in range(20):
        tree = random_tree(rng, int(rng.integers(3, 12)))
        w = len(tree)
        predicted = rng.random((w, w))
        predicted = predicted + predicted.T
        keep = [i for i in range(w) if tree.relations[i] != "punct"]
        found = {frozenset((keep[a], keep[b])) for a, b in map(tuple, networkx_mst(predicted[np.ix_(keep, keep)]))}
        gold = {frozenset((i, h)) for i, h in enumerate(tree.heads) if h >= 0 and i in keep and h in keep}
        assert uuas_counts(predicted, tree) == (len(found & gold), len(gold))


def test_a_sentence_of_one_word_and_a_full_stop_counts_nothing():
    tree = Tree(("Go", "."), (-1, 0), ("root", "punct"), ("VERB", "PUNCT"))
    assert uuas_counts(np.ones((2, 2)), tree) == (0, 0)


def test_a_gold_tree_scores_itself_perfectly():
    trees = [random_tree(np.random.default_rng(i), 4 + i % 7) for i in range(12)]
    distances = [t.distances().astype(float) for t in trees]
    assert uuas(distances, trees) == 1.0
    assert distance_spearman(distances, trees) == pytest.approx(1.0)
    assert root_accuracy([t.depths().astype(float) for t in trees], trees) == 1.0
    assert root_accuracy([-t.depths().astype(float) for t in trees], trees) == 0.0
    assert 0 < linear_uuas(trees) < 1


def test_spearman_is_the_rank_correlation_with_ties_sharing_their_mean_rank():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(6, 9)), rng.normal(size=(6, 9))
    squared = ((np.argsort(np.argsort(a)) - np.argsort(np.argsort(b))) ** 2).sum(1)
    assert spearman(a, b) == pytest.approx(1 - 6 * squared / (9 * (81 - 1)))  # the formula without ties
    tied = np.array([[1.0, 2.0, 2.0, 3.0]])  # ranks 0, 1.5, 1.5, 3
    assert spearman(tied, np.array([[0.0, 1.0, 2.0, 3.0]]))[0] == pytest.approx(np.corrcoef([0, 1.5, 1.5, 3],
                                                                                            [0, 1, 2, 3])[0, 1])
    assert spearman(np.zeros((1, 4)), tied)[0] == 0.0  # a constant row has no order


def test_a_probe_finds_a_tree_hidden_in_the_vectors_and_not_one_that_is_absent():
    train, test = corpus(0, 150, layers=2), corpus(1, 40, layers=2)
    calls = []
    report = probe_layers(train, test, rank=16, seed=3, progress=lambda *a: calls.append(a))
    assert [s.layer for s in report.layers] == [0, 1]
    # each layer's start is said (a wide model's layer takes seconds), with the last one's UUAS, then the end
    assert [c[:2] for c in calls] == [(0, 2), (1, 2), (2, 2)] and calls[0][2] == "layer 0 (0 of 2 layers done)"
    assert calls[1][2] == f"layer 1 (1 of 2 layers done; layer 0's UUAS {report.layers[0].uuas:.2f})"
    assert (report.train_sentences, report.dev_sentences, report.test_sentences, report.rank) == (150, 15, 40, 16)
    for score in report.layers:
        assert score.uuas > 0.9 and score.spearman > 0.8 and score.root_accuracy > 0.8
    random = probe_layers(corpus(0, 150, hidden=False), corpus(1, 40, hidden=False), rank=16, seed=3)
    assert random.layers[0].uuas < 0.5 < report.linear_uuas and random.layers[0].root_accuracy < 0.5

    vectors, tree = test[0]
    drawn = predict(report, 1, vectors[1], tree)
    assert drawn.distances.shape == (len(tree), len(tree)) and drawn.depths.shape == (len(tree),)
    assert len(drawn.edges) == len(tree) - 2  # a spanning tree over the words but the full stop
    assert drawn.root == tree.root


def test_the_same_seed_gives_the_same_numbers_whatever_the_global_generator_holds():
    train, test = corpus(4, 40), corpus(5, 10)
    torch.manual_seed(1)
    first = probe_layers(train, test, rank=8, seed=7, steps=20)
    torch.manual_seed(2)
    again = probe_layers(train, test, rank=8, seed=7, steps=20)
    assert first.layers == again.layers
    np.testing.assert_array_equal(first.distance_probes[0], again.distance_probes[0])
    other = probe_layers(train, test, rank=8, seed=8, steps=20)
    assert not np.array_equal(first.distance_probes[0], other.distance_probes[0])


def test_bad_input_is_refused_with_a_sentence():
    train = corpus(6, 3)
    with pytest.raises(InputError, match="training set is empty"):
        probe_layers([], train)
    with pytest.raises(InputError, match="test set is empty"):
        probe_layers(train, [])
    vectors, tree = train[0]
    with pytest.raises(InputError, match="shape"):
        probe_layers([(vectors[:, :-1], tree)], train)
    with pytest.raises(InputError, match="the first training sentence"):
        probe_layers(train, [(vectors[:, :, :-1], tree)])
    with pytest.raises(InputError, match="not finite"):
        probe_layers([(vectors * np.nan, tree)], train)
    report = probe_layers(train, train, rank=4, steps=2)
    with pytest.raises(InputError, match="no layer 1"):
        predict(report, 1, vectors[0], tree)
    with pytest.raises(InputError, match="shape"):
        predict(report, 0, vectors[0][:, :-1], tree)


def test_a_rerun_on_another_number_of_threads_gives_the_same_probes_bit_for_bit():
    train, test = corpus(6, 200, d=64, layers=2, noise=0.5), corpus(7, 20, d=64, layers=2, noise=0.5)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        first = probe_layers(train, test, rank=32, seed=1, steps=30)
        torch.set_num_threads(2)
        again = probe_layers(train, test, rank=32, seed=1, steps=30)
        assert torch.get_num_threads() == 2  # the probe puts the caller's count back
    finally:
        torch.set_num_threads(before)
    assert first.layers == again.layers
    for a, b in zip(first.distance_probes + first.depth_probes, again.distance_probes + again.depth_probes):
        np.testing.assert_array_equal(a, b)
