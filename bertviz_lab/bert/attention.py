"""The one attention function: scaled dot-product attention with its steps.

Trace path: every intermediate a teaching page shows (q, k, v, the scaled scores
before the mask, the softmax weights before dropout, the per-head context).
Fast path: the same math without keeping anything, either as plain matmuls or
through PyTorch's fused `scaled_dot_product_attention`; which one is faster
depends on the device (see bench/), so the caller picks with `options.backend`.
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


@dataclass(frozen=True)
class AttentionOptions:
    """How to run attention: built once by the model's forward, handed unchanged to every layer
    (only `head_mask` differs per layer, set with `dataclasses.replace`)."""

    visible: torch.Tensor | None = None  # bool (B or 1, 1, 1 or T, T) from `visibility`; None: all visible
    head_mask: torch.Tensor | None = None  # (H,) of 0/1, this layer's row; None: every head on
    trace: bool = False  # keep every step (AttentionSteps); always takes the math path
    backend: str = "math"  # untraced path: "math" (plain matmuls) or "sdpa" (fused kernel)
    dropout_p: float = 0.0  # dropout on the weights; 0 outside training


@dataclass
class AttentionSteps:
    """Every step of one layer's attention, all heads. Shapes use B batch, H heads, T tokens, D head dim."""

    q: torch.Tensor  # (B, H, T, D) queries
    k: torch.Tensor  # (B, H, T, D) keys
    v: torch.Tensor  # (B, H, T, D) values
    scores: torch.Tensor  # (B, H, T, T) q.k / sqrt(D), before the mask
    # (B or 1, 1, 1 or T, T) additive, one for all heads (and, for a padding mask alone, all queries),
    # broadcast against scores: 0 where visible, MASK_VALUE where hidden
    mask: torch.Tensor
    weights: torch.Tensor  # (B, H, T, T) softmax(scores + mask), before dropout
    context: torch.Tensor  # (B, H, T, D) weights @ v, after the head mask


def visibility(key_mask: torch.Tensor | None, causal: bool, T: int, device) -> torch.Tensor | None:
    """Boolean, True where a query may look at a key; None if all visible.

    (B, 1, 1, T) for a padding mask alone, (1, 1, T, T) for causal alone, (B, 1, T, T) for
    both: it broadcasts over heads (and queries) against scores of shape (B, H, T, T).
    """
    visible = None
    if key_mask is not None:
        visible = key_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        lower = torch.ones(T, T, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, T, T)
        visible = lower if visible is None else visible & lower
    return visible


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
    """softmax(q k^T / sqrt(D) + mask) v for q, k, v of shape (B, H, T, D); untraced, q may hold fewer
    rows than k and v (a sparse last layer's queries), with `options.visible` shaped to match.

    Returns the context (B, H, T, D) (q's rows) and, with `options.trace`, the steps (else None).
    """
    if options.trace or options.backend == "math":
        return _math_attention(q, k, v, options)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=options.visible, dropout_p=options.dropout_p)
    return _apply_head_mask(context, options.head_mask), None


def _math_attention(q, k, v, options: AttentionOptions):
    # q scaled before the product: a pass over (B, H, T, D) instead of (B, H, T, T), and exact for
    # D a power of 4 (1/sqrt(64) = 1/8); the scaled copy is contiguous, as the product wants it anyway
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)  # (B, H, T, T)
    visible, additive = options.visible, None
    masked = scores
    if visible is not None:
        # scores * 1 + 0 where visible, scores * 0 + MASK_VALUE where hidden: masked_fill's exact values
        # (so a fully hidden row stays uniform) in one fused pass, five times faster than masked_fill on the CPU
        additive = additive_mask(visible, scores.dtype)
        masked = torch.addcmul(additive, scores, visible.to(scores.dtype))
    weights = masked.softmax(dim=-1)
    dropped = dropout(weights, options.dropout_p, training=True)
    context = _apply_head_mask(dropped @ v, options.head_mask)  # (B, H, T, D)
    if not options.trace:
        return context, None
    if additive is None:
        additive = torch.zeros_like(scores[:, :1])  # (B, 1, T, T)
    steps = AttentionSteps(q=q, k=k, v=v, scores=scores, mask=additive, weights=weights, context=context)
    return context, steps


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where visible, MASK_VALUE where hidden, shaped like `visible` (see `visibility`)."""
    mask_value = max(MASK_VALUE, torch.finfo(dtype).min)  # fp16 cannot hold -1e9
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill(~visible, mask_value)


def _apply_head_mask(context: torch.Tensor, head_mask: torch.Tensor | None) -> torch.Tensor:
    if head_mask is None:
        return context
    return context * head_mask.to(context.dtype)[None, :, None, None]
