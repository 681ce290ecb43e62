"""The fast path: model.py's BERT, on the same modules and the same weights, computed the way the hardware
likes it. `BertForPreTraining.fast` (on by default) sends every forward here; tests/bert/test_fast.py proves
it gives the textbook path's logits, attention weights, hidden states and parameter gradients.

- Every linear layer through `ops.linear`: oneDNN on the CPU in fp32, with the weight packed once and
  cached on its module for inference (ops.py has the measurements), `F.linear` everywhere else.
- q, k and v as one matmul of the three stacked weights: one pass over x instead of three.
- Attention untraced by PyTorch's fused `scaled_dot_product_attention` ("sdpa", CUDA's default) or by plain
  matmuls ("math", the CPU's); traced, the math path keeping every step. The mask goes in with one
  `addcmul`: masked_fill's values in one fused pass, five times faster than masked_fill on the CPU.
- Dropout by ops' faster CPU sampler.
- The sparse last layer (`sparse_last_layer`, training): the last layer computes only the rows the heads
  read, the masked positions and [CLS] (keys and values still from every row), for the same logits and
  gradients in a fraction of its time (tests/bert/test_sparse_layer.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab.bert.attention import AttentionOptions, AttentionSteps, additive_mask, merge_heads, split_heads
from bertviz_lab.bert.ops import PackedWeightCache, dropout, fused_linear
from bertviz_lab.bert.ops import linear as ops_linear


# The sparse rows padded to a multiple of this: their count moves with every batch's masking, and the CPU's
# matrix products build a kernel per shape (oneDNN's, behind F.linear and torch.mm too), several ms each; the
# classroom preset took 79 ms a step with a new count each step and 45 ms with the shapes known.
SPARSE_ROW_BUCKET = 64


@dataclass
class ReadRows:
    """The rows of a (B, T) batch the heads read: the masked positions and, for the pooler, [CLS].
    `index` (B, M): each sequence's read positions in order, then unread ones as padding (M: the most any
    sequence reads); `keep` (B, M): the real entries. Over the N' kept entries, in (sequence, position)
    order, `masked` and `cls` (N',) say which are masked positions and which are [CLS].
    For the computation the same rows as indices padded to a multiple of SPARSE_ROW_BUCKET (repeating
    entry 0, whose copies nothing reads): `kept` (N'',) into the (B M) picked rows, `masked_rows` (into
    the N'' rows; the first `n_masked` are real) and `cls_rows` (B,), or (0,) without [CLS]."""

    index: torch.Tensor
    keep: torch.Tensor
    masked: torch.Tensor
    cls: torch.Tensor
    kept: torch.Tensor
    masked_rows: torch.Tensor
    cls_rows: torch.Tensor
    n_masked: int

    @classmethod
    def of(cls, masked_positions: torch.Tensor, with_cls: bool) -> ReadRows:
        read = masked_positions.clone()
        read[:, 0] |= with_cls
        counts = read.sum(1)  # (B,)
        M = max(int(counts.max()), 1)
        index = torch.sort((~read).to(torch.uint8), dim=1, stable=True).indices[:, :M]  # read first, in order
        keep = torch.arange(M, device=read.device) < counts[:, None]
        masked, is_cls = masked_positions.gather(1, index)[keep], (index == 0)[keep] & with_cls
        masked_rows = _padded(masked.nonzero().squeeze(1))
        return cls(index, keep, masked, is_cls, _padded(keep.flatten().nonzero().squeeze(1)), masked_rows,
                   is_cls.nonzero().squeeze(1), int(masked.sum()))


def _padded(index: torch.Tensor) -> torch.Tensor:
    """index (n,) padded with zeros to a multiple of SPARSE_ROW_BUCKET (at least one bucket)."""
    extra = -index.numel() % SPARSE_ROW_BUCKET if index.numel() else SPARSE_ROW_BUCKET
    return F.pad(index, (0, extra)) if extra else index


def forward(model: nn.Module, input_ids: torch.Tensor, token_type_ids: torch.Tensor, options: AttentionOptions, *,
            head_mask: torch.Tensor | None, masked_positions: torch.Tensor | None, encoder_only: bool,
            sparse_last_layer: bool, inputs_embeds: torch.Tensor | None = None) -> dict:
    """`BertForPreTraining.forward` by the fast path: the fields of its BertOutput."""
    bert = model.bert
    x = _dropout(bert.embeddings.dropout, bert.embeddings.LayerNorm(bert.embeddings.sum(input_ids, token_type_ids,
                                                                                        inputs_embeds)))
    if bert.embeddings_project is not None:
        x = linear(bert.embeddings_project, x)  # (B, T, d)
    hidden, steps = [x], []
    layers = bert.encoder.layer
    sparse = (sparse_last_layer and masked_positions is not None and not encoder_only and not options.trace
              and not model.has_rtd)
    for i, layer in enumerate(layers):
        layer_options = options if head_mask is None else replace(options, head_mask=head_mask[i])  # row (H,)
        if sparse and i == len(layers) - 1:
            rows = ReadRows.of(masked_positions, with_cls=bert.pooler is not None)
            return _sparse_heads(model, layer_rows(layer, x, rows, layer_options), rows, tuple(hidden))
        x, layer_steps = encoder_layer(layer, x, layer_options)
        hidden.append(x)
        steps.append(layer_steps)
    return _heads(model, x, masked_positions, tuple(hidden), steps if options.trace else None, encoder_only)


def encoder_layer(layer: nn.Module, x: torch.Tensor, options: AttentionOptions):
    """EncoderLayer.forward: (B, T, d) -> (B, T, d), and the attention's steps with `options.trace`."""
    attn = layer.attention.self
    qkv = _stacked(attn, ("query", "key", "value"), x)  # (B, T, 3d): q, k, v side by side
    q, k, v = (split_heads(part, attn.num_heads) for part in qkv.chunk(3, dim=-1))  # 3 x (B, H, T, D)
    context, steps = attention(q, k, v, options)  # (B, H, T, D)
    a = _add_norm(layer.attention.output, merge_heads(context), x)
    return _feed_forward(layer, a), steps


def layer_rows(layer: nn.Module, x: torch.Tensor, rows: ReadRows, options: AttentionOptions) -> torch.Tensor:
    """encoder_layer's output at the rows `rows` picks only, (N'', d): every key and value, fewer queries
    (the kept rows, padded to a bucket)."""
    attn = layer.attention.self
    B, T, d = x.shape
    M = rows.index.shape[1]
    picked = x.gather(1, rows.index[..., None].expand(B, M, d))  # (B, M, d)
    q = split_heads(linear(attn.query, picked), attn.num_heads)  # (B, H, M, D)
    kv = _stacked(attn, ("key", "value"), x)  # (B, T, 2d)
    k, v = (split_heads(part, attn.num_heads) for part in kv.chunk(2, dim=-1))  # 2 x (B, H, T, D)
    visible = options.visible
    if visible is not None and visible.shape[2] > 1:  # a row per query (causal): the picked queries' rows
        visible = visible.expand(B, 1, T, T).gather(2, rows.index[:, None, :, None].expand(B, 1, M, T))
    context, _ = attention(q, k, v, replace(options, visible=visible))  # (B, H, M, D)
    flat = lambda t: t.reshape(B * M, d)[rows.kept]  # noqa: E731  (B, M, d) -> (N'', d)
    a = _add_norm(layer.attention.output, flat(merge_heads(context)), flat(picked))  # (N'', d)
    return _feed_forward(layer, a)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
    """SelfAttention's softmax(q k^T / sqrt(D) + mask) v for q, k, v of shape (B, H, T, D); untraced, q may
    hold fewer rows than k and v (a sparse last layer's queries), with `options.visible` shaped to match.
    Returns the context (B, H, T, D) (q's rows) and, with `options.trace`, the steps (else None)."""
    if options.trace or options.backend == "math":
        return _math_attention(q, k, v, options)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=options.visible, dropout_p=options.dropout_p)
    return _apply_head_mask(context, options.head_mask), None


