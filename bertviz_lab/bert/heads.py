"""BERT's heads on the encoder's output: the pooler, the MLM head, the NSP head and ELECTRA's
replaced-token head, named as in Hugging Face's `BertForPreTraining` (`bert.pooler`, `cls.*`).
Plain PyTorch, as the paper draws them; fast.py runs the same weights through faster kernels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bertviz_lab.bert.activations import ACT_FNS
from bertviz_lab.bert.config import BertConfig


class Pooler(nn.Module):
    """tanh(W h_[CLS] + b): the sentence vector the NSP head reads."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))  # (B, T, d) -> (B, d), from each [CLS] vector


class MLMHead(nn.Module):
    """dense -> act -> LayerNorm -> logits with the token embeddings as decoder (tied) plus a bias.
    With factorised embeddings (ELECTRA's generator, ALBERT) dense maps down to embedding_size."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.transform = nn.Module()
        self.transform.dense = nn.Linear(cfg.hidden_size, cfg.embedding_width)
        self.transform.LayerNorm = nn.LayerNorm(cfg.embedding_width, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.act = ACT_FNS[cfg.head_activation]

    def forward(self, hidden: torch.Tensor, decoder_weight: torch.Tensor) -> torch.Tensor:
        h = self.transform.LayerNorm(self.act(self.transform.dense(hidden)))
        return F.linear(h, decoder_weight, self.bias)  # (..., V): h E^T + b


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator: dense -> act -> one logit per token, "this token was replaced"."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dense_prediction = nn.Linear(cfg.hidden_size, 1)
        self.act = ACT_FNS[cfg.hidden_act]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T)


class Heads(nn.Module):
    """HF's `cls`: the MLM head (`predictions`), the NSP head (`seq_relationship`) and, for an ELECTRA
    discriminator, the replaced-token head (`discriminator`)."""

    def __init__(self, cfg: BertConfig, mlm: bool, nsp: bool, rtd: bool = False):
        super().__init__()
        self.predictions = MLMHead(cfg) if mlm else None
        self.seq_relationship = nn.Linear(cfg.hidden_size, 2) if nsp else None
        self.discriminator = ReplacedTokenHead(cfg) if rtd else None
