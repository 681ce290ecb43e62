"""The activation functions BERT and its family use, one per name of `config.ACTIVATIONS`
(the words the pages show live there), each term for term as `transformers` computes it."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _gelu_tanh_pow(x: torch.Tensor) -> torch.Tensor:
    """transformers' NewGELUActivation ("gelu_new"), term for term."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _gelu_fast(x: torch.Tensor) -> torch.Tensor:
    """transformers' FastGELUActivation ("gelu_fast"), term for term."""
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


ACT_FNS = {
    "gelu": F.gelu,  # exact erf form, as in BERT's released code and transformers' "gelu"
    "gelu_python": F.gelu,
    "gelu_new": _gelu_tanh_pow,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_fast": _gelu_fast,
    "relu": F.relu,
}
