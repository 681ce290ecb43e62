"""factors.py: planted non-negative low-rank activations are recovered (strengths equal up to order and scale),
negative activations are clipped and counted, the same input gives the same factors, and bad input is one
sentence."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.neurons.factors import MAX_FACTORS, Factors, factorise

T, N, K = 14, 40, 3


def planted(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A (T, N), S (T, K), L (K, N)), A = S L exactly: each factor peaks on its own tokens and loads on its own
    block of neurons, with
    an anchor token and an anchor neuron for each (separable: the factors are unique up to order and scale)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0, 0.1, (T, K))
    loadings = rng.uniform(0, 0.05, (K, N))
    for f in range(K):
        s[f * 4: f * 4 + 4, f] += rng.uniform(1, 2, 4)
        s[f * 4, np.arange(K) != f] = 0  # an anchor token showing factor f alone, and an anchor neuron
        loadings[f, f * 10: f * 10 + 10] += rng.uniform(0.5, 1.5, 10)
        loadings[np.arange(K) != f, f * 10] = 0
    return s @ loadings, s, loadings


def unit_columns(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=0, keepdims=True)


def test_planted_factors_are_recovered():
    a, s, loadings = planted()
    out = factorise(a, K)
    assert out.strengths.shape == (T, K) and out.loadings.shape == (K, N)
    assert out.error < 1e-3 and out.clipped == 0.0
    assert (out.strengths >= 0).all() and (out.loadings >= 0).all()
    np.testing.assert_allclose(out.error, np.linalg.norm(a - out.strengths @ out.loadings) / np.linalg.norm(a))
    # order: by the token each peaks on, so planted factor f (peaking on tokens 4f..4f+3) comes f-th
    assert [int(out.strengths[:, f].argmax()) // 4 for f in range(K)] == [0, 1, 2]
    cosine = unit_columns(out.strengths).T @ unit_columns(s)  # (K, K): found against planted
    np.testing.assert_allclose(np.diag(cosine), 1, atol=1e-5)  # measured 1 - 1.6e-7
    assert out.top_neurons(1, k=10) and set(out.top_neurons(1, k=10)) == set(range(10, 20))
    np.testing.assert_allclose(np.diag(unit_columns(out.loadings.T).T @ unit_columns(loadings.T)), 1, atol=1e-5)


def test_fewer_factors_leave_more_unexplained():
    a, _, _ = planted()
    errors = [factorise(a, k).error for k in (1, 2, 3)]
    assert errors[0] > errors[1] > errors[2] and errors[1] > 0.05


def test_negative_activations_are_clipped_and_counted():
    a, _, _ = planted()
    rng = np.random.default_rng(1)
    gelu_dip = np.where(rng.random(a.shape) < 0.3, -rng.uniform(0, 0.17, a.shape), 0.0)  # GELU's floor: -0.17
    noisy = a + gelu_dip
    by_hand = -noisy[noisy < 0].sum() / np.abs(noisy).sum()
    out = factorise(noisy, K)
    assert by_hand > 0.005
    assert out.clipped == pytest.approx(by_hand, rel=1e-12)
    np.testing.assert_allclose(out.error, np.linalg.norm(np.clip(noisy, 0, None) - out.strengths @ out.loadings)
                               / np.linalg.norm(np.clip(noisy, 0, None)))  # the error of the clipped activations


def test_the_same_input_gives_the_same_factors():
    a = np.abs(np.random.default_rng(2).normal(size=(9, 30)))
    first, again = factorise(a, 4), factorise(a.copy(), 4)
    assert np.array_equal(first.strengths, again.strengths) and np.array_equal(first.loadings, again.loadings)
    assert first.error == again.error


def test_factors_are_capped_at_the_tokens():
    a = np.abs(np.random.default_rng(3).normal(size=(3, 20)))
    out = factorise(a, 5)
    assert out.strengths.shape == (3, 3) and out.loadings.shape == (3, 20)


def test_all_zero_activations_have_zero_factors():
    out = factorise(-np.ones((4, 6)), 2)  # every entry clipped: nothing left to factorise
    assert isinstance(out, Factors) and out.clipped == 1.0 and out.error == 0.0
    assert not out.strengths.any() and out.strengths.shape == (4, 2) and out.loadings.shape == (2, 6)


@pytest.mark.parametrize("activations, factors, words", [
    (np.ones((1, 8)), 2, "at least two tokens and two neurons"),
    (np.ones((5, 1)), 2, "at least two tokens and two neurons"),
    (np.ones(8), 2, "at least two tokens and two neurons"),
    (np.ones((5, 8)), 0, "a whole number from 1 to 10, got 0"),
    (np.ones((5, 8)), MAX_FACTORS + 1, "a whole number from 1 to 10, got 11"),
    (np.ones((5, 8)), True, "got True"),
    (np.ones((5, 8)), 2.0, "got 2.0"),
    (np.full((5, 8), np.nan), 2, "not all finite numbers"),
    (np.full((5, 8), np.inf), 2, "not all finite numbers"),
])
def test_bad_input_is_one_sentence(activations, factors, words):
    with pytest.raises(InputError, match=words.replace(".", r"\.")):
        factorise(activations, factors)
