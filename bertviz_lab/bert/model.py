"""BERT (Devlin et al., 2019) from scratch, top to bottom in the order the paper draws it: the embeddings,
one encoder layer (multi-head self-attention, then a feed-forward network, each closed by a residual add
and LayerNorm), the encoder that stacks them, and the model with its heads (pooler, MLM, NSP; ELECTRA's
replaced-token head, in heads.py).

This file is the textbook path: plain PyTorch, one step per line. The same weights also run through
fast.py's faster kernels (one matmul for q, k and v, oneDNN on the CPU, fused attention, a last layer
computed only where the loss reads it); `model.fast` (on by default) picks that path, and
tests/bert/test_fast.py proves the two give the same logits, attentions, hidden states and gradients.

Module and parameter names mirror Hugging Face's `BertForPreTraining`, so a `state_dict` here has the
same keys as `model.safetensors` there and checkpoints move both ways without a renaming table. One
forward serves every page: `trace` returns each attention step, `causal` hides the right context,
`head_mask` switches heads off, `masked_positions` computes the MLM head only where needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from bertviz_lab.bert import fast
from bertviz_lab.bert.activations import ACT_FNS
from bertviz_lab.bert.attention import (AttentionOptions, AttentionSteps, additive_mask, mask_value, merge_heads,
                                        split_heads, visibility)
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.heads import Heads, Pooler


@dataclass
class BertOutput:
    """What one forward returns. B batch, T tokens, V vocabulary, d hidden, L layers."""

    mlm_logits: torch.Tensor | None  # (B, T, V), or (N, V) at the N masked_positions; None without an MLM head
    nsp_logits: torch.Tensor | None  # (B, 2): [IsNext, NotNext]; None without an NSP head
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 tensors (B, T, d): embeddings, then each layer
    pooled: torch.Tensor | None  # (B, d) tanh(W [CLS] + b), the NSP head's input
    trace: list[AttentionSteps] | None  # one per layer, with trace=True
    rtd_logits: torch.Tensor | None = None  # (B, T): ELECTRA's "was this token replaced?" logit; None without


class Embeddings(nn.Module):
    """token + position + segment embeddings, then LayerNorm and dropout.

    Family differences: DistilBERT has no segment embeddings, RoBERTa has one row and counts positions
    from pad_token_id + 1 (padding keeps position pad_token_id), ALBERT and some ELECTRAs give these vectors
    a width of their own (embedding_size; the encoder model projects them to the layers' width)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        width = cfg.embedding_width
        self.word_embeddings = nn.Embedding(cfg.vocab_size, width, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, width)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, width) if cfg.type_vocab_size else None
        self.LayerNorm = nn.LayerNorm(width, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        self.offset, self.pad_id, self.segments = cfg.position_offset, cfg.pad_token_id, cfg.type_vocab_size
        self.register_buffer("positions", torch.arange(cfg.max_position_embeddings), persistent=False)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        return self.dropout(self.LayerNorm(self.sum(input_ids, token_type_ids, inputs_embeds)))  # (B, T, e)

    def sum(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
            inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """token + segment + position vectors, (B, T, e), added in transformers' order, so rounding matches.
        `inputs_embeds` (B, T, e), if given, stands in for the token vectors (attribution differentiates F by it);
        positions still come from input_ids (RoBERTa's count skips padding)."""
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        if self.token_type_embeddings is not None:  # one row (RoBERTa): every token is segment 0
            segments = token_type_ids if self.segments > 1 else torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(segments)
        return x + self.position_embeddings(self.position_ids(input_ids))

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(T,), or (B, T) with RoBERTa's offset: pad + 1, pad + 2, ... for real tokens, pad for padding."""
        if not self.offset:
            return self.positions[: input_ids.shape[1]]
        real = input_ids.ne(self.pad_id)
        return torch.cumsum(real, dim=1) * real + (self.offset - 1)


class SelfAttention(nn.Module):
    """Multi-head self-attention (HF: `attention.self`): q, k and v are three projections of the same x,
    cut into H heads of D = d / H dimensions; each head computes softmax(q k^T / sqrt(D) + mask) v."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.attention_probs_dropout_prob)

    def forward(self, x: torch.Tensor, options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
        """(B, T, d) -> the heads' contexts side by side (B, T, d), and with `options.trace` every step."""
        q = split_heads(self.query(x), self.num_heads)  # (B, H, T, D)
        k = split_heads(self.key(x), self.num_heads)  # (B, H, T, D)
        v = split_heads(self.value(x), self.num_heads)  # (B, H, T, D)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T): query i . key j
        masked = scores
        if options.visible is not None:  # + mask: a key this query may not see scores MASK_VALUE (-1e9)
            masked = scores.masked_fill(~options.visible, mask_value(scores.dtype))
        weights = masked.softmax(dim=-1)  # (B, H, T, T): each row sums to 1
        context = self.dropout(weights) @ v  # (B, H, T, D): a weighted average of the values
        if options.head_mask is not None:  # (H,) of 0/1: a head switched off passes on zeros
            context = context * options.head_mask.to(context.dtype)[:, None, None]
        steps = None
        if options.trace:
            steps = AttentionSteps(q=q, k=k, v=v, scores=scores, mask=additive_mask(options.visible, scores),
                                   weights=weights, context=context)
        return merge_heads(context), steps


class AddNorm(nn.Module):
    """How each half of a layer ends (HF: `attention.output`, `output`): LayerNorm(residual + dropout(W x + b))."""

    def __init__(self, cfg: BertConfig, d_in: int):
        super().__init__()
        self.dense = nn.Linear(d_in, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)  # (B, T, d)


class Attention(nn.Module):
    """The first half of a layer (HF: `attention`): self-attention, then W_O, residual, LayerNorm."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.self = SelfAttention(cfg)
        self.output = AddNorm(cfg, cfg.hidden_size)  # dense: W_O

    def forward(self, x: torch.Tensor, options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
        context, steps = self.self(x, options)  # (B, T, d): [head_0; ...; head_{H-1}]
        return self.output(context, residual=x), steps  # LayerNorm(x + W_O context)


class Intermediate(nn.Module):
    """The feed-forward network's widening half (HF: `intermediate`): act(W_1 a + b_1), d -> d_ff."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = ACT_FNS[cfg.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))  # (B, T, d_ff)


class EncoderLayer(nn.Module):
    """One post-LN layer: a = LayerNorm(x + Attention(x)); out = LayerNorm(a + FFN(a))."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = Attention(cfg)
        self.intermediate = Intermediate(cfg)
        self.output = AddNorm(cfg, cfg.intermediate_size)  # dense: W_2, narrowing d_ff -> d

    def forward(self, x: torch.Tensor, options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
        a, steps = self.attention(x, options)  # (B, T, d)
        return self.output(self.intermediate(a), residual=a), steps  # LayerNorm(a + W_2 act(W_1 a))


class Encoder(nn.Module):
    """The layers; with shared_layers (ALBERT) one layer object at every depth, so its weights count once."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        shared = EncoderLayer(cfg) if cfg.shared_layers else None
        self.layer = nn.ModuleList(shared or EncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x: torch.Tensor, options: AttentionOptions, head_mask: torch.Tensor | None = None):
        """Every layer in turn on (B, T, d): each one's output, and each one's steps (None untraced)."""
        hidden, steps = [], []
        for i, layer in enumerate(self.layer):
            layer_options = options if head_mask is None else replace(options, head_mask=head_mask[i])  # (H,)
            x, layer_steps = layer(x, layer_options)
            hidden.append(x)
            steps.append(layer_steps)
        return hidden, steps


class BertEncoderModel(nn.Module):
    """Embeddings + encoder (+ pooler, which the heads run): HF's `BertModel`, under the `bert.` prefix."""

    def __init__(self, cfg: BertConfig, pooler: bool = True):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        # Embeddings of another width than the layers (ALBERT; ELECTRA-small, and the larger ELECTRA
        # generators), projected to the layers' width
        self.embeddings_project = nn.Linear(cfg.embedding_size, cfg.hidden_size) if cfg.embedding_size else None
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg) if pooler else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, options: AttentionOptions,
                head_mask: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None) -> tuple[tuple[torch.Tensor, ...], list]:
        """The L + 1 hidden states (B, T, d), embeddings first, and each layer's attention steps."""
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds)  # (B, T, e)
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)  # (B, T, d)
        hidden, steps = self.encoder(x, options, head_mask)
        return (x, *hidden), steps


