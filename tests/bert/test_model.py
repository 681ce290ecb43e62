"""The model alone: trace path vs fast paths, attention invariants, head mask, causal mask, config."""

import math

import pytest
import torch

from bertviz_lab.bert import device as devices
from bertviz_lab.bert.config import PRESET_SHAPES, BertConfig, preset
from bertviz_lab.bert.device import resolve_device
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import ConfigError, DeviceError


def batch(vocab=100, B=3, T=12, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, T), generator=g)
    segments = torch.zeros_like(ids)
    segments[:, T // 2:] = 1
    attention_mask = torch.ones_like(ids)
    if B == 3:
        attention_mask[1, 8:] = 0  # padded sequences
        attention_mask[2, 5:] = 0
    return ids, segments, attention_mask


def run_path(model, path, ids, seg, **kwargs):
    """One forward through an attention path: "trace" (math, keeping steps), "math" or "sdpa" (untraced)."""
    model.attention_backend = "math" if path == "trace" else path
    with torch.no_grad():
        return model(ids, seg, trace=path == "trace", **kwargs)


def masking_kwargs(masking, attention_mask):
    head_mask = torch.ones(2, 4)
    head_mask[1, 2] = 0
    kwargs = {"attention_mask": attention_mask} if "padding" in masking else {}
    if "causal" in masking:
        kwargs["causal"] = True
    if "head_mask" in masking:
        kwargs["head_mask"] = head_mask
    return kwargs


@pytest.mark.parametrize("masking", ["none", "padding", "padding+causal", "padding+head_mask"])
@pytest.mark.parametrize("path_a, path_b", [("trace", "math"), ("trace", "sdpa"), ("math", "sdpa")])
def test_trace_and_fast_paths_agree(tiny_model, path_a, path_b, masking):
    """Two different attention paths, same weights, same masks: the same outputs."""
    ids, seg, am = batch()
    kwargs = masking_kwargs(masking, am)
    a, b = (run_path(tiny_model, path, ids, seg, **kwargs) for path in (path_a, path_b))
    assert b.trace is None and (len(a.trace) == 2 if path_a == "trace" else a.trace is None)
    torch.testing.assert_close(a.mlm_logits, b.mlm_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.nsp_logits, b.nsp_logits, atol=1e-5, rtol=0)
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=0)


def test_weights_are_distributions_and_ignore_padding(tiny_model):
    ids, seg, am = batch()
    with torch.no_grad():
        out = tiny_model(ids, seg, am, trace=True)
    for steps in out.trace:
        w = steps.weights  # (B, H, T, T)
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-6, rtol=0)
        assert (w[1, :, :, 8:] == 0).all() and (w[2, :, :, 5:] == 0).all()
        assert (w[0] > 0).all()  # nothing hidden in the unpadded sequence
        # scores are q.k / sqrt(d) before the mask, so padded keys still have real scores
        expected = steps.q @ steps.k.transpose(-1, -2) / math.sqrt(steps.q.shape[-1])
        torch.testing.assert_close(steps.scores, expected)
        assert steps.mask[1, 0, 0, 8:].max() <= -1e9 and steps.mask[1, 0, 0, :8].abs().max() == 0
        torch.testing.assert_close(steps.context, steps.weights @ steps.v)


def test_fully_padded_row_is_finite(tiny_model):
    ids, seg, _ = batch(B=1)
    with torch.no_grad():
        out = tiny_model(ids, seg, torch.zeros_like(ids), trace=True)
    assert torch.isfinite(out.mlm_logits).all() and torch.isfinite(out.trace[0].weights).all()


def test_head_mask_zeroes_exactly_the_chosen_heads(tiny_model):
    ids, seg, am = batch()
    head_mask = torch.ones(2, 4)
    head_mask[1, 2] = 0  # layer 1, head 2 off
    with torch.no_grad():
        base = tiny_model(ids, seg, am, trace=True)
        off = tiny_model(ids, seg, am, trace=True, head_mask=head_mask)
    ctx, ref = off.trace[1].context, base.trace[1].context
    assert (ctx[:, 2] == 0).all() and (ref[:, 2] != 0).any()
    torch.testing.assert_close(ctx[:, [0, 1, 3]], ref[:, [0, 1, 3]])
    torch.testing.assert_close(off.trace[0].context, base.trace[0].context)  # layer 0 untouched
    assert not torch.allclose(off.mlm_logits, base.mlm_logits)
    tiny_model.attention_backend = "sdpa"
    with torch.no_grad():
        fast = tiny_model(ids, seg, am, head_mask=head_mask)
    torch.testing.assert_close(fast.mlm_logits, off.mlm_logits, atol=1e-5, rtol=0)


def test_causal_mask_hides_the_right_context(tiny_model):
    ids, seg, _ = batch(B=1)
    with torch.no_grad():
        out = tiny_model(ids, seg, trace=True, causal=True)
        changed = ids.clone()
        changed[0, -1] = 7  # a change to the last token cannot reach earlier positions
        out2 = tiny_model(changed, seg, causal=True)
    assert (out.trace[0].weights[0].triu(1) == 0).all()
    torch.testing.assert_close(out.mlm_logits[0, :-1], out2.mlm_logits[0, :-1], atol=1e-5, rtol=0)


