"""The rest of an encoder layer for one token (views/attention/layer.py), recomputed in float64, lands on the
model's own hidden state: with every head on, with heads switched off, and with another activation."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.attention import layer as lv

SENTENCE = "the animal did not cross the street because it was tired ."
STEPS = ["input x", "heads concatenated", "output projection", "add x (residual)", "LayerNorm → a", "FFN: widen",
         "activation: GELU", "FFN: narrow", "add a (residual)", "LayerNorm → output"]


def model_hidden(model, encoding, head_mask=None) -> list[np.ndarray]:
    """(T, d) per layer from an untraced forward of its own: what the steps must land on."""
    return [h[0].double().numpy() for h in inputs.run(model, encoding, head_mask=head_mask).hidden_states]


def check_every_layer_and_token(model, encoding, head_mask=None) -> float:
    view = av.explore(model, encoding, head_mask)
    hidden, worst = model_hidden(model, encoding, head_mask), 0.0
    for layer in range(model.config.num_hidden_layers):
        for token in range(len(encoding)):
            steps = lv.layer_steps(model, view, layer, token)
            np.testing.assert_allclose(steps.output, hidden[layer + 1][token], atol=1e-5, rtol=0)
            assert steps.max_difference < 1e-5 and steps.concat_difference < 1e-6
            worst = max(worst, steps.max_difference)
    return worst


def test_the_last_step_is_the_models_hidden_state(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, SENTENCE)
    assert check_every_layer_and_token(tiny_model, encoding) < 1e-6


def test_the_table_shows_each_step_with_its_size_norm_and_first_dimensions(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, SENTENCE)
    view = av.explore(tiny_model, encoding)
    steps = lv.layer_steps(tiny_model, view, 1, 9)
    table = steps.table
    assert list(table[lv.STEP]) == STEPS
    assert list(table.columns[:4]) == [lv.STEP, lv.EQUATION, lv.SIZE, lv.NORM]
    assert list(table.columns[4:]) == [f"dim {i}" for i in range(8)]
    assert table[lv.SIZE].tolist() == ["d = 32"] * 5 + ["d_ff = 64"] * 2 + ["d = 32"] * 3
    assert table[lv.EQUATION].iloc[1] == "c = [head₀; …; head₃]" and table[lv.EQUATION].iloc[2] == "o = W_O c + b_O"
    dims = table.iloc[:, 4:].to_numpy()
    np.testing.assert_allclose(dims[0], view.hidden[1, 9, :8], atol=1e-12)  # x: the layer's input
    np.testing.assert_allclose(dims[1], view.context[1, 0, 9], atol=1e-6)  # c starts with head 0 (d_head = 8)
    np.testing.assert_allclose(dims[3], dims[0] + dims[2], atol=1e-12)  # x + o
    np.testing.assert_allclose(dims[8], dims[4] + dims[7], atol=1e-12)  # a + f
    np.testing.assert_allclose(dims[9], steps.output[:8])
    np.testing.assert_allclose(table[lv.NORM].iloc[-1], np.linalg.norm(steps.output))
    np.testing.assert_allclose(table[lv.NORM].iloc[[4, 9]], np.sqrt(32), rtol=1e-6)  # LayerNorm with γ = 1, β = 0
    assert "erf" in steps.activation and steps.eps == 1e-12 and steps.heads_off == ()


def test_a_switched_off_head_is_zeros_in_the_concatenation(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, SENTENCE)
    mask = av.head_mask(["L0 H1", "L1 H3"], 2, 4)
    assert check_every_layer_and_token(tiny_model, encoding, mask) < 1e-6
    view = av.explore(tiny_model, encoding, mask)
    steps = lv.layer_steps(tiny_model, view, 0, 4)
    assert steps.heads_off == (1,)
    on = lv.layer_steps(tiny_model, av.explore(tiny_model, encoding), 0, 4)
    assert not np.allclose(steps.output, on.output, atol=1e-6)  # the head mattered


def test_the_steps_follow_the_configs_activation(tiny_config, tiny_tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = BertForPreTraining(replace(tiny_config, hidden_act="gelu_new")).eval()
    with torch.no_grad():  # FFN inputs of a few units, where GELU's exact and tanh forms differ by ~1e-4
        for block in model.bert.encoder.layer:
            block.intermediate.dense.weight *= 50
    encoding = inputs.encode(tiny_tokenizer, model, SENTENCE)
    assert check_every_layer_and_token(model, encoding) < 1e-5
    view = av.explore(model, encoding)
    steps = lv.layer_steps(model, view, 0, 1)
    assert "tanh" in steps.activation and steps.table[lv.STEP].iloc[6] == "activation: GELU"
    assert steps.table[lv.NORM].iloc[5] > 10  # the FFN input is indeed large
    monkeypatch.setitem(lv.ACT_FNS, "gelu_new", torch.nn.functional.gelu)  # the exact form, the wrong one here
    assert max(lv.layer_steps(model, view, 0, t).max_difference for t in range(len(encoding))) > 1e-5


def test_relu_is_named_in_the_table(tiny_config, tiny_tokenizer):
    torch.manual_seed(0)
    model = BertForPreTraining(replace(tiny_config, hidden_act="relu")).eval()
    encoding = inputs.encode(tiny_tokenizer, model, SENTENCE)
    steps = lv.layer_steps(model, av.explore(model, encoding), 1, 2)
    assert steps.table[lv.STEP].iloc[6] == "activation: ReLU" and steps.table[lv.EQUATION].iloc[6].startswith(
        "g = ReLU(u)")
    assert (steps.table.iloc[6, 4:] >= 0).all() and steps.max_difference < 1e-5


@pytest.mark.parametrize("layer", [0, 1])
def test_a_wrong_step_would_show_as_a_difference(tiny_model, tiny_tokenizer, layer):
    """The check is not a comparison of a thing with itself: perturb one weight and it sees it."""
    encoding = inputs.encode(tiny_tokenizer, tiny_model, SENTENCE)
    view = av.explore(tiny_model, encoding)
    with torch.no_grad():
        tiny_model.bert.encoder.layer[layer].intermediate.dense.bias[0] += 0.5
    try:
        assert lv.layer_steps(tiny_model, view, layer, 3).max_difference > 1e-3
    finally:
        with torch.no_grad():
            tiny_model.bert.encoder.layer[layer].intermediate.dense.bias[0] -= 0.5
