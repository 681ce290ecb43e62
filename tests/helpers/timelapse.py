"""A snapshot record made by hand, as a run's history holds it. Moved here from tests/views/timelapse/test_history.py,
which uses them too."""

import numpy as np


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
