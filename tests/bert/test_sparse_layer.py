"""sparse_last_layer: the last layer computed only at the rows the heads read gives the dense forward's
logits and gradients, in every model shape and mask the trainer can meet, and the trainer uses it."""

import pytest
import torch

from bertviz_lab.bert import fast, ops
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.fast import SPARSE_ROW_BUCKET, ReadRows
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.ops import adamw
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer

B, T, V = 3, 12, 60


def model_of(**changes) -> BertForPreTraining:
    heads = {k: changes.pop(k) for k in ("nsp_head", "pooler") if k in changes}
    cfg = BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=changes.pop("layers", 2), num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, **changes)
    torch.manual_seed(0)
    return BertForPreTraining(cfg, **heads)


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    segments = torch.zeros_like(ids)
    segments[:, T // 2:] = 1
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 9:] = 0  # a padded sequence
    masked = torch.rand(B, T, generator=g) < 0.3
    masked[:, 0] = False
    masked[1, 9:] = False
    masked[2] = False
    masked[2, 4] = True  # one sequence with a single masked word: rows of unequal counts
    return ids, segments, attention_mask, masked


def forward_and_grads(model, sparse: bool, **kwargs):
    ids, seg, am, masked = inputs()
    model.zero_grad(set_to_none=True)
    out = model(ids, seg, am, masked_positions=masked, sparse_last_layer=sparse, **kwargs)
    loss = out.mlm_logits.logsumexp(-1).sum()
    if out.nsp_logits is not None:
        loss = loss + out.nsp_logits.square().sum()
    loss.backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(("shape", "kwargs"), [
    ({}, {}),
    ({}, {"causal": True}),  # a visibility row per query: the picked rows' rows
    ({}, {"head_mask": torch.tensor([[1.0, 1, 1, 1], [1, 0, 1, 1]])}),  # the last layer with a head off
    ({"shared_layers": True, "layers": 3}, {}),  # ALBERT: one layer object at every depth
    ({"nsp_head": False, "pooler": False}, {}),  # an MLM-only model: no [CLS] row to read
    ({"layers": 1}, {}),  # the last layer is the first
    ({"backend": "sdpa"}, {}),  # the fused attention (CUDA's default): fewer queries than keys
    ({"backend": "sdpa"}, {"causal": True}),
])
def test_sparse_last_layer_gives_the_dense_logits_and_gradients(shape, kwargs):
    shape = dict(shape)
    backend = shape.pop("backend", "math")
    model = model_of(**shape).train()
    model.attention_backend = backend
    (dense, dense_grads), (sparse, sparse_grads) = (forward_and_grads(model, s, **kwargs) for s in (False, True))
    torch.testing.assert_close(sparse.mlm_logits, dense.mlm_logits, atol=1e-5, rtol=1e-5)
    if dense.nsp_logits is not None:
        torch.testing.assert_close(sparse.nsp_logits, dense.nsp_logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sparse.pooled, dense.pooled, atol=1e-5, rtol=1e-5)
    assert set(sparse_grads) == set(dense_grads)  # every parameter the dense forward trains, and no other
    for name, grad in dense_grads.items():
        torch.testing.assert_close(sparse_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
    # the hidden states it computed whole: the embeddings and every layer before the last
    assert len(sparse.hidden_states) == len(dense.hidden_states) - 1
    for a, b in zip(sparse.hidden_states, dense.hidden_states[:-1], strict=False):
        torch.testing.assert_close(a, b)


def test_the_last_layer_computes_only_the_read_rows(monkeypatch):
    model = model_of().train()
    ids, seg, am, masked = inputs()
    rows_seen = []
    norm = model.bert.encoder.layer[-1].output.LayerNorm  # the layer's last step
    norm.register_forward_hook(lambda _m, args, _out: rows_seen.append(args[0].shape[:-1]))
    model(ids, seg, am, masked_positions=masked, sparse_last_layer=True)
    read = int(masked.sum()) + B  # the masked positions and one [CLS] per sequence
    # ... padded to the bucket, so a run's row counts take a few shapes, not a new one each step
    assert rows_seen == [(-(-read // SPARSE_ROW_BUCKET) * SPARSE_ROW_BUCKET,)]
    assert read % SPARSE_ROW_BUCKET  # a test that pads nothing would prove nothing


def test_the_padded_rows_change_no_logit_and_no_gradient(monkeypatch):
    """The rows that pad the last layer to its bucket are read by nothing: the same logits and gradients
    whether the bucket is 1 (no padding) or 64."""
    model = model_of().train()
    results = []
    for bucket in (1, SPARSE_ROW_BUCKET):
        monkeypatch.setattr(fast, "SPARSE_ROW_BUCKET", bucket)
        results.append(forward_and_grads(model, True))
    (out_1, grads_1), (out_64, grads_64) = results
    torch.testing.assert_close(out_64.mlm_logits, out_1.mlm_logits, atol=1e-6, rtol=1e-5)
    for name, grad in grads_1.items():
        torch.testing.assert_close(grads_64[name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_read_rows_lists_each_sequences_rows_in_order():
    masked = torch.tensor([[False, False, True, False, True],
                           [False, False, False, False, False],
                           [True, False, False, False, False]])
    rows = ReadRows.of(masked, with_cls=True)
    assert rows.index.shape == (3, 3)  # the most any sequence reads: [CLS] and two masked words
    assert rows.index[rows.keep].tolist() == [0, 2, 4, 0, 0]  # sequence 2's [CLS] is also masked: one row
    assert rows.keep.tolist() == [[True, True, True], [True, False, False], [True, False, False]]
    assert rows.masked.tolist() == [False, True, True, False, True]
    assert rows.cls.tolist() == [True, False, False, True, True]
    no_cls = ReadRows.of(masked, with_cls=False)
    assert no_cls.index[no_cls.keep].tolist() == [2, 4, 0] and not no_cls.cls.any()
    # the same rows as padded indices: into the (B M) picked rows, then into the kept ones
    assert rows.kept.shape == (SPARSE_ROW_BUCKET,) and rows.kept[:5].tolist() == [0, 1, 2, 3, 6]
    assert rows.n_masked == 3 and rows.masked_rows[:3].tolist() == [1, 2, 4]
    assert rows.cls_rows.tolist() == [0, 3, 4]


def test_nothing_masked_gives_empty_logits_as_the_dense_path_does():
    model = model_of().eval()
    ids, seg, am, _ = inputs()
    nothing = torch.zeros(B, T, dtype=torch.bool)
    with torch.no_grad():
        dense = model(ids, seg, am, masked_positions=nothing)
        sparse = model(ids, seg, am, masked_positions=nothing, sparse_last_layer=True)
    assert sparse.mlm_logits.shape == dense.mlm_logits.shape == (0, V)
    torch.testing.assert_close(sparse.nsp_logits, dense.nsp_logits)


@pytest.mark.parametrize("kwargs", [{"trace": True}, {"encoder_only": True}, {}])
def test_without_masked_positions_or_with_trace_the_forward_is_whole(kwargs):
    model = model_of().eval()
    ids, seg, am, masked = inputs()
    positions = {} if not kwargs else {"masked_positions": masked}
    with torch.no_grad():
        out = model(ids, seg, am, sparse_last_layer=True, **positions, **kwargs)
    assert len(out.hidden_states) == 3 and out.hidden_states[-1].shape == (B, T, 32)


def test_inference_on_packed_weights_stays_right_across_dense_sparse_and_optimizer_steps(monkeypatch):
    """Held-out batches run sparse under no_grad on the packed oneDNN weights, the pages dense: each keeps
    its own packed copy, and a fused optimizer step drops both."""
    monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)
    model = model_of()
    ids, seg, am, masked = inputs()
    optimizer = adamw(model, [{"params": list(model.parameters())}], lr=1e-2)

    def both():
        with torch.no_grad():
            model.eval()
            return (model(ids, seg, am, masked_positions=masked).mlm_logits,
                    model(ids, seg, am, masked_positions=masked, sparse_last_layer=True).mlm_logits)

    for _ in range(2):
        dense, sparse = both()
        torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
        model.train()
        model(ids, seg, am, masked_positions=masked, sparse_last_layer=True).mlm_logits.square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    assert not torch.allclose(both()[1], sparse, atol=1e-3)  # the step moved the weights, and the logits


def test_the_trainers_losses_come_from_the_sparse_last_layer(monkeypatch):
    trainer = Trainer(TrainConfig(preset="tiny", hidden=32, heads=2, layers=2, batch_size=4, seq_len=16, steps=1,
                                  device="cpu", threads=1, precision="fp32"))
    calls = []
    original = fast.layer_rows
    monkeypatch.setattr(fast, "layer_rows", lambda *a, **k: calls.append(1) or original(*a, **k))
    batch = trainer.batch(0)
    out = trainer.losses(trainer.model, batch)
    assert calls == [1]
    selected = batch.labels != -100
    with torch.no_grad():
        dense = trainer.model(batch.input_ids, batch.token_type_ids, batch.attention_mask, masked_positions=selected)
    torch.testing.assert_close(out.mlm_logits, dense.mlm_logits, atol=1e-5, rtol=1e-5)
