"""A linear probe: logistic regression trained on fixed features, the encoder that made them left frozen.

The feature-based approach in miniature (the Lesson's probe step, views/lesson/runs.py): each example is one vector
read from a model, the features are standardized by the training set's statistics, and one linear layer is trained
on them with full-batch Adam. Its first weights are drawn under bert/rng.py's `global_rng`, seeded: the same
features give the same accuracy, whichever thread asks.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from bertviz_lab.bert.rng import global_rng

PROBE_STEPS, PROBE_LR = 300, 0.01  # full-batch Adam on standardized features


def fit_probe(train_x: np.ndarray, train_y: np.ndarray, dev_x: np.ndarray, dev_y: np.ndarray,
              classes: int) -> float:
    """Logistic regression on the features (N, d) with labels (N,) (standardized by the training set's
    statistics); dev accuracy."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    x, dev = (torch.tensor((a - mean) / std, dtype=torch.float32) for a in (train_x, dev_x))
    y = torch.tensor(train_y)
    with global_rng(0):  # its first weights: the only random numbers it draws
        probe = torch.nn.Linear(x.shape[1], classes)
    with torch.enable_grad():
        optimizer = torch.optim.Adam(probe.parameters(), lr=PROBE_LR, weight_decay=1e-3)
        for _ in range(PROBE_STEPS):
            optimizer.zero_grad()
            F.cross_entropy(probe(x), y).backward()
            optimizer.step()
    return float((probe(dev).argmax(-1).numpy() == dev_y).mean())
