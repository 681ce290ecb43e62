"""Mixed precision: bf16 autocast on a GPU with bf16 units, fp16 (with loss scaling) on an older one; on CPU, bf16
only where this machine runs bf16 matmuls faster.

On CPUs without native bf16 units a bf16 matmul can be ~50x slower than fp32, so
the choice is measured once per process rather than assumed.
"""

from __future__ import annotations

import functools
import time

import torch

from bertviz_lab.bert.device import native_bf16


@functools.lru_cache(maxsize=1)
def cpu_bf16_is_faster() -> bool:
    """Time a training-sized matmul in fp32 and bf16 on this CPU, in turn, best of 5 each: taken in turn, a busy
    moment slows both rather than one (one after the other, two processes on a loaded machine once disagreed).
    A run records what it took (its card's "autocast") and keeps it when resumed (pretrain/loop.py).

    Its random operands come from a private generator: drawing from the global one would shift
    the dropout masks of the first run in a process, so that run would differ from a rerun.
    """
    rng = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 512, generator=rng), torch.randn(512, 512, generator=rng)
    operands = {torch.float32: (a, b), torch.bfloat16: (a.bfloat16(), b.bfloat16())}
    best = dict.fromkeys(operands, float("inf"))
    for _ in range(5):
        for dtype, (x, y) in operands.items():
            start = time.perf_counter()
            for _ in range(4):
                x @ y
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.bfloat16] < 0.8 * best[torch.float32]


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for a run, or None for plain fp32.

    On a GPU "auto" means bf16 where the GPU has bf16 units, else fp16: a V100 or T4 emulates bf16 many times
    slower than its fp16 tensor cores run, and a trainer pairs fp16 with a loss scaler (`loss_scaler`)."""
    if precision == "fp32":
        return None
    if device.type == "cuda":
        return torch.bfloat16 if precision == "bf16" or native_bf16(device) else torch.float16
    if precision == "bf16" or cpu_bf16_is_faster():
        return torch.bfloat16
    return None


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None}  # as a run's card names them


def autocast_name(dtype: torch.dtype | None) -> str:
    """What a run's card and status say of its arithmetic: "bf16" or "fp16" (autocast), or "off" (fp32)."""
    return next(name for name, kind in AUTOCAST_DTYPES.items() if kind == dtype)


def loss_scaler(dtype: torch.dtype | None, device: torch.device) -> torch.amp.GradScaler:
    """The loss scaler fp16 training needs (its gradients underflow without one): on for fp16, a pass-through
    otherwise. Under it a step whose gradients overflowed is skipped and the scale lowered, not a divergence."""
    return torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
