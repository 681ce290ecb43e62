"""The one attention function: scaled dot-product attention with its steps.

Trace path: every intermediate a teaching page shows (q, k, v, the scaled scores
before the mask, the softmax weights before dropout, the per-head context).
Fast path: the same math without keeping anything, either as plain matmuls or
through PyTorch's fused `scaled_dot_product_attention`; which one is faster
depends on the device (see bench/), so the caller picks with `backend`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bertviz_lab.bert.ops import dropout

# Added to scores of keys a query may not see. A large finite negative rather than
# -inf: a fully masked row then gives a uniform softmax instead of NaN (seed 001, 7.3).
MASK_VALUE = -1e9


@dataclass
class AttentionSteps:
    """Every step of one layer's attention, all heads. Shapes use B batch, H heads, T tokens, D head dim."""

    q: torch.Tensor  # (B, H, T, D) queries
    k: torch.Tensor  # (B, H, T, D) keys
    v: torch.Tensor  # (B, H, T, D) values
    scores: torch.Tensor  # (B, H, T, T) q.k / sqrt(D), before the mask
    mask: torch.Tensor  # (B, 1 or H, T, T) additive: 0 where visible, MASK_VALUE where hidden
    weights: torch.Tensor  # (B, H, T, T) softmax(scores + mask), before dropout
    context: torch.Tensor  # (B, H, T, D) weights @ v, after the head mask


def visibility(key_mask: torch.Tensor | None, causal: bool, T: int, device) -> torch.Tensor | None:
    """Boolean (B or 1, 1, T, T) matrix, True where a query may look at a key; None if all visible."""
    visible = None
    if key_mask is not None:
        visible = key_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        lower = torch.ones(T, T, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)
        visible = lower if visible is None else visible & lower
    return visible


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, visible: torch.Tensor | None = None,
              head_mask: torch.Tensor | None = None, dropout_p: float = 0.0, trace: bool = False,
              backend: str = "math") -> tuple[torch.Tensor, AttentionSteps | None]:
    """softmax(q k^T / sqrt(D) + mask) v for q, k, v of shape (B, H, T, D).

    `visible` comes from `visibility`; `head_mask` (H,) of 0/1 switches heads off by
    zeroing their context. Returns the context (B, H, T, D) and, with `trace`, the steps.
    """
    if trace or backend == "math":
        return _math_attention(q, k, v, visible, head_mask, dropout_p, trace)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, dropout_p=dropout_p)
    return _apply_head_mask(context, head_mask), None


def _math_attention(q, k, v, visible, head_mask, dropout_p, trace):
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    mask_value = max(MASK_VALUE, torch.finfo(scores.dtype).min)  # fp16 cannot hold -1e9
    if visible is None:
        masked = scores
    else:
        masked = scores.masked_fill(~visible, mask_value)
    weights = masked.softmax(dim=-1)
    dropped = dropout(weights, dropout_p, training=True)
    context = _apply_head_mask(dropped @ v, head_mask)  # (B, H, T, D)
    if not trace:
        return context, None
    if visible is None:
        additive = torch.zeros_like(scores[:, :1])
    else:
        additive = torch.zeros(visible.shape, dtype=scores.dtype, device=scores.device).masked_fill(~visible, mask_value)
    steps = AttentionSteps(q=q, k=k, v=v, scores=scores, mask=additive, weights=weights, context=context)
    return context, steps


def _apply_head_mask(context: torch.Tensor, head_mask: torch.Tensor | None) -> torch.Tensor:
    if head_mask is None:
        return context
    return context * head_mask.to(context.dtype)[None, :, None, None]
