"""finetune/linear_probe.py: logistic regression on fixed features learns a separable label, not random labels,
and gives the same accuracy whatever torch's global generator holds."""

from __future__ import annotations

import numpy as np
import torch

from bertviz_lab.finetune.linear_probe import fit_probe


def test_a_linear_probe_learns_separable_features_and_not_random_labels():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 16))
    y = (x[:, 3] > 0).astype(int)
    assert fit_probe(x[:200], y[:200], x[200:], y[200:], 2) >= 0.8
    noise = rng.integers(0, 2, 300)
    assert fit_probe(x[:200], noise[:200], x[200:], noise[200:], 2) < 0.65


def test_the_probe_is_a_pure_function_of_its_features_and_leaves_the_generator_alone():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 8))
    y = (x[:, 0] + 0.8 * rng.normal(size=120) > 0).astype(int)  # a noisy label: the first weights matter
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = fit_probe(x[:80], y[:80], x[80:], y[80:], 2)
    assert torch.equal(torch.get_rng_state(), state)  # its draws came from a fork of the global generator
    torch.randn(1000)  # another draw moves the global generator on
    assert fit_probe(x[:80], y[:80], x[80:], y[80:], 2) == first
