"""A fine-tuned model as the active model: every page still opens, saying what the model lacks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.finetune.loop import builtin_tokenizer

PAGES = Path(__file__).resolve().parents[1] / "pages"


@pytest.fixture(scope="module", params=["sequence", "token"])
def classifier(request, tmp_path_factory):
    tokenizer = builtin_tokenizer()
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BertClassifier(cfg, ("ok", "broken") if request.param == "sequence" else ("O", "PLACE"), request.param)
    return save_checkpoint(model, tokenizer, tmp_path_factory.mktemp("ft") / request.param)


@pytest.mark.parametrize("name", ["predict", "attention", "representations", "losses"])
def test_every_page_opens_with_a_fine_tuned_model(classifier, name):
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=120)
    at.session_state["model.path"] = str(classifier)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if name == "predict":  # no MLM head: the page says so instead of guessing
        assert any("MLM" in m.value or "masked" in m.value.lower() for m in [*at.info, *at.warning, *at.error])
    if name == "attention":
        assert at.get("plotly_chart")  # a fine-tuned model's attention is drawn as any other
