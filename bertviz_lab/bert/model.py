"""A from-scratch BERT: embeddings, post-LN encoder layers, pooler, MLM and NSP heads.

Module and parameter names mirror Hugging Face's `BertForPreTraining`, so a
`state_dict` here has the same keys as `model.safetensors` there and checkpoints
move both ways without a renaming table. One forward serves every page: `trace`
returns each attention step, `causal` hides the right context, `head_mask`
switches heads off, `masked_positions` computes the MLM head only where needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab.bert.attention import AttentionOptions, AttentionSteps, attention, visibility
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.ops import Dropout, Linear, PackedWeightCache, fused_linear, linear


def _gelu_tanh_pow(x: torch.Tensor) -> torch.Tensor:
    """transformers' NewGELUActivation ("gelu_new"), term for term."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _gelu_fast(x: torch.Tensor) -> torch.Tensor:
    """transformers' FastGELUActivation ("gelu_fast"), term for term."""
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


# One function per name of config.ACTIVATIONS (the words the pages show live there).
ACT_FNS = {
    "gelu": F.gelu,  # exact erf form, as in BERT's released code and transformers' "gelu"
    "gelu_python": F.gelu,
    "gelu_new": _gelu_tanh_pow,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": _gelu_fast,
    "relu": F.relu,
}


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
    from pad_token_id + 1 (padding keeps position pad_token_id), ELECTRA and ALBERT make these vectors
    narrower than the layers (embedding_size; the encoder model projects them up)."""

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
        self._packed = PackedWeightCache()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = (self.query, self.key, self.value)
        weights, biases = tuple(p.weight for p in parts), tuple(p.bias for p in parts)
        return fused_linear(x, weights, biases, self._packed)  # (B, T, 3d): q, k, v side by side


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


class Encoder(nn.Module):
    """The layers; with shared_layers (ALBERT) one layer object at every depth, so its weights count once."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        shared = EncoderLayer(cfg) if cfg.shared_layers else None
        self.layer = nn.ModuleList(shared or EncoderLayer(cfg) for _ in range(cfg.num_hidden_layers))


class Pooler(nn.Module):
    """tanh(W h_[CLS] + b): the sentence vector the NSP head reads."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertEncoderModel(nn.Module):
    """Embeddings + encoder (+ pooler): HF's `BertModel`, under the `bert.` prefix."""

    def __init__(self, cfg: BertConfig, pooler: bool = True):
        super().__init__()
        self.embeddings = Embeddings(cfg)
        # ELECTRA and ALBERT: narrow embeddings projected up to the layers' width
        self.embeddings_project = Linear(cfg.embedding_size, cfg.hidden_size) if cfg.embedding_size else None
        self.encoder = Encoder(cfg)
        self.pooler = Pooler(cfg) if pooler else None


class MLMHead(nn.Module):
    """dense -> act -> LayerNorm -> logits with the token embeddings as decoder (tied) plus a bias.
    With factorised embeddings (ELECTRA's generator, ALBERT) dense maps down to embedding_size."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.transform = nn.Module()
        self.transform.dense = Linear(cfg.hidden_size, cfg.embedding_width)
        self.transform.LayerNorm = nn.LayerNorm(cfg.embedding_width, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.act = ACT_FNS[cfg.head_activation]
        self._packed_decoder = PackedWeightCache()

    def forward(self, hidden: torch.Tensor, decoder_weight: torch.Tensor) -> torch.Tensor:
        h = self.transform.LayerNorm(self.act(self.transform.dense(hidden)))
        return linear(h, decoder_weight, self.bias, self._packed_decoder)  # (..., V)


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator: dense -> act -> one logit per token, "this token was replaced"."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.hidden_size)
        self.dense_prediction = Linear(cfg.hidden_size, 1)
        self.act = ACT_FNS[cfg.hidden_act]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T)


class Heads(nn.Module):
    """HF's `cls`: the MLM head (`predictions`), the NSP head (`seq_relationship`) and, for an ELECTRA
    discriminator, the replaced-token head (`discriminator`)."""

    def __init__(self, cfg: BertConfig, mlm: bool, nsp: bool, rtd: bool = False):
        super().__init__()
        self.predictions = MLMHead(cfg) if mlm else None
        self.seq_relationship = Linear(cfg.hidden_size, 2) if nsp else None
        self.discriminator = ReplacedTokenHead(cfg) if rtd else None


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
                heads: bool = True) -> BertOutput:
        """input_ids, token_type_ids, attention_mask: (B, T). head_mask: (L, H) of 0/1.
        masked_positions: (B, T) bool; if given, MLM logits only there, as (N, V).
        heads=False: the encoder and pooler only (HF's `BertModel`), no MLM or NSP logits."""
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
        for i, layer in enumerate(self.bert.encoder.layer):
            layer_options = options if head_mask is None else replace(options, head_mask=head_mask[i])  # row (H,)
            x, layer_steps = layer(x, layer_options)
            hidden.append(x)
            steps.append(layer_steps)
        return self._heads(x, masked_positions, tuple(hidden), steps if trace else None, heads)

    def mlm_head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The MLM head on any hidden states, (..., d) -> (..., V); the logit lens applies it to every layer."""
        return self.cls.predictions(hidden, self.bert.embeddings.word_embeddings.weight)

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
