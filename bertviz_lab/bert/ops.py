"""Faster building blocks with the exact semantics of their torch counterparts: the kernels fast.py runs
the model's layers through, and `Linear` / `Dropout`, modules that use them (the fine-tuning classifier's).

`Linear` / `linear` / `fused_linear`: on CPU in fp32, oneDNN's matmul beats the MKL GEMM behind
`F.linear` on this project's machines (AMD EPYC, 2 cores): 5-45% less time at the 32-128 rows of a
page, about 10% at the 4096 rows of a training batch (python -m bench.inference, bench.train_throughput).
Both paths call it through `torch.ops.mkldnn._linear_pointwise`, which takes and returns ordinary tensors:
- inference (no autograd graph): the weight is packed once into oneDNN's blocked layout and cached,
  rebuilt only when the weight changes (its version counter moves); a weight under 2**17 entries
  (256 x 256) stays with `F.linear`, faster there at 16-32 rows. The packed copy costs memory: one more
  copy of each big weight while a model serves pages.
- training: `_OneDnnLinear`, an autograd function whose forward and input gradient are oneDNN
  matmuls and whose weight gradient is torch's (MKL was as fast or faster there).
Other dtypes, autocast, other devices and builds without oneDNN take `F.linear`, so nothing else changes.
`fused_linear` runs several linears on one input as one matmul (self-attention's query, key and value).
`adamw`: the fused optimizer, which must tell the packed copies when it writes the weights.

`Dropout` / `dropout`: on CPU, drawing one Bernoulli sample per element is a
tenth of a training step. Here one 64-bit random draw feeds four elements
(16 random bits each, so p is exact to 1/65536), and the mask is made by integer
arithmetic, not comparison; the mask and scaling are those of `F.dropout`.
Other devices use `F.dropout`.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

_ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
ROW_BUCKET = 16
# Packed oneDNN against F.linear at a page's 32-128 rows: slower for 256 x 256, faster from 256 x 768 up (the MLM
# decoders included); at training's 4096 rows, faster from 256 x 256 up (forward and input gradient). Figures in
# docs/benchmarks.md, "Inference and training against transformers".
ONEDNN_MIN_WEIGHT = 2**17
ONEDNN_MIN_TRAIN_WEIGHT = 2**16
PACK_ROWS = 128  # the row count oneDNN packs for; 16-128 rows all run well with it, 1 does not


def _matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight.T + bias by oneDNN; weight dense (d_out, d_in), any strides, or packed."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def packed_caches(model) -> dict[int, PackedWeightCache]:
    """Every PackedWeightCache a model's modules hold, by id: a `copy.deepcopy` memo that makes a copy share them
    (a packed oneDNN tensor cannot be copied, and a copy that shares the weights should share their packing too)."""
    return {id(v): v for module in model.modules() for v in vars(module).values() if isinstance(v, PackedWeightCache)}


def twin(model: nn.Module) -> nn.Module:
    """`model` in eval mode as a new object sharing every parameter, buffer and packed weight, on the textbook path
    (`fast` off: every module is called, so forward hooks fire). Hooks added to it touch no one else: activation
    patching (explain/patching.py) and the feed-forward neurons (neurons/read.py) hook their twin."""
    memo = {id(t): t for t in (*model.parameters(), *model.buffers())}
    memo.update(packed_caches(model))  # the fast path's packed weights: shared, not copied
    copied = copy.deepcopy(model, memo).eval()
    copied.fast = False
    return copied


class PackedWeightCache:
    """The oneDNN-packed copy of one weight, or of several stacked along d_out, with their bias;
    rebuilt when any of them changes. A change is seen by the tensors' version counters, which
    every in-place op moves except a fused optimizer's step: whoever steps one calls `forget_packed`."""

    def __init__(self):
        self.entry = (None, None)  # (key, packed): one attribute, so concurrent readers see a matching pair

    def get(self, weights: tuple[torch.Tensor, ...], biases: tuple[torch.Tensor, ...] | None):
        """(packed weight, bias or None) for torch.cat(weights) and torch.cat(biases)."""
        key = tuple((t.data_ptr(), t._version) for t in (*weights, *(biases or ())))
        cached_key, packed = self.entry
        if key != cached_key:
            weight = torch.cat(weights) if len(weights) > 1 else weights[0]
            bias = None if biases is None else torch.cat(biases).detach() if len(biases) > 1 else biases[0].detach()
            packed = (torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), PACK_ROWS), bias)
            self.entry = (key, packed)
        return packed


