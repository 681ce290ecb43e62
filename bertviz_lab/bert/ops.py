"""Faster building blocks with the exact semantics of their torch counterparts.

`Linear` / `linear`: for fp32 inference on CPU with a big weight (2**21 entries or more: BERT-base's
FFN), oneDNN's inner product with the weight packed in its own blocked layout beats the plain GEMM
behind `F.linear` at the small batch sizes of an interactive page; each call pays ~0.1 ms to convert
its input and output, so smaller weights (all of the shipped mini model's) take `F.linear`
(python -m bench.inference). Packing costs a copy, so the packed weight is cached and rebuilt only
when the weight changes (its version counter moves) or moves device. Training, autograd, other
dtypes and other devices take the ordinary path, so nothing else changes.

`Dropout` / `dropout`: on CPU, drawing one Bernoulli sample per element is a
tenth of a training step. Here one 64-bit random draw feeds four elements
(16 random bits each, so p is exact to 1/65536); the mask and scaling are those
of `F.dropout`. Other devices use `F.dropout`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_ONEDNN = torch.backends.mkldnn.is_available()
ROW_BUCKET = 16
# Measured 2026-11-23 on 2 cores, 16-32 rows: oneDNN is 1.5-3.5x slower than F.linear for 256 x 256 to
# 256 x 1024 weights, 1.4x for 768 x 768, and 0.8-0.97x for 768 x 3072 and 3072 x 768.
ONEDNN_MIN_WEIGHT = 2**21


class PackedWeightCache:
    """The oneDNN-packed copy of one (weight, bias) pair, rebuilt when either changes."""

    def __init__(self):
        self.entry = (None, None)  # (key, packed): one attribute, so concurrent readers see a matching pair

    def get(self, weight: torch.Tensor, bias: torch.Tensor | None):
        key = tuple((t.data_ptr(), t._version) for t in (weight, bias) if t is not None)
        cached_key, packed = self.entry
        if key != cached_key:
            packed = (weight.detach().to_mkldnn(), None if bias is None else bias.detach().to_mkldnn())
            self.entry = (key, packed)
        return packed


def use_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """True for fp32 CPU inference: no autograd graph to build, so the packed copy is safe to use."""
    return (_ONEDNN and x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
            and not (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad)))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cache: PackedWeightCache):
    """F.linear(x, weight, bias): the one place that picks oneDNN or plain PyTorch."""
    if weight.numel() >= ONEDNN_MIN_WEIGHT and use_onednn(x, weight):
        return _onednn_linear(x, weight, bias, cache)
    return F.linear(x, weight, bias)  # the plain path: training, autograd, GPU, other dtypes


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cache: PackedWeightCache):
    """The same product as oneDNN's inner product with the cached packed weight: (..., d_in) -> (..., d_out)."""
    packed_w, packed_b = cache.get(weight, bias)
    flat = x.reshape(-1, x.shape[-1])  # (N, d_in)
    rows = flat.shape[0]
    # oneDNN builds (and caches) a kernel per input shape, which costs more than the product
    # itself for a small model; padding the rows to a multiple of ROW_BUCKET keeps the number
    # of shapes an interactive page meets small, so nearly every call finds a cached kernel.
    extra = -rows % ROW_BUCKET
    padded = (F.pad(flat, (0, 0, 0, extra)) if extra else flat.contiguous()).to_mkldnn()
    out = torch._C._nn.mkldnn_linear(padded, packed_w, packed_b).to_dense()[:rows]  # (N, d_out)
    return out.view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state_dict) with the fast CPU inference path."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._packed = PackedWeightCache()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self._packed)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, True)
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), 2**63 - 1)  # 64 random bits each
    bits = words.view(torch.int16)[:n].view(x.shape)  # uniform over [-32768, 32767]
    keep = bits >= round(p * 65536) - 32768  # P(keep) = 1 - p
    return x * (keep * (1.0 / (1.0 - p))).to(x.dtype)


class Dropout(nn.Module):
    """nn.Dropout with the faster CPU sampler."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