def _math_attention(q, k, v, options: AttentionOptions):
    # q scaled before the product: a pass over (B, H, T, D) instead of (B, H, T, T), and exact for
    # D a power of 4 (1/sqrt(64) = 1/8); the scaled copy is contiguous, as the product wants it anyway
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-1, -2)  # (B, H, T, T)
    visible, masked = options.visible, scores
    if visible is not None:
        # scores * 1 + 0 where visible, scores * 0 + MASK_VALUE where hidden: masked_fill's exact values
        # (so a fully hidden row stays uniform) in one fused pass
        mask = additive_mask(visible, scores)
        masked = torch.addcmul(mask, scores, visible.to(scores.dtype))
    weights = masked.softmax(dim=-1)
    dropped = dropout(weights, options.dropout_p, training=True)
    context = _apply_head_mask(dropped @ v, options.head_mask)  # (B, H, T, D)
    if not options.trace:
        return context, None
    mask = mask if visible is not None else additive_mask(None, scores)  # (B, 1, T, T) of zeros
    return context, AttentionSteps(q=q, k=k, v=v, scores=scores, mask=mask, weights=weights, context=context)


def _apply_head_mask(context: torch.Tensor, head_mask: torch.Tensor | None) -> torch.Tensor:
    if head_mask is None:
        return context
    return context * head_mask.to(context.dtype)[None, :, None, None]


