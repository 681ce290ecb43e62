"""A snapshot record made by hand, as a run's history holds it (moved here from tests/views/timelapse/test_history.py,
which uses them too), and a tiny finished run that keeps its checkpoints, for the Time-lapse page's tests."""

import numpy as np

from bertviz_lab.pretrain import process
from bertviz_lab.pretrain.config import TrainConfig


TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]


def raw(step, previous, attention=None, xy=None, top=(("mat", 0.5),), text="the cat sat on the mat ."):
    """A snapshot record of a 1-layer, 2-head model on one sentence."""
    eye = np.eye(5)
    attention = np.stack([eye, eye])[None] if attention is None else attention  # (1, 2, 5, 5)
    xy = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0], [0.0, -2.0]]) if xy is None else xy
    record = {"kind": "snapshot", "step": step, "layers": 1, "heads": 2,
              "probes": [{"text": text, "tokens": TOKENS, "attention": attention.tolist(),
                          "masked": "mat", "top": [list(t) for t in top]}],
              "roles": {"previous": [previous], "self": [[1.0, 1.0]]},
              "words": {"words": list("abcd"), "groups": ["x", "x", "y", "y"], "xy": xy.tolist(), "explained": 0.9}}
    return record


# A tiny run that keeps its checkpoints (0 1 2 5 10 20 50 100): seconds on one core.
TINY_RUN = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=100, lr=5e-3, warmup=3,
                eval_every=10, eval_batches=1, checkpoint_every=50, device="cpu", threads=1)


def tiny_run(root, name: str = "lapse"):
    """A finished 100-step run in root/name with its snapshots and its kept checkpoints; its folder."""
    assert process.execute(root / name, TrainConfig(**TINY_RUN), resume=False, command=["train"]) == 0
    return root / name
