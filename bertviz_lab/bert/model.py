"""A from-scratch BERT: embeddings, post-LN encoder layers, pooler, MLM and NSP heads.

Module and parameter names mirror Hugging Face's `BertForPreTraining`, so a
`state_dict` here has the same keys as `model.safetensors` there and checkpoints
move both ways without a renaming table. One forward serves every page: `trace`
returns each attention step, `causal` hides the right context, `head_mask`
switches heads off, `masked_positions` computes the MLM head only where needed, and
`sparse_last_layer` also the last layer only at the rows the heads read (training).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from bertviz_lab.bert.activations import ACT_FNS
from bertviz_lab.bert.attention import AttentionOptions, AttentionSteps, attention, visibility
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.heads import Heads, Pooler
from bertviz_lab.bert.ops import Dropout, Linear, PackedWeightCache, fused_linear


@dataclass
class BertOutput:
    """What one forward returns. B batch, T tokens, V vocabulary, d hidden, L layers."""

    mlm_logits: torch.Tensor | None  # (B, T, V), or (N, V) at the N masked_positions; None without an MLM head
    nsp_logits: torch.Tensor | None  # (B, 2): [IsNext, NotNext]; None without an NSP head
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 tensors (B, T, d): embeddings, then each layer
    pooled: torch.Tensor | None  # (B, d) tanh(W [CLS] + b), the NSP head's input
    trace: list[AttentionSteps] | None  # one per layer, with trace=True
    rtd_logits: torch.Tensor | None = None  # (B, T): ELECTRA's "was this token replaced?" logit; None without


@dataclass
class ReadRows:
    """The rows of a (B, T) batch the heads read: the masked positions and, for the pooler, [CLS].
    `index` (B, M): each sequence's read positions in order, then unread ones as padding (M: the most any
    sequence reads); `keep` (B, M): the real entries. Over the N' kept entries, in (sequence, position)
    order, `masked` and `cls` (N',) say which are masked positions and which are [CLS]."""

    index: torch.Tensor
    keep: torch.Tensor
    masked: torch.Tensor
    cls: torch.Tensor

    @classmethod
    def of(cls, masked_positions: torch.Tensor, with_cls: bool) -> ReadRows:
        read = masked_positions.clone()
        read[:, 0] |= with_cls
        counts = read.sum(1)  # (B,)
        M = max(int(counts.max()), 1)
        index = torch.sort((~read).to(torch.uint8), dim=1, stable=True).indices[:, :M]  # read first, in order
        keep = torch.arange(M, device=read.device) < counts[:, None]
        return cls(index, keep, masked_positions.gather(1, index)[keep], (index == 0)[keep] & with_cls)


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
        self.dropout = Dropout(cfg.hidden_dropout_prob)
        self.offset, self.pad_id, self.segments = cfg.position_offset, cfg.pad_token_id, cfg.type_vocab_size
        self.register_buffer("positions", torch.arange(cfg.max_position_embeddings), persistent=False)

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(T,), or (B, T) with RoBERTa's offset: pad + 1, pad + 2, ... for real tokens, pad for padding."""
        if not self.offset:
            return self.positions[: input_ids.shape[1]]
        real = input_ids.ne(self.pad_id)
        return torch.cumsum(real, dim=1) * real + (self.offset - 1)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        x = self.word_embeddings(input_ids)  # (B, T, e); summed in transformers' order, so rounding matches
        if self.token_type_embeddings is not None:  # one row (RoBERTa): every token is segment 0
            segments = token_type_ids if self.segments > 1 else torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(segments)
        x = x + self.position_embeddings(self.position_ids(input_ids))
        return self.dropout(self.LayerNorm(x))


class QKV(nn.Module):
    """The three projections of self-attention (HF: `attention.self`), kept as three weights (the
    checkpoint's keys) and computed as one matmul of the stacked weights (one pass over x)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.query = Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = Linear(cfg.hidden_size, cfg.hidden_size)
        self._packed, self._packed_kv = PackedWeightCache(), PackedWeightCache()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = (self.query, self.key, self.value)
        weights, biases = tuple(p.weight for p in parts), tuple(p.bias for p in parts)
        return fused_linear(x, weights, biases, self._packed)  # (B, T, 3d): q, k, v side by side

    def key_value(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, 2d): k and v side by side, for queries taken from other rows."""
        weights, biases = (self.key.weight, self.value.weight), (self.key.bias, self.value.bias)
        return fused_linear(x, weights, biases, self._packed_kv)


class AddNorm(nn.Module):
    """Linear, dropout, residual add, LayerNorm: the post-LN sublayer output."""

    def __init__(self, cfg: BertConfig, d_in: int):
        super().__init__()
        self.dense = Linear(d_in, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class SelfAttention(nn.Module):
    """Multi-head self-attention with its output projection (HF: `attention`)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.heads, self.head_dim = cfg.num_attention_heads, cfg.head_dim
        self.self = QKV(cfg)
        self.output = AddNorm(cfg, cfg.hidden_size)

    def forward(self, x: torch.Tensor, options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
        B, T, _ = x.shape
        q, k, v = self.self(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
        context, steps = attention(q, k, v, options)  # (B, H, T, D)
        merged = context.transpose(1, 2).reshape(B, T, -1)  # (B, T, d)
        return self.output(merged, x), steps

    def forward_rows(self, x: torch.Tensor, rows: ReadRows, options: AttentionOptions) -> torch.Tensor:
        """The same output at the rows `rows` picks only, (N', d): every key and value, fewer queries."""
        B, T, d = x.shape
        M = rows.index.shape[1]
        picked = x.gather(1, rows.index[..., None].expand(B, M, d))  # (B, M, d)
        q = self.self.query(picked).view(B, M, self.heads, self.head_dim).transpose(1, 2)  # (B, H, M, D)
        k, v = self.self.key_value(x).view(B, T, 2, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        visible = options.visible
        if visible is not None and visible.shape[2] > 1:  # a row per query (causal): the picked queries' rows
            visible = visible.expand(B, 1, T, T).gather(2, rows.index[:, None, :, None].expand(B, 1, M, T))
        context, _ = attention(q, k, v, replace(options, visible=visible))  # (B, H, M, D)
        merged = context.transpose(1, 2).reshape(B, M, d)[rows.keep]  # (N', d)
        return self.output(merged, picked[rows.keep])


class EncoderLayer(nn.Module):
    """Post-LN block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.intermediate = nn.Module()
        self.intermediate.dense = Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output = AddNorm(cfg, cfg.intermediate_size)
        self.act = ACT_FNS[cfg.hidden_act]

    def forward(self, x: torch.Tensor, options: AttentionOptions) -> tuple[torch.Tensor, AttentionSteps | None]:
        x, steps = self.attention(x, options)
        return self.output(self.act(self.intermediate.dense(x)), x), steps

    def forward_rows(self, x: torch.Tensor, rows: ReadRows, options: AttentionOptions) -> torch.Tensor:
        """forward's output at the rows `rows` picks, (N', d), computed there only."""
        x = self.attention.forward_rows(x, rows, options)
        return self.output(self.act(self.intermediate.dense(x)), x)


class Encoder(nn.Module):
    """The layers; with shared_layers (ALBERT) one layer object at every depth, so its weights count once."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        shared = EncoderLayer(cfg) if cfg.shared_layers else None
        self.layer = nn.ModuleList(shared or EncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))


class BertEncoderModel(nn.Module):
    """Embeddings + encoder (+ pooler): HF's `BertModel`, under the `bert.` prefix."""

    def __init__(self, cfg: BertConfig, pooler: bool = True):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        # Embeddings of another width than the layers (ALBERT; ELECTRA-small, and the larger ELECTRA
        # generators), projected to the layers' width
        self.embeddings_project = Linear(cfg.embedding_size, cfg.hidden_size) if cfg.embedding_size else None
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg) if pooler else None


class BertForPreTraining(nn.Module):
    """BERT with its pretraining heads. Heads a checkpoint lacks are None (see `has_mlm`, `has_nsp`).

    `attention_backend` picks the untraced path: "math" (plain matmuls), "sdpa"
    (fused kernel), or "auto" (sdpa on CUDA, math on CPU, where bench/ measured
    the fused kernel slower).
    """

    def __init__(self, cfg: BertConfig, *, mlm_head: bool = True, nsp_head: bool = True, pooler: bool = True,
                 rtd_head: bool = False):
        super().__init__()
        self.config = cfg
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
    def heads(self) -> str:
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

    def _backend(self, device: torch.device) -> str:
        if self.attention_backend != "auto":
            return self.attention_backend
        return "sdpa" if device.type == "cuda" else "math"

    def _attention_options(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, causal: bool,
                           trace: bool) -> AttentionOptions:
        """What every layer's attention needs to know, decided once per forward."""
        return AttentionOptions(
            visible=visibility(attention_mask, causal, input_ids.shape[1], input_ids.device),
            trace=trace,
            backend=self._backend(input_ids.device),
            dropout_p=self.config.attention_probs_dropout_prob if self.training else 0.0)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, *, trace: bool = False, causal: bool = False,
                head_mask: torch.Tensor | None = None, masked_positions: torch.Tensor | None = None,
                heads: bool = True, sparse_last_layer: bool = False) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T). head_mask: (L, H) of 0/1.
        masked_positions: (B, T) bool; if given, MLM logits only there, as (N, V).
        heads=False: the encoder and pooler only (HF's `BertModel`), no MLM or NSP logits.
        sparse_last_layer (with masked_positions): the last layer computes only the rows the heads read,
        the masked positions and [CLS] (keys and values still from every row), for the same logits and
        gradients in a fraction of its time; hidden_states then stop at the layer before it."""
        T = input_ids.shape[1]
        if T > self.config.max_tokens:
            raise ValueError(f"{T} tokens exceed the {self.config.max_tokens} positions this model has")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        options = self._attention_options(input_ids, attention_mask, causal, trace)
        x = self.bert.embeddings(input_ids, token_type_ids)  # (B, T, e)
        if self.bert.embeddings_project is not None:
            x = self.bert.embeddings_project(x)  # (B, T, d)
        hidden, steps = [x], []
        layers = self.bert.encoder.layer
        sparse = sparse_last_layer and masked_positions is not None and heads and not trace and not self.has_rtd
        for i, layer in enumerate(layers):
            layer_options = options if head_mask is None else replace(options, head_mask=head_mask[i])  # row (H,)
            if sparse and i == len(layers) - 1:
                rows = ReadRows.of(masked_positions, with_cls=self.bert.pooler is not None)
                return self._sparse_heads(layer.forward_rows(x, rows, layer_options), rows, tuple(hidden))
            x, layer_steps = layer(x, layer_options)
            hidden.append(x)
            steps.append(layer_steps)
        return self._heads(x, masked_positions, tuple(hidden), steps if trace else None, heads)

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The MLM head on any hidden states, (..., d) -> (..., V); the logit lens applies it to every layer."""
        return self.cls.predictions(hidden, self.bert.embeddings.word_embeddings.weight)

    def _sparse_heads(self, x: torch.Tensor, rows: ReadRows, hidden) -> BertOutput:
        """The heads on the last layer's read rows x (N', d): the logits `_heads` gives at them."""
        pooled = self.bert.pooler.pool(x[rows.cls]) if self.bert.pooler is not None else None  # (B, d)
        mlm_logits = self.mlm_head(x[rows.masked]) if self.has_mlm else None  # (N, V)
        nsp_logits = self.cls.seq_relationship(pooled) if self.has_nsp else None
        return BertOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, hidden_states=hidden, pooled=pooled,
                          trace=None)

    def _heads(self, x, masked_positions, hidden, trace, heads: bool = True) -> BertOutput:
        pooled = self.bert.pooler(x) if self.bert.pooler is not None else None
        mlm_logits = nsp_logits = None
        if self.has_mlm and heads:
            selected = x[masked_positions] if masked_positions is not None else x  # (N, d) or (B, T, d)
            mlm_logits = self.mlm_head(selected)
        if self.has_nsp and heads:
            nsp_logits = self.cls.seq_relationship(pooled)
        rtd_logits = self.cls.discriminator(x) if self.has_rtd and heads else None
        return BertOutput(mlm_logits=mlm_logits, nsp_logits=nsp_logits, hidden_states=hidden,
                          pooled=pooled, trace=trace, rtd_logits=rtd_logits)
