"""torch's global random generator, held by one thread at a time.

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
    with _GLOBAL_RNG, torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        yield
