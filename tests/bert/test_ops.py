"""The fast CPU ops: the oneDNN linears equal F.linear (and are really taken), in inference and in training,
one matmul for several weights equals them side by side, the dropout sampler's statistics."""

import pytest
import torch
import torch.nn.functional as F

from bertviz_lab.bert import ops
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining

needs_onednn = pytest.mark.skipif(not ops._ONEDNN, reason="this PyTorch build has no oneDNN (mkldnn) "
                                                          "linear, so only the plain path exists")

SHAPES = [  # (input shape, d_out); rows = product of all dims but the last
    ((12,), 5),  # 1-D: one row
    ((ops.ROW_BUCKET, 8), 6),  # rows a multiple of ROW_BUCKET: no padding
    ((5, 8), 3),  # rows not a multiple: padded, then cut back
    ((2, ops.ROW_BUCKET, 12), 7),  # 3-D, 32 rows
    ((3, 7, 12), 9),  # 3-D, 21 rows
]


@pytest.fixture
def onednn_calls(monkeypatch):
    """Every size of weight may take a oneDNN path; counts the calls that reach each (and still runs them)."""
    monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)
    monkeypatch.setattr(ops, "ONEDNN_MIN_TRAIN_WEIGHT", 0)
    calls = {"packed": [], "train": []}
    packed, train = ops._packed_linear, ops._OneDnnLinear.apply
    monkeypatch.setattr(ops, "_packed_linear", lambda x, *a: calls["packed"].append(x.shape) or packed(x, *a))
    monkeypatch.setattr(ops._OneDnnLinear, "apply", lambda x, *a: calls["train"].append(x.shape) or train(x, *a))
    return calls


def random_linear(shape, d_out, bias, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    weight = torch.randn(d_out, shape[-1], generator=g)
    b = torch.randn(d_out, generator=g) if bias else None
    return x, weight, b


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("seed, shape, d_out", [(i, s, d) for i, (s, d) in enumerate(SHAPES)])
def test_packed_path_is_taken_and_equals_f_linear(onednn_calls, seed, shape, d_out, bias):
    x, weight, b = random_linear(shape, d_out, bias, seed)
    out = ops.linear(x, weight, b, ops.PackedWeightCache())
    assert onednn_calls == {"packed": [x.shape], "train": []}
    assert out.shape == (*shape[:-1], d_out)
    torch.testing.assert_close(out, F.linear(x, weight, b))


@needs_onednn
def test_a_weight_changed_in_place_is_repacked(onednn_calls):
    x, weight, b = random_linear((5, 8), 4, True, seed=7)
    cache = ops.PackedWeightCache()
    before = ops.linear(x, weight, b, cache)
    weight.mul_(2.0)  # same storage, new version: the packed copy is stale
    after = ops.linear(x, weight, b, cache)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, F.linear(x, weight, b))
    b.add_(1.0)  # the bias is cached too
    torch.testing.assert_close(ops.linear(x, weight, b, cache), F.linear(x, weight, b))
    assert len(onednn_calls["packed"]) == 3


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("seed, shape, d_out", [(i, s, d) for i, (s, d) in enumerate(SHAPES)])
def test_training_path_is_taken_and_has_f_linears_gradients(onednn_calls, seed, shape, d_out, bias):
    x, weight, b = random_linear(shape, d_out, bias, seed)
    leaves = [t.requires_grad_(True) for t in (x, weight, b) if t is not None]
    grad = torch.randn(*shape[:-1], d_out)
    out = ops.linear(x, weight, b, ops.PackedWeightCache())
    expected = F.linear(x, weight, b)
    assert onednn_calls == {"packed": [], "train": [x.shape]} and out.grad_fn is not None
    torch.testing.assert_close(out, expected)
    ours, theirs = (torch.autograd.grad(y, leaves, grad) for y in (out, expected))
    for a, e in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, e)


@needs_onednn
@pytest.mark.parametrize("needs_grad", ["input", "weight"])
def test_the_training_path_computes_only_the_gradients_asked_for(onednn_calls, needs_grad):
    x, weight, b = random_linear((3, 7, 12), 9, True, seed=3)
    (x if needs_grad == "input" else weight).requires_grad_(True)
    ops.linear(x, weight, b, ops.PackedWeightCache()).sum().backward()
    grad = x.grad if needs_grad == "input" else weight.grad
    assert grad is not None and grad.abs().sum() > 0
    assert (weight.grad if needs_grad == "input" else x.grad) is None and b.grad is None
    assert len(onednn_calls["train"]) == 1