def forget_packed(module: nn.Module) -> None:
    """Drop the packed copies cached in `module` and its children (after a write that moves no version
    counter, like `torch.optim.AdamW(fused=True).step()`); the next inference forward packs again."""
    for child in module.modules():
        for cache in vars(child).values():
            if isinstance(cache, PackedWeightCache):
                cache.entry = (None, None)


def adamw(model: nn.Module, param_groups: list[dict], **settings) -> torch.optim.AdamW:
    """torch.optim.AdamW over `param_groups` of `model`, fused on CPU and CUDA: one kernel for every parameter
    (bench.train_throughput's 4 x 256 model on 2 cores: 3-4 ms a step, the default for-loop 9-10 ms). A fused
    step writes the weights without moving their version counters, so after each one the packed copies the
    model caches are dropped."""
    fused = next(model.parameters()).device.type in ("cpu", "cuda")
    optimizer = torch.optim.AdamW(param_groups, fused=fused, **settings)
    if fused:
        optimizer.register_step_post_hook(lambda *_: forget_packed(model))
    return optimizer


def _fp32_cpu(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (_ONEDNN and x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu"))


def _builds_graph(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cache: PackedWeightCache):
    """F.linear(x, weight, bias): the one place that picks oneDNN or plain PyTorch."""
    if _fp32_cpu(x, weight):
        if not _builds_graph(x, weight):
            if weight.numel() >= ONEDNN_MIN_WEIGHT:
                return _packed_linear(x, *cache.get((weight,), None if bias is None else (bias,)))
        elif weight.numel() >= ONEDNN_MIN_TRAIN_WEIGHT:
            return _OneDnnLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)  # the plain path: small weights, GPU, other dtypes, autocast


def fused_linear(x: torch.Tensor, weights: tuple[torch.Tensor, ...], biases: tuple[torch.Tensor, ...],
                 cache: PackedWeightCache) -> torch.Tensor:
    """torch.cat([F.linear(x, w, b) for w, b in zip(weights, biases)], -1) as one matmul: (..., sum of d_out)."""
    if (_fp32_cpu(x, weights[0]) and not _builds_graph(x, weights[0])
            and sum(w.numel() for w in weights) >= ONEDNN_MIN_WEIGHT):
        return _packed_linear(x, *cache.get(weights, biases))  # the stacked weight itself is never kept
    return linear(x, torch.cat(weights), torch.cat(biases), cache)  # autograd splits the gradient back


def _packed_linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None):
    """x @ W.T + b with the cached packed W: (..., d_in) -> (..., d_out)."""
    flat = x.reshape(-1, x.shape[-1])  # (N, d_in)
    rows = flat.shape[0]
    # oneDNN builds (and caches) a kernel per input shape, which costs about as much as a small
    # model's product; padding the rows to a multiple of ROW_BUCKET keeps the number of shapes
    # an interactive page meets small, so nearly every call finds a cached kernel.
    extra = -rows % ROW_BUCKET
    padded = F.pad(flat, (0, 0, 0, extra)) if extra else flat.contiguous()
    out = _matmul(padded, packed, bias)  # (N + extra, d_out)
    return (out[:rows] if extra else out).view(*x.shape[:-1], out.shape[-1])


class _OneDnnLinear(torch.autograd.Function):
    """F.linear for training: oneDNN computes x W^T + b and the input gradient g W, MKL the weight's g^T x."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).contiguous()  # (N, d_in)
        ctx.save_for_backward(flat, weight)
        ctx.x_shape, ctx.has_bias = x.shape, bias is not None
        return _matmul(flat, weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor):
        flat, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (N, d_out)
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_x = _matmul(g, weight.t(), None).view(ctx.x_shape) if need_x else None  # (..., d_in)
        grad_w = g.t() @ flat if need_w else None  # (d_out, d_in)
        grad_b = g.sum(0) if need_b and ctx.has_bias else None
        return grad_x, grad_w, grad_b


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state_dict) with the fast CPU paths."""

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
    # keep where bits >= low: P(drop) = p, rounded to a multiple of 2**-16 within [2**-16, 1 - 2**-16]
    low = min(max(round(p * 65536) - 32768, -32767), 32767)
    # clamped to [low - 1, low], less low - 1: 0 (drop) or 1 (keep), in int16 arithmetic that cannot
    # overflow; a boolean mask (bits >= low) costs three times as much to make and to convert. The
    # subtraction stays in int16: in bf16 or fp16, low - 1 and low round to one number (for p = 0.1 both
    # are -26240) and every element would be dropped.
    keep = bits.clamp(low - 1, low).sub_(low - 1).to(x.dtype)
    # the scale as a Python number: multiplied in fp32 inside the kernel, where a bf16 1 / 0.9 is 1.109
    return torch.mul(x, keep).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    """nn.Dropout with the faster CPU sampler."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
