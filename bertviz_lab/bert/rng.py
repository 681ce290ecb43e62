"""torch's global random generators (the CPU's and each GPU's), held by one thread at a time.

The generator is one for the whole process: every app thread that seeds it and draws from it (a random model on
the Shapes tab, the Lesson's tiny run and linear probe, the Fine-tune page's model before training) does so inside
`global_rng`, so what it draws is a pure function of its seed and nobody else's draws change it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_GLOBAL_RNG = threading.Lock()


@contextmanager
def global_rng(seed: int | None = None) -> Iterator[None]:
    """torch's global generator for this thread alone while the block runs (seeded with `seed` if given), and put
    back as it was afterwards: what the block draws is a pure function of the seed, and nobody else's changes."""
    # torch.manual_seed seeds every GPU's generator too (a Trainer built in the block calls it): those are put back
    # as well, or the block would reseed the dropout of whatever else runs on a GPU in this process. Only once this
    # process uses CUDA: forking a GPU's generator opens a CUDA context on it, for work that may be all on the CPU
    # (before that, torch keeps the seed and applies it when CUDA starts, before anything has drawn there).
    gpus = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
    with _GLOBAL_RNG, torch.random.fork_rng(devices=gpus):
        if seed is not None:
            torch.manual_seed(seed)
        yield
