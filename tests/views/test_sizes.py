"""Model sizes the app quotes: counted from the shape, checked against models built here and published counts."""

from __future__ import annotations

import pytest
import torch

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertEncoderModel
from bertviz_lab.views import sizes
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")


@pytest.mark.parametrize("shape", sizes.FAMILY, ids=lambda s: s.name)
def test_parameter_count_equals_a_model_of_that_shape(shape):
    cfg = BertConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                     num_attention_heads=shape.heads, intermediate_size=shape.intermediate,
                     max_position_embeddings=shape.positions, type_vocab_size=shape.segments)
    with torch.device("meta"):  # shapes only: XLM-R Large would be 2 GB of real weights
        model = BertEncoderModel(cfg)
    assert sizes.encoder_parameters(shape) == sum(p.numel() for p in model.parameters())


def test_published_counts_and_the_seed_001_correction():
    by_name = {s.name: s for s in sizes.FAMILY}
    # transformers' BertModel / XLMRobertaModel num_parameters() for the published checkpoints
    assert sizes.encoder_parameters(by_name["BERT-Base"]) == 109_482_240
    assert sizes.encoder_parameters(by_name["BERT-Large"]) == 335_141_888
    assert sizes.encoder_parameters(by_name["XLM-R Base"]) == 278_043_648
    base, large = by_name["XLM-R Base"], by_name["XLM-R Large"]
    assert (base.hidden, base.layers, base.heads) == (768, 12, 12)
    # what the academic manual (seed text 001) calls "Base"
    assert (large.hidden, large.layers, large.heads) == (1024, 24, 16)
    assert "XLM-R Large's sizes" in sizes.SEED001_CORRECTION and "d = 768, L = 12, H = 12" in sizes.SEED001_CORRECTION


def test_home_shows_the_family_sizes_with_the_correction_and_the_activation():
    at = app_test(APP).run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "parameters (encoder + pooler)" in d.value.columns)
    assert table["model"][0] == "active: bertviz-mini"
    xlmr = table[table["model"] == "XLM-R Base"].iloc[0]
    assert (xlmr["hidden d"], xlmr["layers L"], xlmr["heads H"]) == (768, 12, 12)
    assert any(sizes.SEED001_CORRECTION in c.value for c in at.caption)
    assert any("Feed-forward activation: GELU, exact" in c.value for c in at.caption)
