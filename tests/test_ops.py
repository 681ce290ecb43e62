"""The fast CPU ops: the oneDNN linear equals F.linear (and is really taken), the dropout sampler's statistics."""

import pytest
import torch
import torch.nn.functional as F

from bertviz_lab.bert import ops

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                  reason="this PyTorch build has no oneDNN (mkldnn), so only the plain path exists")

SHAPES = [  # (input shape, d_out); rows = product of all dims but the last
    ((12,), 5),  # 1-D: one row
    ((ops.ROW_BUCKET, 8), 6),  # rows a multiple of ROW_BUCKET: no padding
    ((5, 8), 3),  # rows not a multiple: padded, then cut back
    ((2, ops.ROW_BUCKET, 12), 7),  # 3-D, 32 rows
    ((3, 7, 12), 9),  # 3-D, 21 rows
]


@pytest.fixture
def onednn_calls(monkeypatch):
    """Counts the calls that reach the oneDNN path (and still runs it); every size of weight may take it."""
    monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)
    calls = []
    real = ops._onednn_linear

    def spy(*args):
        calls.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(ops, "_onednn_linear", spy)
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
def test_onednn_path_is_taken_and_equals_f_linear(onednn_calls, seed, shape, d_out, bias):
    x, weight, b = random_linear(shape, d_out, bias, seed)
    out = ops.linear(x, weight, b, ops.PackedWeightCache())
    assert onednn_calls == [x.shape]
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
    b.add_(1.0)  # the bias is packed too
    torch.testing.assert_close(ops.linear(x, weight, b, cache), F.linear(x, weight, b))
    assert len(onednn_calls) == 3


@pytest.mark.parametrize("needs_grad", ["input", "weight"])
def test_autograd_takes_the_plain_path(onednn_calls, needs_grad):
    x, weight, b = random_linear((3, 7, 12), 9, True, seed=3)
    (x if needs_grad == "input" else weight).requires_grad_(True)
    out = ops.linear(x, weight, b, ops.PackedWeightCache())
    out.sum().backward()
    assert onednn_calls == [] and out.grad_fn is not None
    grad = x.grad if needs_grad == "input" else weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_training_mode_linear_takes_the_plain_path(onednn_calls):
    layer = ops.Linear(8, 4)  # parameters require grad, so a forward with grad enabled builds a graph
    x = torch.randn(5, 8)
    torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert onednn_calls == []
    with torch.no_grad():
        layer(x)
    assert len(onednn_calls) == (1 if torch.backends.mkldnn.is_available() else 0)


@needs_onednn
def test_only_a_big_weight_takes_the_onednn_path(monkeypatch):
    calls = []
    real = ops._onednn_linear
    monkeypatch.setattr(ops, "_onednn_linear", lambda *args: calls.append(args[1].shape) or real(*args))
    with torch.no_grad():
        for d_in, d_out in [(256, 1024), (768, 768), (768, 3072), (3072, 768)]:  # mini's FFN, base's Q/K/V/O, FFN
            x, weight, b = random_linear((1, 9, d_in), d_out, True, seed=d_in)
            torch.testing.assert_close(ops.linear(x, weight, b, ops.PackedWeightCache()), F.linear(x, weight, b),
                                       rtol=1e-4, atol=1e-4)
    assert calls == [(3072, 768), (768, 3072)]  # 2.4M entries each; the others are under 2**21


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


def test_dropout_is_the_identity_outside_training_or_at_p_zero():
    x = torch.randn(4, 5)
    assert ops.dropout(x, 0.3, training=False) is x
    assert ops.dropout(x, 0.0, training=True) is x
