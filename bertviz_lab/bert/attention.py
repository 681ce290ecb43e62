"""What attention takes and gives, shared by the textbook path (model.py) and the fast path (fast.py).

The mask: `visibility` says which keys each query may see, `MASK_VALUE` is what a hidden key scores,
`additive_mask` the mask as pages show it (0 visible, MASK_VALUE hidden). The shapes: `split_heads` cuts
(B, T, d) into H heads of D = d / H dimensions, `merge_heads` puts them back side by side. The options
every layer's attention reads (`AttentionOptions`), and the steps it records (`AttentionSteps`).
The formula itself, softmax(q k^T / sqrt(D) + mask) v, is written out in model.py's `SelfAttention`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# What a key the query may not see scores. A large finite negative rather than -inf: a fully
# masked row then gives a uniform softmax instead of NaN (the academic manual, seed text 001, 7.3).
MASK_VALUE = -1e9


@dataclass(frozen=True)
class AttentionOptions:
    """How to run attention: built once by the model's forward, handed unchanged to every layer
    (only `head_mask` differs per layer, set with `dataclasses.replace`)."""

    visible: torch.Tensor | None = None  # bool (B or 1, 1, 1 or T, T) from `visibility`; None: all visible
    head_mask: torch.Tensor | None = None  # (H,) of 0/1, this layer's row; None: every head on
    trace: bool = False  # keep every step (AttentionSteps)
    backend: str = "math"  # the fast path's untraced kernel: "math" (plain matmuls) or "sdpa" (fused)
    dropout_p: float = 0.0  # the fast path's dropout on the weights (0 outside training); model.py's is a module


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


def mask_value(dtype: torch.dtype) -> float:
    """MASK_VALUE, or the most negative number `dtype` holds if that is less negative (fp16: -65504)."""
    return max(MASK_VALUE, torch.finfo(dtype).min)


def additive_mask(visible: torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
    """The mask as AttentionSteps records it: 0 where visible, MASK_VALUE where hidden, shaped like
    `visible`; all zeros of shape (B, 1, T, T) when everything is visible."""
    if visible is None:
        return torch.zeros_like(scores[:, :1])
    zeros = torch.zeros(visible.shape, dtype=scores.dtype, device=visible.device)
    return zeros.masked_fill(~visible, mask_value(scores.dtype))


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, d) -> (B, H, T, D): each head gets its own D = d / H columns."""
    B, T, d = x.shape
    return x.view(B, T, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, D) -> (B, T, d): the heads' outputs side by side, [head_0; ...; head_{H-1}]."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)
