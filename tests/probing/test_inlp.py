"""Iterative nullspace projection (probing/inlp.py) on synthetic vectors with two planted properties: A (two classes,
read along two directions) and B (three classes, along two directions orthogonal to A's, independent of A). INLP on A must leave
a fresh linear probe for A at chance and one for B as good as before; the bases must be orthonormal."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from bertviz_lab.errors import InputError
from bertviz_lab.probing.inlp import REGULARISATION, STEPS, fresh_accuracy, inlp, majority_rate, project, random_basis

N, D, TRAIN = 1200, 24, 900
MARGIN = 0.03


@pytest.fixture(scope="module")
def planted():
    rng = np.random.Generator(np.random.PCG64(0))
    a, b = rng.integers(0, 2, N), rng.integers(0, 3, N)
    x = rng.standard_normal((N, D))
    x[:, 0] += 2.0 * (2 * a - 1)
    x[:, 1] += 0.8 * (2 * a - 1)
    x[:, 5] += 1.5 * b
    x[:, 6] -= 1.5 * (b == 1)
    x[:, 10:] *= rng.uniform(0.3, 6.0, D - 10)  # noise of many sizes, away from A and B: they stay orthogonal
    turn, _ = np.linalg.qr(rng.standard_normal((D, D)))  # turned, so no property sits on a coordinate axis and
    return x @ turn, a, b  # the coordinates' spreads differ (raw vectors are not standardised ones)


def split(x, y):
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def orthonormal(basis: np.ndarray) -> bool:
    return np.allclose(basis.T @ basis, np.eye(basis.shape[1]), atol=1e-10)


def test_inlp_removes_the_planted_property_and_keeps_the_orthogonal_one(planted):
    x, a, b = planted
    removal = inlp(*split(x, a), classes=2)
    assert removal.before > 0.95 and removal.majority < 0.55  # A was there to remove
    assert removal.rank == removal.iterations >= 1  # two classes: one direction a round
    assert removal.basis.shape == (D, removal.rank) and orthonormal(removal.basis)
    assert removal.after <= removal.majority + MARGIN
    assert removal.accuracies[0] == removal.before and removal.accuracies[-1] == removal.after
    # a fresh probe on the projected vectors, fitted here, agrees: A is no longer linearly readable
    assert fresh_accuracy(*split(x, a), basis=removal.basis) <= removal.majority + MARGIN
    b_before, b_after = fresh_accuracy(*split(x, b)), fresh_accuracy(*split(x, b), basis=removal.basis)
    assert b_before > majority_rate(b[:TRAIN], b[TRAIN:]) + 0.2  # B is readable ...
    assert b_after >= b_before - MARGIN  # ... and stays so


def test_the_removed_direction_is_the_first_probes_own_in_raw_coordinates(planted):
    """A probe fitted here on the standardised vectors reads the raw vector x through coef / std: that row lies in
    the basis (so projected vectors give it one logit), where the standardised row coef itself does not."""
    x, a, _ = planted
    removal = inlp(*split(x, a), classes=2, max_iterations=1)
    assert removal.rank == 1
    mean, std = x[:TRAIN].mean(0), x[:TRAIN].std(0)
    probe = LogisticRegression(C=REGULARISATION, max_iter=STEPS).fit((x[:TRAIN] - mean) / std, a[:TRAIN])
    raw, standardised = probe.coef_[0] / std, probe.coef_[0]

    def outside(w):  # the share of w outside the basis
        return np.linalg.norm(w - removal.basis @ (removal.basis.T @ w)) / np.linalg.norm(w)

    assert outside(raw) < 1e-6 and outside(standardised) > 0.1
    logits = project(x, removal.basis) @ raw
    assert np.ptp(logits) < 1e-9 * np.ptp(x @ raw)


def test_a_pair_task_removes_both_words_directions_from_every_word(planted):
    x, a, _ = planted
    rng = np.random.Generator(np.random.PCG64(1))
    pairs = np.stack([rng.standard_normal((N, D)), x], axis=1)  # (N, 2, D): the property is in the second word
    removal = inlp(*split(pairs, a), classes=2)
    assert removal.basis.shape[0] == D and orthonormal(removal.basis)
    assert removal.after <= removal.majority + MARGIN
    assert fresh_accuracy(*split(pairs[:, ::-1], a), basis=removal.basis) <= removal.majority + MARGIN  # either slot


def test_the_random_basis_is_orthonormal_of_the_asked_rank_and_seeded():
    first = random_basis(D, 5, np.random.Generator(np.random.PCG64(3)))
    again = random_basis(D, 5, np.random.Generator(np.random.PCG64(3)))
    other = random_basis(D, 5, np.random.Generator(np.random.PCG64(4)))
    assert first.shape == (D, 5) and orthonormal(first)
    assert np.array_equal(first, again) and not np.allclose(first, other)
    assert random_basis(D, 0, np.random.Generator(np.random.PCG64(0))).shape == (D, 0)
    with pytest.raises(InputError, match="rank 0 to 24"):
        random_basis(D, D + 1, np.random.Generator(np.random.PCG64(0)))


def test_the_whole_space_removed_leaves_exactly_nothing(planted):
    x, a, _ = planted
    whole = random_basis(D, D, np.random.Generator(np.random.PCG64(0)))
    assert not project(x, whole).any()
    assert fresh_accuracy(*split(x, a), basis=whole) == majority_rate(a[:TRAIN], a[TRAIN:])


def test_bad_inputs_are_one_sentence(planted):
    x, a, _ = planted
    with pytest.raises(InputError, match="labels must be 0 to 1"):
        inlp(x[:10], a[:10] + 1, x[10:20], a[10:20], classes=2)
    with pytest.raises(InputError, match="match in shape"):
        inlp(x[:10], a[:9], x[10:20], a[10:20], classes=2)
    with pytest.raises(InputError, match="at least two"):
        inlp(x[:10], np.zeros(10, dtype=int), x[10:20], a[10:20], classes=2)
    with pytest.raises(InputError, match="max_iterations"):
        inlp(*split(x, a), classes=2, max_iterations=-1)


def test_max_rank_stops_the_removal_there_and_the_record_says_what_is_left(planted):
    x, _, b = planted  # B (three classes) takes two directions a round; stopped at one, some of B is left
    removal = inlp(*split(x, b), classes=3, max_rank=1)
    assert removal.rank == 1 and orthonormal(removal.basis)
    assert removal.after > removal.majority + MARGIN  # the record says how much a fresh probe still reads
    assert removal.after == fresh_accuracy(*split(x, b), basis=removal.basis)
    with pytest.raises(InputError, match="max_rank"):
        inlp(*split(x, b), classes=3, max_rank=0)
