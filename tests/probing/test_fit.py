"""The batched probes (probing/fit.py) on synthetic word vectors with a planted property.

A label fixed by each word's type is written into some dimensions of one hidden state (state 2) and nowhere else:
the linear probe must find it there and only there, the control task (a random label per type, which the vectors do
not carry) must stay near chance, the scalar mix must put its weight and its expected layer at state 2, and the
online code must send the task's labels in fewer bits than the control's. Where each type has its own vector and a
random label, the MLP probe must memorise more of the types than the linear one: it has the capacity (Hewitt & Liang).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.probing.fit import (FIRST_BLOCK, block_ends, expected_layer, fit_layers, online_codelength,
                                     scalar_mix)

pytestmark = pytest.mark.usefixtures("one_thread")

TYPES, CLASSES, STATES, WIDTH, WORDS, PLANTED = 60, 3, 4, 12, 600, 2


def planted(states: tuple[int, ...] = (PLANTED,), seed: int = 0):
    """(vectors (WORDS, STATES, WIDTH), types (WORDS,), task labels, control labels, train mask): each word's type
    fixes its label, which shifts the first CLASSES dimensions of `states` (a class mean plus noise); every other
    dimension, and every other state, is noise that knows neither the type nor the label."""
    rng = np.random.default_rng(seed)
    types = rng.integers(0, TYPES, WORDS)
    task = rng.integers(0, CLASSES, TYPES)[types]
    control = rng.integers(0, CLASSES, TYPES)[types]  # a label per type, drawn independently: the control task
    vectors = rng.normal(size=(WORDS, STATES, WIDTH)).astype(np.float32)
    for s in states:
        vectors[:, s, :CLASSES] += 3.0 * np.eye(CLASSES, dtype=np.float32)[task]
    train = np.arange(WORDS) < WORDS * 3 // 4
    return vectors, types, task, control, train


@pytest.fixture(scope="module")
def data():
    return planted()


def test_the_linear_probe_finds_the_property_where_it_was_planted_and_the_control_stays_near_chance(data):
    vectors, _, task, control, train = data
    accuracy = fit_layers(vectors, np.arange(WORDS), None, np.stack([task, control]), train, CLASSES)
    assert accuracy.shape == (2, STATES)
    others = [s for s in range(STATES) if s != PLANTED]
    assert accuracy[0, PLANTED] > 0.95
    assert (accuracy[0, others] < 0.5).all()  # chance is 1/3: the other states carry nothing of the label
    assert (accuracy[1] < 0.5).all()  # the control's labels are in no vector
    selectivity = accuracy[0] - accuracy[1]
    assert selectivity[PLANTED] > 0.5 and selectivity.argmax() == PLANTED


def test_a_pair_task_reads_both_words(data):
    """The label is planted in the second word of each pair: the probe must read it there (a probe that read only
    the first word would be at chance)."""
    vectors, _, task, _, train = data
    rng = np.random.default_rng(1)
    first = rng.permutation(WORDS)
    accuracy = fit_layers(vectors, first, np.arange(WORDS), task[None], train, CLASSES)
    assert accuracy[0, PLANTED] > 0.95 and accuracy[0, 0] < 0.5


def test_the_mlp_memorises_word_types_a_linear_probe_cannot():
    """Each of 150 types has one fixed random vector in 4 dimensions and a random label of 4: no hyperplanes separate
    them, so the linear probe's test accuracy (new occurrences of the same types) stays low, while the MLP's hidden
    units carve out the types and score far higher."""
    rng = np.random.default_rng(2)
    types = np.tile(np.arange(150), 8)  # every type in both splits
    points = rng.normal(size=(150, 2, 4)).astype(np.float32)
    vectors = points[types] + 0.01 * rng.normal(size=(len(types), 2, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 150)[types][None]
    train = np.arange(len(types)) < 150 * 6
    linear = fit_layers(vectors, np.arange(len(types)), None, labels, train, 4, "linear")
    mlp = fit_layers(vectors, np.arange(len(types)), None, labels, train, 4, "mlp", seed=0)
    assert (mlp[0] > linear[0] + 0.2).all(), (mlp, linear)


def test_the_mlp_is_seeded(data):
    vectors, _, task, control, train = data
    labels = np.stack([task, control])
    runs = [fit_layers(vectors, np.arange(WORDS), None, labels, train, CLASSES, "mlp", seed=s) for s in (0, 0, 1)]
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_the_codelength_of_a_learnable_task_is_shorter_than_its_controls_and_than_uniform(data):
    vectors, _, task, control, train = data
    bits, blocks, uniform = online_codelength(vectors, np.arange(WORDS), None, np.stack([task, control]), train,
                                              CLASSES)
    n = int(train.sum())
    assert bits.shape == (2, STATES)
    assert blocks[-1] == n and blocks[0] >= FIRST_BLOCK and list(blocks) == sorted(set(blocks))
    assert uniform == n * np.log2(CLASSES)
    assert bits[0, PLANTED] < bits[1, PLANTED] and bits[0, PLANTED] < 0.5 * uniform
    assert bits[0, PLANTED] == bits[0].min()
    assert (bits >= blocks[0] * np.log2(CLASSES)).all()  # the first block alone costs that much


def test_the_blocks_start_with_enough_examples_and_end_at_every_example():
    assert block_ends(640) == (10, 20, 40, 80, 160, 320, 640)
    assert block_ends(100) == (10, 12, 25, 50, 100)
    assert block_ends(12) == (10, 12)


def test_the_scalar_mix_weighs_the_state_that_holds_the_property(data):
    vectors, _, task, _, train = data
    mix = scalar_mix(vectors, np.arange(WORDS), None, task, train, CLASSES)
    assert mix.weights.shape == mix.cumulative.shape == (STATES,)
    assert abs(mix.weights.sum() - 1) < 1e-6 and mix.weights.argmax() == PLANTED
    assert mix.cumulative[PLANTED] > 0.95 and mix.cumulative[PLANTED - 1] < 0.5
    assert mix.expected_layer is not None and abs(mix.expected_layer - PLANTED) < 0.3
    assert abs(mix.centre - PLANTED) < 0.5


def test_a_property_in_every_state_gains_nothing_beyond_state_0():
    """Every state a copy of state 0, which holds the property: no mix can gain on state 0 alone."""
    vectors, _, task, _, train = planted((0,))
    vectors[:, 1:] = vectors[:, :1]
    mix = scalar_mix(vectors, np.arange(WORDS), None, task, train, CLASSES)
    assert mix.cumulative[0] > 0.95
    assert mix.expected_layer is None
    vectors, _, task, _, train = planted((1,))
    vectors[:, 2:] = vectors[:, 1:2]  # from state 1 on, the same vectors
    assert abs(scalar_mix(vectors, np.arange(WORDS), None, task, train, CLASSES).expected_layer - 1) < 0.3


def test_the_expected_layer_formula():
    assert expected_layer(np.array([0.5, 0.7, 0.9, 0.9])) == pytest.approx((1 * 0.2 + 2 * 0.2) / 0.4)
    assert expected_layer(np.array([0.9, 0.902, 0.903])) is None  # gains under NOTHING_GAINED
    assert expected_layer(np.array([0.9, 0.92, 0.92]), tested=100) is None  # under two standard errors of 100 tests
    assert expected_layer(np.array([0.9, 0.92, 0.92]), tested=10_000) == 1.0


def test_fits_are_bit_for_bit_the_same_whatever_the_callers_threads(data):
    vectors, _, task, control, train = data
    labels = np.stack([task, control])
    once = fit_layers(vectors, np.arange(WORDS), None, labels, train, CLASSES)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        again = fit_layers(vectors, np.arange(WORDS), None, labels, train, CLASSES)
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(once, again)


def test_bad_inputs_are_one_sentence(data):
    vectors, _, task, _, train = data
    with pytest.raises(InputError, match="no probe"):
        fit_layers(vectors, np.arange(WORDS), None, task[None], train, CLASSES, "forest")
    with pytest.raises(InputError, match="splits is empty"):
        fit_layers(vectors, np.arange(WORDS), None, task[None], np.ones(WORDS, bool), CLASSES)
    with pytest.raises(InputError, match="lengths differ"):
        fit_layers(vectors, np.arange(WORDS), None, task[None, :10], train, CLASSES)
