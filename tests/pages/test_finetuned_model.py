"""A fine-tuned model as the active model: every page still opens, saying what the model lacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.classifier import BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.finetune.loop import builtin_tokenizer
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGES = ROOT / "pages"


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
    at = app_test(str(PAGES / f"{name}.py"), 120)
    at.session_state["model.path"] = str(classifier)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if name == "predict":  # no MLM head: the page says so instead of guessing
        assert any("MLM" in m.value or "masked" in m.value.lower() for m in [*at.info, *at.warning, *at.error])
    if name == "attention":
        assert at.get("plotly_chart")  # a fine-tuned model's attention is drawn as any other


def test_home_names_the_classifier_its_labels_and_what_it_was_tuned_on(classifier, tmp_path):
    classifier = Path(shutil.copytree(classifier, tmp_path / classifier.name))  # a folder no test loaded yet
    card = {"trained_by": "bertviz_lab", "fine_tuned_on": "acceptability", "steps": 120,
            "started": "from scratch (tiny)"}
    (classifier / "model_card.json").write_text(json.dumps(card))
    at = app_test(str(PAGES.parent / "app.py"), 120).run()  # Home is the default page
    at.text_input(key="model.custom").set_value(str(classifier)).run()
    at.button(key="model.load").click().run()
    assert not at.exception and not at.sidebar.error, [e.value for e in at.exception]
    facts = next(c.value for c in at.caption if c.value.startswith("reads up to"))
    expected = {"sequence": "a sentence classifier on the pooled CLS vector, no MLM head (2 labels: ok, broken)",
                "token": "a tag classifier on every token, no MLM head (2 labels: O, PLACE)"}[classifier.name]
    assert f"heads: {expected}" in facts
    assert "fine-tuned on acceptability for 120 steps, from scratch (tiny)" in facts
    assert not at.text  # every fact was markdown-safe: nothing fell back to plain text
