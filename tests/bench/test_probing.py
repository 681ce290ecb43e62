"""bench/probing.py's references, on small inputs: transformers' hidden states pooled per word are our reading, and
scikit-learn's per-state logistic regression, on the same standardised examples and objective, finds what our batched
probe finds (a planted property at one hidden state, nothing at the other)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.common import hf_twin
from bench.probing import hf_features, ours_accuracies, sklearn_accuracies, standardised
from bertviz_lab.probing.features import read_features
from bertviz_lab.probing.records import Examples
from bertviz_lab.syntax.report import story_corpus

pytestmark = pytest.mark.usefixtures("one_thread")


def planted(n: int = 240, d: int = 8, seed: int = 0) -> tuple[np.ndarray, Examples]:
    """(vectors (n, 2, d), examples): hidden state 1 holds the label along one direction, hidden state 0 noise only."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    vectors = rng.normal(size=(n, 2, d)).astype(np.float32)
    vectors[:, 1, 0] += 4.0 * labels  # three well-separated bands along dimension 0
    train = np.arange(n) < n * 3 // 4
    return vectors, Examples("pos", ("a", "b", "c"), labels.astype(np.int64), tuple(f"w{i}" for i in range(n)),
                             np.arange(n), None, train, tuple(f"w{i}" for i in range(n)))


def test_standardised_centres_and_scales_each_state_by_its_training_words():
    vectors, ex = planted()
    z = standardised(vectors, ex)  # (S, N, d)
    assert z.shape == (2, 240, 8)
    np.testing.assert_allclose(z[:, ex.train].mean(1), 0, atol=1e-9)
    np.testing.assert_allclose(z[:, ex.train].std(1, ddof=1), 1, atol=1e-9)


def test_sklearn_and_ours_find_the_planted_property_alike():
    vectors, ex = planted()
    theirs, ours = sklearn_accuracies(vectors, ex), ours_accuracies(vectors, ex)
    assert theirs[1] > 0.95 and ours[1] > 0.95  # the planted state
    assert theirs[0] < 0.6 and ours[0] < 0.6  # noise: near a third, well short of the planted state
    assert np.abs(theirs - ours).max() <= 0.05


def test_transformers_hidden_states_pooled_per_word_are_our_reading(shipped):
    trees = story_corpus(12).trees
    ours = read_features(shipped.model, shipped.tokenizer, trees)
    theirs = hf_features(hf_twin(shipped.model).eval(), shipped.tokenizer, trees, batch_size=5)
    np.testing.assert_array_equal(theirs.start, ours.start)
    np.testing.assert_allclose(theirs.vectors, ours.vectors, atol=1e-4)