def test_autocast_and_other_dtypes_take_the_plain_path(onednn_calls):
    x, weight, b = random_linear((3, 7, 12), 9, True, seed=4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ops.linear(x, weight, b, ops.PackedWeightCache()).dtype == torch.bfloat16
    x, weight, b = x.double(), weight.double(), b.double()
    torch.testing.assert_close(ops.linear(x, weight, b, ops.PackedWeightCache()), F.linear(x, weight, b))
    assert onednn_calls == {"packed": [], "train": []}


def test_a_layer_in_training_and_in_inference_takes_its_own_path(onednn_calls):
    layer = ops.Linear(8, 4)  # parameters require grad, so a forward with grad enabled builds a graph
    x = torch.randn(5, 8)
    torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    with torch.no_grad():
        layer(x)
    expected = [[x.shape], [x.shape]] if ops._ONEDNN else [[], []]
    assert [onednn_calls["train"], onednn_calls["packed"]] == expected


@needs_onednn
def test_only_a_big_enough_weight_takes_a_onednn_path(monkeypatch):
    calls = []
    real = ops._packed_linear
    monkeypatch.setattr(ops, "_packed_linear", lambda x, w, b: calls.append(tuple(w.shape)) or real(x, w, b))
    with torch.no_grad():
        for d_in, d_out in [(256, 256), (256, 768), (256, 1024), (768, 3072)]:  # mini's O, QKV and FFN; base's FFN
            x, weight, b = random_linear((1, 9, d_in), d_out, True, seed=d_in)
            torch.testing.assert_close(ops.linear(x, weight, b, ops.PackedWeightCache()), F.linear(x, weight, b),
                                       rtol=1e-4, atol=1e-4)
    assert calls == [(768, 256), (1024, 256), (3072, 768)]  # 2**17 entries and more; 256 x 256 has 2**16


@pytest.mark.parametrize("grad", [False, True])
def test_fused_linear_equals_the_linears_side_by_side(onednn_calls, grad):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 7, 12, generator=g)
    weights = tuple(torch.randn(d, 12, generator=g).requires_grad_(grad) for d in (12, 12, 6))
    biases = tuple(torch.randn(d, generator=g).requires_grad_(grad) for d in (12, 12, 6))

    def side_by_side():
        return torch.cat([F.linear(x, w, b) for w, b in zip(weights, biases, strict=True)], dim=-1)  # (2, 7, 30)

    cache = ops.PackedWeightCache()
    with torch.set_grad_enabled(grad):
        out, expected = ops.fused_linear(x, weights, biases, cache), side_by_side()
    torch.testing.assert_close(out, expected)
    if grad:
        ours = torch.autograd.grad(out.square().sum(), weights + biases)
        theirs = torch.autograd.grad(expected.square().sum(), weights + biases)
        for a, e in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, e)
    else:
        with torch.no_grad():
            weights[1].add_(1.0)  # one of the stacked weights changes: the stack is packed again
            torch.testing.assert_close(ops.fused_linear(x, weights, biases, cache), side_by_side())
    taken = len(onednn_calls["train" if grad else "packed"])
    assert taken == (0 if not ops._ONEDNN else 1 if grad else 2)  # in inference, the stack ran twice


@needs_onednn
def test_a_model_on_the_onednn_paths_equals_the_plain_one(monkeypatch):
    """The fast paths in the whole model, trace and training: the outputs and every gradient of F.linear's."""
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg)
    ids = torch.randint(5, 100, (2, 12))

    def run(fast: bool):
        monkeypatch.setattr(ops, "_ONEDNN", fast)
        monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)
        monkeypatch.setattr(ops, "ONEDNN_MIN_TRAIN_WEIGHT", 0)
        with torch.no_grad():
            traced = model.eval()(ids, trace=True)
        out = model.train()(ids)
        grads = torch.autograd.grad(out.mlm_logits.square().mean() + out.nsp_logits.sum(), model.parameters())
        return traced, grads

    (fast, fast_grads), (plain, plain_grads) = run(True), run(False)
    torch.testing.assert_close(fast.mlm_logits, plain.mlm_logits, atol=1e-5, rtol=1e-5)
    for a, b in zip(fast.trace, plain.trace, strict=True):
        for name in ("q", "k", "v", "scores", "weights", "context"):
            torch.testing.assert_close(getattr(a, name), getattr(b, name), atol=1e-5, rtol=1e-5, msg=name)
    for a, b in zip(fast_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_zeroes_about_p_and_preserves_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(601, 667)  # 400,867 elements: not a multiple of the 4 per random draw
    y = ops.dropout(x, p, training=True)
    zeros = (y == 0).float().mean().item()
    assert y.shape == x.shape
    assert abs(zeros - p) < 0.005  # about 6 standard deviations at this size
    assert abs(y.mean().item() - 1.0) < 0.01
    torch.testing.assert_close(y[y != 0], torch.full_like(y[y != 0], 1.0 / (1.0 - p)))


@pytest.mark.parametrize("p", [1e-7, 0.999999])
def test_dropout_at_the_ends_of_its_resolution_keeps_a_valid_mask(p):
    torch.manual_seed(1)
    y = ops.dropout(torch.ones(1000, 1000), p, training=True)
    kept = y != 0
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1.0 / (1.0 - p)))
    assert abs((~kept).float().mean().item() - max(p, 2**-16)) < 0.002


def test_dropout_is_the_identity_outside_training_or_at_p_zero():
    x = torch.randn(4, 5)
    assert ops.dropout(x, 0.3, training=False) is x
    assert ops.dropout(x, 0.0, training=True) is x
