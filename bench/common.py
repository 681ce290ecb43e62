"""Shared benchmark plumbing: thread pinning, median timing, and a transformers twin of our model."""

from __future__ import annotations

import os
import statistics
import time

import torch

from bertviz_lab.bert.config import BertConfig


def pin_threads(n: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    torch.set_num_threads(n)


def hf_twin(model, attn_implementation: str = "eager"):
    """A transformers BertForPreTraining holding exactly our model's weights."""
    import transformers

    cfg: BertConfig = model.config
    hf = transformers.BertForPreTraining(transformers.BertConfig(**cfg.to_dict(),
                                                                 attn_implementation=attn_implementation))
    missing, _ = hf.load_state_dict(model.state_dict(), strict=False)
    assert all("decoder" in k for k in missing), missing  # the decoder is tied to the embeddings
    hf.tie_weights()
    return hf


def median_ms(fns: dict, rounds: int, warmup: int = 3) -> dict[str, float]:
    """Median wall time in ms of each callable; rounds interleave them so machine noise hits both."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}
