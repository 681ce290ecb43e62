"""The records' derived numbers: selectivity and compression."""

import numpy as np

from bertviz_lab.probing.records import TASK_NAMES, TASKS, Codelength, LayerFits


def test_selectivity_is_task_accuracy_minus_control_accuracy_per_layer():
    fits = LayerFits("linear", np.array([0.9, 0.95, 0.5]), np.array([0.3, 0.8, 0.6]))
    assert np.allclose(fits.selectivity, [0.6, 0.15, -0.1])


def test_compression_is_the_uniform_code_over_the_online_code():
    code = Codelength(np.array([100.0, 50.0]), np.array([200.0, 400.0]), None, uniform=400.0, examples=100,
                      blocks=(10, 100))
    assert np.allclose(code.compression(code.online), [4.0, 8.0])
    assert np.allclose(code.compression(code.control), [2.0, 1.0])


def test_every_task_has_a_name():
    assert set(TASK_NAMES) == set(TASKS)
