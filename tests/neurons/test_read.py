"""read.py on a tiny random BERT: `run` is the model's forward (the same last hidden state as the fast path),
its edits touch exactly the entries they name and nothing else, gradients flow through it, a padded batch gives each
sentence's own activations, and autocast or bf16 weights stay within measured bounds of float32. Parity with
transformers, family by family, is test_parity.py's."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.errors import InputError
from bertviz_lab.explain.score import Score
from bertviz_lab.neurons.read import Edit, check_neuron, evaluate, one_sentence, run, sizes, twin

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

# The largest difference from float32 activations, as a share of their largest magnitude, on tiny_model at 12 random
# tokens, seeds 0-4 (/tmp measurement in the report): bf16 autocast 5.5e-3, fp16 autocast 7.5e-4, bf16 weights 7.3e-3
# (bf16 keeps 8 bits of mantissa, 2**-8 = 3.9e-3 per rounding; fp16 11). Bounds with about 3x margin.
LOW = {"bf16 autocast": 2e-2, "fp16 autocast": 3e-3, "bf16 weights": 2e-2}


def ids_of(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(5, 100, (1, n), generator=torch.Generator().manual_seed(seed))  # (1, n), no specials


def test_run_without_edits_is_the_models_forward(tiny_model):
    ids, segments = ids_of(9), torch.tensor([[0] * 5 + [1] * 4])
    mask = torch.ones_like(ids)
    assert tiny_model.fast
    with torch.no_grad():
        fast = tiny_model(ids, segments, mask).hidden_states[-1]
        out = run(twin(tiny_model), ids, segments, mask)
        other = run(twin(tiny_model), ids)  # segments default to 0: another input, another output
    np.testing.assert_allclose(out.hidden.numpy(), fast.numpy(), rtol=1e-5, atol=1e-5 * float(fast.abs().max()))
    assert (other.hidden - out.hidden).abs().max() > 1e-3
    assert sizes(tiny_model) == (2, 64)
    assert [a.shape for a in out.activations] == [(1, 9, 64)] * 2
    quiet = run(twin(tiny_model), ids, keep=False)
    assert quiet.activations == [] and torch.equal(quiet.hidden, other.hidden)


def test_run_refuses_the_fast_model(tiny_model):
    with pytest.raises(ValueError, match="twin"):
        run(tiny_model, ids_of(4))
    assert not twin(tiny_model).fast and tiny_model.fast  # the twin is a new object: the model stays fast


@pytest.mark.parametrize("layer", [-1, 2, True, "0", 0.0, None])
def test_a_layer_that_does_not_exist_is_one_sentence(tiny_model, layer):
    with pytest.raises(InputError) as caught:
        check_neuron(tiny_model, layer)
    assert str(caught.value) == f"layer {layer!r} does not exist: this model's layers are 0 to 1"


@pytest.mark.parametrize("neuron", [-1, 64, False, "3", 1.0])
def test_a_neuron_that_does_not_exist_is_one_sentence(tiny_model, neuron):
    with pytest.raises(InputError) as caught:
        check_neuron(tiny_model, 1, neuron)
    assert str(caught.value) == f"neuron {neuron!r} does not exist: each layer has neurons 0 to 63"
    check_neuron(tiny_model, 1, 63)  # the last of each exists
    check_neuron(tiny_model, 0)


def test_an_edit_replaces_exactly_its_entries():
    act = torch.randn(2, 6, 10)  # (B, T, d_ff)
    before = act.clone()
    out = Edit(0, (2, 7), (1.5, -4.0), positions=(1, 4))(act)
    assert torch.equal(act, before)  # a new tensor
    changed = torch.zeros_like(act, dtype=torch.bool)
    changed[:, [1, 4]] = torch.zeros(10, dtype=torch.bool).index_fill(0, torch.tensor([2, 7]), True)
    assert torch.equal(out[~changed], act[~changed])
    assert (out[:, [1, 4], 2] == 1.5).all() and (out[:, [1, 4], 7] == -4.0).all()
    off = Edit(0, (3,))(act)  # values None: switched off, every position
    assert not off[..., 3].any() and torch.equal(off[..., :3], act[..., :3]) and torch.equal(off[..., 4:], act[..., 4:])


def test_run_applies_an_edit_at_its_depth_and_positions(tiny_model):
    ids, others = ids_of(7), [0, 1, 2, 4, 5, 6]
    with torch.no_grad():
        clean = run(twin(tiny_model), ids)
        edited = run(twin(tiny_model), ids, edits=[Edit(1, (5,), (2.0,), (3,))])
        doubled = run(twin(tiny_model), ids, edits=[Edit(1, (5,), (2.0,), (3,))], hooks={1: lambda t: t * 2})
    torch.testing.assert_close(edited.activations[0], clean.activations[0], rtol=0, atol=0)  # below: untouched
    diff = edited.activations[1] != clean.activations[1]
    assert float(edited.activations[1][0, 3, 5]) == 2.0 and diff.nonzero().tolist() == [[0, 3, 5]]
    # the last layer's W_2 works token by token: its output moves at position 3 only
    assert (edited.hidden[0, 3] - clean.hidden[0, 3]).abs().max() > 1e-3
    torch.testing.assert_close(edited.hidden[0, others], clean.hidden[0, others], rtol=0, atol=1e-7)
    assert float(doubled.activations[1][0, 3, 5]) == 4.0  # a depth's hooks run after its edits


def test_gradients_flow_through_run(tiny_model):
    """The kept activation is what W_2 read: its gradient equals the finite difference of F when the entry is
    nudged by a hook (float64), and the gradient reaches the embeddings."""
    model = copy.deepcopy(tiny_model).double()
    ids, layer, score = ids_of(6), 0, Score(4, 7, 9, 100)
    out = run(twin(model), ids)
    out.activations[layer].retain_grad()
    f, _ = evaluate(model, out.hidden, score)
    f.sum().backward()
    grad = out.activations[layer].grad[0]  # (T, d_ff)
    assert model.bert.embeddings.word_embeddings.weight.grad[ids[0]].abs().amax(1).gt(0).all()
    position, neuron = divmod(int(grad.abs().argmax()), grad.shape[1])
    assert grad[[0, 1, 2, 3, 5]].abs().max() > 0  # other tokens' neurons reach F too, through attention

    def nudged(eps: float) -> float:
        def hook(t):
            t = t.clone()
            t[0, position, neuron] += eps
            return t

        with torch.no_grad():
            return float(evaluate(model, run(twin(model), ids, hooks={layer: hook}).hidden, score)[0])

    finite = (nudged(1e-3) - nudged(-1e-3)) / 2e-3
    assert abs(float(grad[position, neuron])) > 1e-3
    np.testing.assert_allclose(float(grad[position, neuron]), finite, rtol=1e-6)


def test_a_sentence_alone_equals_its_row_of_a_padded_batch(tiny_model):
    short, long = ids_of(5, 1), ids_of(8, 2)
    batch = torch.zeros(2, 8, dtype=torch.long)  # (B, T), 0 the padding
    batch[0, :5], batch[1] = short[0], long[0]
    mask = (torch.arange(8) < torch.tensor([[5], [8]])).long()
    with torch.no_grad():
        padded = run(twin(tiny_model), batch, attention_mask=mask)
    for row, ids in enumerate((short, long)):
        alone = one_sentence(tiny_model, ids)
        T = ids.shape[1]
        for layer, a in enumerate(alone):
            np.testing.assert_allclose(padded.activations[layer][row, :T].numpy(), a, rtol=0, atol=1e-6)
    with torch.no_grad():  # without the mask the padding is read: the short sentence's activations move
        unmasked = run(twin(tiny_model), batch)
    assert (unmasked.activations[1][0, :5] - padded.activations[1][0, :5]).abs().max() > 1e-4


def test_evaluate_reads_the_models_logits(tiny_model, tiny_config):
    ids = ids_of(6)
    with torch.no_grad():
        logits = tiny_model(ids).mlm_logits[0, 4].double()  # (V,)
        hidden = run(twin(tiny_model), ids).hidden
        f, p = evaluate(tiny_model, hidden, Score(4, 7, 9, 50))
        alone, _ = evaluate(tiny_model, hidden, Score(4, 7))
    assert f.dtype == torch.float64 and f.shape == (1,)
    np.testing.assert_allclose(float(f), float(logits[7] - logits[9]), rtol=1e-5)
    np.testing.assert_allclose(float(alone), float(logits[7]), rtol=1e-5)
    np.testing.assert_allclose(float(p), float(logits[:50].softmax(-1)[7]), rtol=1e-5)
    torch.manual_seed(1)
    electra = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False, rtd_head=True).eval()
    with torch.no_grad():
        rtd = electra(ids).rtd_logits[0, 2]
        f, p = evaluate(electra, run(twin(electra), ids).hidden, Score(2, None))
    np.testing.assert_allclose([float(f), float(p)], [float(rtd), float(torch.sigmoid(rtd))], rtol=1e-5)


@pytest.mark.parametrize("ids", [torch.zeros(2, 4, dtype=torch.long), torch.zeros(4, dtype=torch.long)])
def test_one_sentence_takes_one_sentence(tiny_model, ids):
    with pytest.raises(InputError, match=r"one sentence at a time: ids must be \(1, T\)"):
        one_sentence(tiny_model, ids)


def largest_share(low: list[np.ndarray], ref: list[np.ndarray]) -> float:
    """The largest difference over the layers, as a share of the largest float32 activation."""
    return max(float(np.abs(a - r).max()) for a, r in zip(low, ref)) / max(float(np.abs(r).max()) for r in ref)


def test_low_precision_stays_near_float32(tiny_model):
    ids = ids_of(12)
    ref = one_sentence(tiny_model, ids)
    for name, dtype in (("bf16 autocast", torch.bfloat16), ("fp16 autocast", torch.float16)):
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
            low = run(twin(tiny_model), ids).activations
        assert low[0].dtype == dtype  # autocast reached the layers
        low = [a[0].float().numpy() for a in low]
        share = largest_share(low, ref)
        assert 0 < share <= LOW[name], (name, share)
    weights = copy.deepcopy(tiny_model).to(torch.bfloat16)
    low = one_sentence(weights, ids)
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in low)
    assert 0 < largest_share(low, ref) <= LOW["bf16 weights"]
    with torch.no_grad():
        edited = run(twin(weights), ids, edits=[Edit(0, (1, 2), (0.5, 0.25), (3,))])
    assert edited.activations[0].dtype == torch.bfloat16 and float(edited.activations[0][0, 3, 1]) == 0.5
