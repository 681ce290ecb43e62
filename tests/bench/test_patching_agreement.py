"""bench/patching_agreement.py, the measurement behind the guide's finding, on a few pairs: its ratio-of-sums shares
hold the invariants patching must (at the embeddings only the subject differs between the runs, so patching it
restores the whole gap; at the last layer only the [MASK]'s output is read, so patching it does)."""

from __future__ import annotations

import numpy as np

from bench.patching_agreement import measure, pairs_with


def test_pairs_flip_only_the_subject():
    for clean, corrupt, right, wrong in pairs_with(2, 3):
        differs = [i for i, (a, b) in enumerate(zip(clean.split(), corrupt.split())) if a != b]
        assert differs == [1] and right != wrong


def test_shares_hold_the_end_invariants(shipped):
    r = measure(shipped.model, shipped.tokenizer, 1, 3)
    assert r["used"] == 3 and r["gap"] > 0
    assert np.isclose(r["subject"][0], 1.0, atol=1e-4) and np.isclose(r["mask"][0], 0.0, atol=1e-4)
    assert np.isclose(r["mask"][-1], 1.0, atol=1e-4) and np.isclose(r["subject"][-1], 0.0, atol=1e-4)
