"""The fast path (bert/fast.py, `model.fast = True`) computes what the textbook path (bert/model.py,
`model.fast = False`) computes: the same MLM, NSP and RTD logits, attention steps, hidden states and parameter
gradients, in float64 to 1e-9 and in float32 (oneDNN kernels on) to 1e-5 of each tensor's scale, on small
random models of each family's shape, under every mask a page or the trainer uses."""

import pytest
import torch

from bertviz_lab.bert import fast, ops
from bertviz_lab.bert.attention import MASK_VALUE
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining

B, T, V = 3, 12, 60
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-5}
ELECTRA = {"mlm_head": False, "nsp_head": False, "pooler": False, "rtd_head": True}

# name: (the model's config changes and heads, the forward's masks); every case but "no mask" pads
CASES = {
    "no mask": ({}, {"padding": False}),
    "padding": ({}, {}),
    "causal": ({"num_attention_heads": 2, "hidden_act": "gelu_new"}, {"causal": True}),
    "head_mask": ({}, {"head_mask": True}),
    "sparse last layer": ({}, {"masked": True, "sparse_last_layer": True}),
    "sparse, causal, head_mask": ({"num_hidden_layers": 3}, {"masked": True, "sparse_last_layer": True,
                                                             "causal": True, "head_mask": True}),
    "ALBERT: shared layers, projected embeddings": (
        {"shared_layers": True, "embedding_size": 16, "num_hidden_layers": 3, "hidden_act": "gelu_new",
         "heads": {"nsp_head": False}}, {"masked": True, "sparse_last_layer": True}),
    "ELECTRA discriminator": ({"embedding_size": 16, "heads": ELECTRA}, {}),
    "RoBERTa: position offset, one segment": ({"pad_token_id": 1, "position_offset": 2, "type_vocab_size": 1}, {}),
    "DistilBERT: no segments": ({"type_vocab_size": 0}, {"masked": True}),
}


def model_of(seed: int, changes: dict) -> BertForPreTraining:
    changes = dict(changes)
    heads = changes.pop("heads", {})
    cfg = BertConfig(**{"vocab_size": V, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "intermediate_size": 48, "max_position_embeddings": 16, "initializer_range": 0.2,
                        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, **changes})
    torch.manual_seed(seed)
    model = BertForPreTraining(cfg, **heads)
    with torch.no_grad():  # LayerNorm gains away from 1 and biases away from 0, so each one matters
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