def test_sparse_mlm_logits_equal_dense_rows(tiny_model):
    ids, seg, am = batch()
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[0, 3] = positions[2, 1] = True
    with torch.no_grad():
        dense = tiny_model(ids, seg, am).mlm_logits
        sparse = tiny_model(ids, seg, am, masked_positions=positions).mlm_logits
    assert sparse.shape == (2, 100)
    torch.testing.assert_close(sparse, dense[positions])


def test_decoder_is_tied_to_token_embeddings(tiny_model):
    names = [n for n, _ in tiny_model.named_parameters()]
    assert not any("decoder" in n for n in names)
    ids, seg, am = batch()
    with torch.no_grad():
        before = tiny_model(ids, seg, am).mlm_logits
        tiny_model.bert.embeddings.word_embeddings.weight[50] += 1.0
        after = tiny_model(ids, seg, am).mlm_logits
    assert not torch.allclose(before[..., 50], after[..., 50])


def test_training_mode_gradients_reach_every_parameter(tiny_model):
    ids, seg, am = batch()
    tiny_model.train()
    out = tiny_model(ids, seg, am)
    (out.mlm_logits.logsumexp(-1).mean() + out.nsp_logits.sum()).backward()
    assert all(p.grad is not None for n, p in tiny_model.named_parameters())


@pytest.mark.parametrize("name", list(PRESET_SHAPES))
def test_presets(name):
    cfg = preset(name)
    layers, hidden, heads = PRESET_SHAPES[name]
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden and cfg.head_dim == hidden // heads


def test_base_preset_has_bert_base_parameter_count():
    model = BertForPreTraining(preset("base"))
    # bert-base-uncased BertForPreTraining: 110,106,428 parameters (decoder tied)
    assert model.num_parameters() == 110_106_428


@pytest.mark.parametrize("changes, field", [
    (dict(hidden_size=30, num_attention_heads=4), "num_attention_heads"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(num_hidden_layers=-1), "num_hidden_layers"),
    (dict(hidden_act="swish"), "hidden_act"),
    (dict(hidden_dropout_prob=1.0), "hidden_dropout_prob"),
])
def test_config_rejects_invalid_values_naming_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        BertConfig(**changes)


def test_config_round_trips_through_hf_dict():
    cfg = BertConfig(vocab_size=777, hidden_size=48, num_attention_heads=3, hidden_act="relu")
    data = cfg.to_hf_dict()
    assert data["model_type"] == "bert" and data["architectures"] == ["BertForPreTraining"]
    assert BertConfig.from_dict({**data, "transformers_version": "x"}) == cfg
    with pytest.raises(ConfigError, match="gpt2"):
        BertConfig.from_dict({**data, "model_type": "gpt2"})


def test_overlong_input_is_refused(tiny_model):
    with pytest.raises(ValueError, match="exceed the 64 positions"):
        tiny_model(torch.ones(1, 65, dtype=torch.long))


def test_cuda_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(devices, "cuda_available", lambda: False)  # a machine without a GPU, wherever this runs
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")


def test_inference_fast_path_matches_the_autograd_path(tiny_model):
    """No-grad CPU inference runs oneDNN with packed weights; it must equal the plain path."""
    ids, seg, am = batch()
    with_grad = tiny_model(ids, seg, am)
    with torch.no_grad():
        no_grad = tiny_model(ids, seg, am)
        tiny_model.cls.seq_relationship.weight.mul_(2.0)  # a changed weight must not be served stale
        changed = tiny_model(ids, seg, am)
    torch.testing.assert_close(no_grad.mlm_logits, with_grad.mlm_logits.detach(), atol=1e-5, rtol=0)
    torch.testing.assert_close(no_grad.nsp_logits, with_grad.nsp_logits.detach(), atol=1e-5, rtol=0)
    assert not torch.allclose(changed.nsp_logits, no_grad.nsp_logits)


def test_every_activation_is_the_one_transformers_computes_under_that_name():
    from transformers.activations import ACT2FN

    from bertviz_lab.bert.config import ACTIVATIONS
    from bertviz_lab.bert.activations import ACT_FNS

    assert set(ACT_FNS) == set(ACTIVATIONS)
    x = torch.linspace(-6, 6, 2001, dtype=torch.float64)
    for name, fn in ACT_FNS.items():
        torch.testing.assert_close(fn(x), ACT2FN[name](x), atol=1e-12, rtol=0, msg=name)
    erf, tanh = ACT_FNS["gelu"](x), ACT_FNS["gelu_new"](x)
    assert (erf - tanh).abs().max() > 1e-4  # the two GELUs differ enough for parity tests to tell them apart
    assert "erf" in ACTIVATIONS["gelu"] and "tanh" in ACTIVATIONS["gelu_fast"]


def test_wide_model_ffn_inputs_reach_where_the_gelus_differ():
    """The wide-* parity configs in test_checkpoint.py only tell the GELUs apart if the FFN sees |x| > 1."""
    cfg = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, initializer_range=0.3, max_position_embeddings=40)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).eval()
    model.fast = False  # the textbook path calls each nn.Linear, so a hook sees it
    seen = []
    model.bert.encoder.layer[0].intermediate.dense.register_forward_hook(lambda m, i, o: seen.append(o))
    model(torch.randint(5, 120, (1, 12)))
    assert seen[0].abs().max() > 1.5
