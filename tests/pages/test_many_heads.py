"""A model of BERT-base's shape (12 layers x 12 heads, a tiny width) and one of 16 heads: the Attention page offers
every head and layer (buttons that wrap), and the Lesson's grid of heads is labelled once on its axes instead of a title per square."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.figures.attention import attention_grid
from bertviz_lab.figures.lesson import labelled_grid
from tests.helpers.figure_data import figures
from tests.helpers.lab import open_page, vocab_of_size
from tests.helpers.paths import ROOT

PAGES = ROOT / "pages"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=[(12, 12), (4, 16)], ids=["12x12", "4x16"])
def wide(request, tmp_path_factory):
    layers, heads = request.param
    tokenizer = WordPieceTokenizer.from_vocab(vocab_of_size(100))
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=2 * heads, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(f"wide{layers}x{heads}")
    return save_checkpoint(BertForPreTraining(cfg).eval(), tokenizer, folder), layers, heads


def test_attention_offers_every_head_and_layer(wide):
    folder, layers, heads = wide
    at = open_page(PAGES / "attention.py", folder)
    for key, count in (("attn.layer", layers), ("attn.head", heads)):
        picker = at.segmented_control(key=key)
        assert picker.options == [str(n) for n in range(count)]  # head 11 (15) among them
        assert picker.proto.wrap  # and on as many rows as the column needs: none cut off at 1024 or 1366 px
    at.segmented_control(key="attn.head").set_value(heads - 1).run()
    assert not at.exception and at.session_state["attn.head"] == heads - 1


@pytest.mark.parametrize("layers, heads", [(6, 12), (12, 12), (2, 16)])
def test_a_large_grid_names_heads_and_layers_once(layers, heads):
    weights = np.full((layers, heads, 5, 5), 0.2)
    fig = labelled_grid(attention_grid(weights, list("abcde"), list("abcde")), layers, heads)
    notes = [a.text for a in fig.layout.annotations]
    assert notes == ["H"] + [str(h) for h in range(heads)] + [f"L{n}" for n in range(layers)]  # no "L0 H0L0 H1..."
    assert not any(fig.layout[name].showticklabels for name in fig.layout if name.startswith(("xaxis", "yaxis")))


def test_a_small_grid_keeps_a_title_per_square():
    fig = labelled_grid(attention_grid(np.full((2, 4, 3, 3), 1 / 3), list("abc"), list("abc")), 2, 4)
    assert [a.text for a in fig.layout.annotations] == [f"L{n} H{h}" for n in range(2) for h in range(4)]


def test_the_lessons_heads_step_on_a_bert_base_shape(wide):
    folder, layers, heads = wide
    at = open_page(PAGES / "lesson.py", folder, lesson__step="heads")
    grid = next(f for f in figures(at) if len(f["data"]) == layers * heads)
    notes = [a["text"] for a in grid["layout"]["annotations"]]
    assert notes == ["H"] + [str(h) for h in range(heads)] + [f"L{n}" for n in range(layers)]
    assert any("Point at a square for its tokens" in c.value for c in at.caption)
