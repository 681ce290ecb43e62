"""Shared fixtures: tiny configs, a tiny vocabulary and checkpoints the tests create."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer

WORDS = ("the a cat cats dog sat on mat rug bank river money deposit went to i it was tired animal "
         "did not cross street because . , ? ! rain city food delicious love natural language processing "
         "play ##ing ##ed ##s un ##believ ##able and he she they").split()


def vocab_of_size(n: int) -> list[str]:
    """Specials, then real words, then filler tokens up to n entries."""
    tokens = list(SPECIAL_TOKENS) + [w for w in WORDS if w not in SPECIAL_TOKENS]
    return tokens + [f"tok{i}" for i in range(n - len(tokens))]


@pytest.fixture
def tiny_config() -> BertConfig:
    return BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64)


@pytest.fixture
def tiny_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(vocab_of_size(100))


@pytest.fixture
def tiny_model(tiny_config) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(tiny_config).eval()


@pytest.fixture
def tiny_checkpoint(tmp_path, tiny_model, tiny_tokenizer):
    return save_checkpoint(tiny_model, tiny_tokenizer, tmp_path / "tiny",
                           card={"corpus": "none (random init)", "steps": 0})