def mlm_head(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """MLMHead.forward, (..., d) -> (..., V), with the decoder (the token embeddings) packed for inference."""
    head = model.cls.predictions
    h = head.transform.LayerNorm(head.act(linear(head.transform.dense, hidden)))
    return ops_linear(h, model.bert.embeddings.word_embeddings.weight, head.bias, _cache(head, "_packed_decoder"))


def _heads(model: nn.Module, x: torch.Tensor, masked_positions, hidden, trace, encoder_only: bool) -> dict:
    pooler, cls = model.bert.pooler, model.cls
    pooled = _pool(pooler, x[:, 0]) if pooler is not None else None  # (B, d)
    out = dict(mlm_logits=None, nsp_logits=None, hidden_states=hidden, pooled=pooled, trace=trace)
    if encoder_only:
        return out
    if model.has_mlm:
        out["mlm_logits"] = mlm_head(model, x if masked_positions is None else x[masked_positions])
    if model.has_nsp:
        out["nsp_logits"] = linear(cls.seq_relationship, pooled)
    if model.has_rtd:
        rtd = cls.discriminator
        out["rtd_logits"] = linear(rtd.dense_prediction, rtd.act(linear(rtd.dense, x))).squeeze(-1)  # (B, T)
    return out


def _sparse_heads(model: nn.Module, x: torch.Tensor, rows: ReadRows, hidden) -> dict:
    """The heads on the last layer's read rows x (N'', d): the logits `_heads` gives at them."""
    pooler = model.bert.pooler
    pooled = _pool(pooler, x[rows.cls_rows]) if pooler is not None else None  # (B, d)
    mlm = mlm_head(model, x[rows.masked_rows])[:rows.n_masked] if model.has_mlm else None  # (N, V)
    return dict(mlm_logits=mlm,
                nsp_logits=linear(model.cls.seq_relationship, pooled) if model.has_nsp else None,
                hidden_states=hidden, pooled=pooled, trace=None)


def _pool(pooler: nn.Module, cls_vectors: torch.Tensor) -> torch.Tensor:
    return torch.tanh(linear(pooler.dense, cls_vectors))  # (B, d)


def _add_norm(module: nn.Module, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """AddNorm.forward: LayerNorm(dropout(W x + b) + residual)."""
    return module.LayerNorm(_dropout(module.dropout, linear(module.dense, x)) + residual)


def _feed_forward(layer: nn.Module, a: torch.Tensor) -> torch.Tensor:
    """The layer's second half: LayerNorm(a + W_2 act(W_1 a))."""
    return _add_norm(layer.output, layer.intermediate.act(linear(layer.intermediate.dense, a)), a)


def linear(module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """module(x) by `ops.linear`, with the module's own packed-weight cache."""
    return ops_linear(x, module.weight, module.bias, _cache(module))


def _stacked(attn: nn.Module, names: tuple[str, ...], x: torch.Tensor) -> torch.Tensor:
    """The projections `names` of x side by side, (..., len(names) d), as one matmul of their stacked weights."""
    parts = [getattr(attn, name) for name in names]
    cache = _cache(attn, "_packed_" + "".join(name[0] for name in names))  # _packed_qkv, _packed_kv
    return fused_linear(x, tuple(p.weight for p in parts), tuple(p.bias for p in parts), cache)


def _dropout(module: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    return dropout(x, module.p, module.training)


def _cache(module: nn.Module, name: str = "_packed") -> PackedWeightCache:
    """The module's packed-weight cache called `name`, made on first use (ops.forget_packed finds it there)."""
    cache = vars(module).get(name)
    if cache is None:
        cache = vars(module)[name] = PackedWeightCache()
    return cache
