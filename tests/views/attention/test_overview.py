"""Long inputs on the Attention page: a token range to read, the whole input pooled into blocks, and each head
as one number when 144 matrices of 512 x 512 are too many to draw."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import WordPieceTokenizer
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views.attention import overview as ov
from tests.helpers.lab import app_test, vocab_of_size
from tests.helpers.paths import ROOT

PAGE = ROOT / "pages" / "attention.py"
LONG_TEXT = " ".join(("the cat sat on the mat because it was tired . " * 60).split()[:600])  # past 512 tokens


def test_pooled_blocks_keep_every_row_summing_to_one():
    rng = np.random.default_rng(0)
    weights = rng.random((37, 37))
    weights /= weights.sum(-1, keepdims=True)
    blocks = ov.pooled(weights, 8)  # 5 blocks, the last of 5 tokens
    assert blocks.shape == (5, 5)
    np.testing.assert_allclose(blocks.sum(-1), 1.0, atol=1e-12)
    # block (1, 2): tokens 8-15 looking at tokens 16-23, by hand
    np.testing.assert_allclose(blocks[1, 2], weights[8:16, 16:24].sum(-1).mean(), atol=1e-12)
    np.testing.assert_allclose(ov.pooled(np.eye(37), 8), np.eye(5), atol=1e-12)  # self-attention: the diagonal


def test_head_distances_and_entropies_by_hand():
    T = 10
    previous = np.eye(T, k=-1)
    previous[0, 0] = 1.0  # the first token has no previous one: itself
    uniform = np.full((T, T), 1 / T)
    view = av.AttentionView(tokens=["t"] * T, labels=[], axis_labels=[], segment_ids=[], sequence_ids=[],
                            special=np.zeros(T, bool), q=None, k=None, v=None, scores=None, mask=None,
                            weights=np.stack([previous, uniform])[None], context=None, heads_on=None, hidden=None)
    distances, entropies = ov.head_distances(view), ov.head_entropies(view)
    np.testing.assert_allclose(distances[0], [9 / 10, np.abs(np.subtract.outer(range(T), range(T))).mean()])
    np.testing.assert_allclose(entropies[0], [0.0, math.log(T)], atol=1e-12)


@pytest.fixture(scope="module")
def long_model(tmp_path_factory):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512)
    return save_checkpoint(BertForPreTraining(cfg), WordPieceTokenizer.from_vocab(vocab_of_size(120)),
                           tmp_path_factory.mktemp("long") / "model")


def titles(at: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]


def long_page(folder) -> AppTest:
    at = app_test(str(PAGE), 120)
    at.session_state["model.path"] = str(folder)
    at.session_state["attn.text_a"] = LONG_TEXT
    return at.run()


def test_a_512_token_input_is_read_through_a_token_range_and_the_pooled_view(long_model):
    at = long_page(long_model)
    assert not at.exception, [e.value for e in at.exception]
    window = at.slider(key="attn.range")
    assert window.value == (0, 63) and window.max == 511 and "of 512" in window.label
    assert "Layer 0 · head 0 · tokens 0–63" in titles(at) and "Layer 0 · head 0 · blocks of 8" in titles(at)
    window.set_range(448, 511).run()
    assert not at.exception and "Layer 0 · head 0 · tokens 448–511" in titles(at)
    assert any("Rows no longer sum to 1" in c.value for c in at.caption)
    at.session_state["attn.text_a"] = "the cat sat ."  # a short text: the whole matrix, no range
    at.run()
    assert not at.exception and not [s for s in at.slider if s.key == "attn.range"]


def test_too_many_heads_to_draw_become_one_number_each(long_model, monkeypatch):
    monkeypatch.setattr(av, "GRID_MAX_CELLS", 1000)
    at = long_page(long_model)
    at.session_state["attn.grid"] = True  # the all-heads expander open
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("each head as one number" in i.value for i in at.info)
    assert {"How far each head looks", "How spread each head is"} <= set(titles(at))