def inputs_of(cfg: BertConfig, seed: int, padding=True, causal=False, head_mask=False, masked=False,
              sparse_last_layer=False):
    """(input_ids, token_type_ids) and the forward's keyword arguments."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    segments = (torch.arange(T) >= T // 2).long().expand(B, T).clone()
    kwargs = {"causal": causal, "sparse_last_layer": sparse_last_layer}
    if padding:
        mask = torch.ones(B, T, dtype=torch.long)
        mask[1, 9:] = mask[2, 5:] = 0
        ids[mask == 0] = cfg.pad_token_id
        kwargs["attention_mask"] = mask
    if head_mask:
        kwargs["head_mask"] = torch.ones(cfg.num_hidden_layers, cfg.num_attention_heads)
        kwargs["head_mask"][0, 0] = kwargs["head_mask"][-1, 1] = 0
    if masked:
        where = (torch.rand(B, T, generator=g) < 0.3) & ids.ne(cfg.pad_token_id)
        where[:, 0] = where[2] = False
        where[2, 3] = True  # rows of unequal counts
        kwargs["masked_positions"] = where
    return ids, segments, kwargs


def run(model, is_fast: bool, backend: str, dtype, train: bool, ids, segments, **kwargs):
    """One forward (and, training, one backward of a fixed random mix of every output) on one path."""
    model.fast, model.attention_backend = is_fast, backend
    model.to(dtype).train(train)
    model.zero_grad(set_to_none=True)
    with torch.set_grad_enabled(train):
        out = model(ids, segments, **kwargs)
    if not train:
        return out, {}
    g = torch.Generator().manual_seed(7)
    mix = (t * torch.randn(t.shape, generator=g, dtype=torch.float64).to(dtype) for t in outputs(out).values())
    loss = sum(m.sum() for m in mix)
    loss.backward()
    return out, {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def outputs(out) -> dict[str, torch.Tensor]:
    """The logits and the pooled vector a forward gave."""
    named = {"mlm_logits": out.mlm_logits, "nsp_logits": out.nsp_logits, "rtd_logits": out.rtd_logits,
             "pooled": out.pooled}
    return {name: t for name, t in named.items() if t is not None}


def assert_near(actual: torch.Tensor, expected: torch.Tensor, dtype, what: str) -> None:
    """Equal to TOLERANCE[dtype] of the largest entry of `expected`."""
    scale = float(expected.detach().abs().max()) if expected.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=0, atol=TOLERANCE[dtype] * scale, msg=what)


@pytest.fixture(params=[torch.float64, torch.float32], ids=["float64", "float32"])
def dtype(request, monkeypatch):
    """float32 takes every oneDNN kernel, even for these small weights; float64 the F.linear fall-through."""
    monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)
    monkeypatch.setattr(ops, "ONEDNN_MIN_TRAIN_WEIGHT", 0)
    return request.param


@pytest.mark.parametrize("trace, backend", [(True, "math"), (False, "math"), (False, "sdpa")],
                         ids=["traced", "math", "sdpa"])  # traced, the fast path's attention is always math
@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_path_gives_the_textbook_outputs_and_attention(case, trace, backend, dtype):
    """Eval mode, no gradients: the pages' forward, on packed weights in float32."""
    changes, masks = CASES[case]
    model = model_of(seed=len(case), changes=changes)
    ids, segments, kwargs = inputs_of(model.config, seed=len(case), **masks)
    textbook, _ = run(model, False, backend, dtype, False, ids, segments, trace=trace, **kwargs)
    quick, _ = run(model, True, backend, dtype, False, ids, segments, trace=trace, **kwargs)
    assert outputs(quick).keys() == outputs(textbook).keys() != set()
    for name, expected in outputs(textbook).items():
        assert_near(outputs(quick)[name], expected, dtype, name)
    sparse = kwargs["sparse_last_layer"] and not trace  # the sparse layer's own hidden state is not kept
    assert len(textbook.hidden_states) == model.config.num_hidden_layers + 1
    assert len(quick.hidden_states) == len(textbook.hidden_states) - sparse
    for layer, (a, b) in enumerate(zip(quick.hidden_states, textbook.hidden_states, strict=False)):
        assert_near(a, b, dtype, f"hidden state {layer}")
    assert (quick.trace is None) is (textbook.trace is None) is (not trace)
    for layer, (a, b) in enumerate(zip(quick.trace or [], textbook.trace or [], strict=True)):
        for step in ("q", "k", "v", "scores", "weights", "context"):
            assert_near(getattr(a, step), getattr(b, step), dtype, f"layer {layer} {step}")
        assert torch.equal(a.mask, b.mask)  # additive: 0 where visible, MASK_VALUE where hidden
        hidden = (b.mask == MASK_VALUE).expand_as(b.scores)
        assert bool(hidden.any()) is ("attention_mask" in kwargs or kwargs["causal"])
        assert (b.weights[hidden] < 1e-30).all() and (a.weights[hidden] < 1e-30).all()


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_fast_path_gives_the_textbook_gradients(case, backend, dtype):
    """Training mode (dropout 0), as the trainer runs it: with masked_positions, the sparse last layer."""
    changes, masks = CASES[case]
    model = model_of(seed=len(case), changes=changes)
    ids, segments, kwargs = inputs_of(model.config, seed=len(case), **masks)
    textbook, textbook_grads = run(model, False, backend, dtype, True, ids, segments, **kwargs)
    quick, quick_grads = run(model, True, backend, dtype, True, ids, segments, **kwargs)
    assert outputs(quick).keys() == outputs(textbook).keys()
    for name, expected in outputs(textbook).items():
        assert_near(outputs(quick)[name], expected, dtype, name)
    assert set(quick_grads) == set(textbook_grads) != set()  # the same parameters trained, and no other
    # The key bias's gradient is 0 in exact arithmetic (q.b_k is the same for every key, which softmax
    # ignores): both paths give rounding noise, tiny beside the model's other gradients.
    noise = TOLERANCE[dtype] * max(float(g.abs().max()) for g in textbook_grads.values())
    for name, grad in textbook_grads.items():
        if name.endswith("attention.self.key.bias"):
            assert grad.abs().max() < noise and quick_grads[name].abs().max() < noise, name
        else:
            assert_near(quick_grads[name], grad, dtype, name)


def test_the_switch_picks_the_path(monkeypatch):
    model = model_of(seed=0, changes={}).eval()
    ids, segments, kwargs = inputs_of(model.config, seed=0, masked=True, sparse_last_layer=True)
    assert model.fast  # on by default: the speed the pages and the trainer were measured at

    def refuse(*_args, **_kwargs):
        raise AssertionError("the fast path ran")

    monkeypatch.setattr(fast, "forward", refuse)
    with pytest.raises(AssertionError, match="the fast path ran"):
        model(ids, segments, **kwargs)
    model.fast = False
    out = model(ids, segments, **kwargs)  # textbook: every row of the last layer, whatever sparse_last_layer says
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1


@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_a_frozen_encoder_drops_nothing_on_either_path(backend):
    """A linear probe trains its head with the encoder in eval mode (finetune/loop.py): with dropout in the
    config, both paths then give the encoder's one deterministic output, the textbook's, call after call."""
    model = model_of(seed=3, changes={"hidden_dropout_prob": 0.3, "attention_probs_dropout_prob": 0.3})
    ids, segments, kwargs = inputs_of(model.config, seed=3)
    model.attention_backend = backend
    model.train()
    model.bert.eval()
    with torch.no_grad():
        model.fast = False
        textbook = model(ids, segments, **kwargs).hidden_states[-1]
        model.fast = True
        first, second = (model(ids, segments, **kwargs).hidden_states[-1] for _ in range(2))
    assert_near(first, textbook, torch.float32, "fast, frozen encoder")
    assert torch.equal(first, second)
    model.bert.train()  # and training it does drop: the check above could fail
    with torch.no_grad():
        assert not torch.equal(model(ids, segments, **kwargs).hidden_states[-1], first)