class BertForPreTraining(nn.Module):
    """BERT with its pretraining heads. Heads a checkpoint lacks are None (see `has_mlm`, `has_nsp`).

    `fast` (default on) runs fast.py's path, the same numbers sooner; off, the textbook forward below.
    `attention_backend` picks the fast path's untraced attention: "math" (plain matmuls), "sdpa"
    (fused kernel), or "auto" (sdpa on CUDA, math on CPU, where bench/ measured the fused kernel slower).
    """

    def __init__(self, cfg: BertConfig, *, mlm_head: bool = True, nsp_head: bool = True, pooler: bool = True,
                 rtd_head: bool = False):
        super().__init__()
        self.config = cfg
        self.fast = True
        self.attention_backend = "auto"
        self.bert = BertEncoderModel(cfg, pooler=pooler or nsp_head)
        self.cls = Heads(cfg, mlm=mlm_head, nsp=nsp_head, rtd=rtd_head)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    @property
    def has_mlm(self) -> bool:
        return self.cls.predictions is not None

    @property
    def has_nsp(self) -> bool:
        return self.cls.seq_relationship is not None

    @property
    def has_rtd(self) -> bool:
        """An ELECTRA discriminator's replaced-token head."""
        return self.cls.discriminator is not None

    @property
    def architecture(self) -> str:
        """The Hugging Face class this model's weights correspond to."""
        if self.has_mlm and self.has_nsp:
            return "BertForPreTraining"
        return "BertForMaskedLM" if self.has_mlm else "BertModel"

    @property
    def heads_summary(self) -> str:
        """Its heads in a few words, for the model card."""
        if self.has_rtd:
            return "replaced-token detection (ELECTRA's discriminator), no MLM head"
        return "MLM + NSP" if self.has_mlm and self.has_nsp else "MLM only" if self.has_mlm else \
            "NSP only" if self.has_nsp else "none (encoder only)"

    def hf_config(self) -> dict:
        """What config.json says of this model (its class and shape), as `transformers` reads it."""
        return self.config.to_hf_dict(self.architecture)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, *, trace: bool = False, causal: bool = False,
                head_mask: torch.Tensor | None = None, masked_positions: torch.Tensor | None = None,
                encoder_only: bool = False, sparse_last_layer: bool = False,
                inputs_embeds: torch.Tensor | None = None) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T). head_mask: (L, H) of 0/1.
        inputs_embeds (B, T, e): token vectors to use instead of looking input_ids up (as in transformers).
        masked_positions: (B, T) bool; if given, MLM logits only there, as (N, V).
        encoder_only: the encoder and pooler only (HF's `BertModel`), no MLM, NSP or RTD logits.
        sparse_last_layer (fast path, with masked_positions): the last layer computes only the rows the heads
        read, the masked positions and [CLS], for the same logits and gradients in a fraction of its time;
        hidden_states then stop at the layer before it. The textbook path computes every row."""
        T = input_ids.shape[1]
        if T > self.config.max_tokens:
            raise ValueError(f"{T} tokens exceed the {self.config.max_tokens} positions this model has")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        options = AttentionOptions(
            visible=visibility(attention_mask, causal, T, input_ids.device), trace=trace,
            backend=self._backend(input_ids.device),
            dropout_p=self.config.attention_probs_dropout_prob if self.bert.training else 0.0)
        if self.fast:
            return BertOutput(**fast.forward(self, input_ids, token_type_ids, options, head_mask=head_mask,
                                             masked_positions=masked_positions, encoder_only=encoder_only,
                                             sparse_last_layer=sparse_last_layer, inputs_embeds=inputs_embeds))
        hidden, steps = self.bert(input_ids, token_type_ids, options, head_mask, inputs_embeds)
        x = hidden[-1]  # (B, T, d)
        pooled = self.bert.pooler(x) if self.bert.pooler is not None else None  # (B, d)
        out = BertOutput(mlm_logits=None, nsp_logits=None, hidden_states=hidden, pooled=pooled,
                         trace=steps if trace else None)
        if encoder_only:
            return out
        if self.has_mlm:
            out.mlm_logits = self.mlm_head(x if masked_positions is None else x[masked_positions])
        if self.has_nsp:
            out.nsp_logits = self.cls.seq_relationship(pooled)
        if self.has_rtd:
            out.rtd_logits = self.cls.discriminator(x)
        return out

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The MLM head on any hidden states, (..., d) -> (..., V); the logit lens applies it to every layer."""
        if self.fast:
            return fast.mlm_head(self, hidden)
        return self.cls.predictions(hidden, self.bert.embeddings.word_embeddings.weight)

    def _backend(self, device: torch.device) -> str:
        if self.attention_backend != "auto":
            return self.attention_backend
        return "sdpa" if device.type == "cuda" else "math"
