"""MLM and NSP losses: the plain ones equal cross-entropy worked by hand, the checked ones return them
exactly, and their records agree with PyTorch's cross_entropy."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from bertviz_lab.bert.losses import (
    IGNORE_INDEX,
    IS_NEXT,
    NOT_NEXT,
    MLMRecord,
    NSPRecord,
    mlm_cross_entropy,
    mlm_loss,
    nsp_cross_entropy,
    nsp_loss,
    total_loss,
)
from bertviz_lab.errors import InputError

B, T, V = 4, 12, 50


@pytest.fixture
def dense():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(B, T, V, generator=g) * 3  # (B, T, V) spread out, so ranks vary
    labels = torch.randint(0, V, (B, T), generator=g)  # (B, T)
    labels[torch.rand(B, T, generator=g) >= 0.3] = -100
    labels[0, 0] = 7  # at least one masked position whatever the draw
    return logits, labels


def by_hand(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """-log softmax at the true token, per labelled position (IGNORE_INDEX skipped), in float64."""
    keep = labels != IGNORE_INDEX
    rows, true = logits[keep].double(), labels[keep]  # (M, V), (M,)
    return torch.logsumexp(rows, dim=1) - rows.gather(1, true[:, None]).squeeze(1)  # (M,)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_plain_mlm_loss_is_cross_entropy_in_both_forms(dense, reduction):
    logits, labels = dense
    expected = getattr(by_hand(logits, labels), reduction)()
    # PyTorch's own (B, V, T) form of cross_entropy, a different path from our flattened one
    torch_form = F.cross_entropy(logits.permute(0, 2, 1), labels, ignore_index=-100, reduction=reduction)
    where = labels != IGNORE_INDEX
    dense_loss = mlm_cross_entropy(logits, labels, reduction)  # (B, T, V) with (B, T)
    sparse_loss = mlm_cross_entropy(logits[where], labels[where], reduction)  # (N, V) with (N,)
    single = mlm_cross_entropy(logits[0], labels[0], reduction)  # (T, V) with (T,)
    for loss in (dense_loss, sparse_loss, torch_form):
        assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert single.item() == pytest.approx(getattr(by_hand(logits[0], labels[0]), reduction)().item(), rel=1e-6)


def test_plain_mlm_loss_learns_only_at_masked_positions(dense):
    logits, labels = dense
    logits = logits.clone().requires_grad_(True)
    mlm_cross_entropy(logits, labels).backward()
    masked = labels != IGNORE_INDEX
    assert (logits.grad[~masked] == 0).all() and (logits.grad[masked].abs().sum(-1) > 0).all()


def test_plain_nsp_loss_is_cross_entropy():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(5, 2, generator=g) * 2  # (B, 2)
    labels = torch.tensor([IS_NEXT, NOT_NEXT, NOT_NEXT, IS_NEXT, NOT_NEXT])
    expected = -logits.double().log_softmax(dim=1).gather(1, labels[:, None]).mean()
    assert nsp_cross_entropy(logits, labels).item() == pytest.approx(expected.item(), rel=1e-6)


def test_checked_losses_return_the_plain_losses_exactly(dense):
    # One definition: the page's losses and the trainer's are the same numbers, bit for bit.
    logits, labels = dense
    for reduction in ("mean", "sum"):
        checked, _ = mlm_loss(logits, labels, reduction=reduction)
        assert torch.equal(checked, mlm_cross_entropy(logits, labels, reduction))
    where = labels != IGNORE_INDEX
    assert torch.equal(mlm_loss(logits[where], labels[where])[0], mlm_cross_entropy(logits[where], labels[where]))
    nsp_logits, nsp_labels = logits[:, 0, :2], torch.tensor([0, 1, 1, 0])  # (B, 2), (B,)
    loss, record = nsp_loss(nsp_logits, nsp_labels)
    assert torch.equal(loss, nsp_cross_entropy(nsp_logits, nsp_labels))
    assert record.loss == pytest.approx(loss.item(), rel=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_loss_matches_cross_entropy(dense, reduction):
    logits, labels = dense
    loss, record = mlm_loss(logits, labels, reduction=reduction)
    expected = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100,
                               reduction=reduction)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    for reference in (logits, logits.double()):  # float32 as trained, float64 as displayed
        flat, flat_labels = reference.reshape(-1, V), labels.reshape(-1)
        mean = F.cross_entropy(flat, flat_labels, ignore_index=-100, reduction="mean")
        total = F.cross_entropy(flat, flat_labels, ignore_index=-100, reduction="sum")
        assert record.loss_mean == pytest.approx(mean.item(), abs=1e-6)
        # A float32 sum near 100 is only good to its last bit (~8e-6), hence rel as well.
        assert record.loss_sum == pytest.approx(total.item(), abs=1e-6, rel=1e-6)
    assert record.count == (labels != -100).sum().item()
    assert isinstance(record, MLMRecord)


def test_per_position_numbers(dense):
    logits, labels = dense
    _, record = mlm_loss(logits, labels, top_k=5)
    per_position = F.cross_entropy(logits.permute(0, 2, 1), labels, ignore_index=-100, reduction="none")
    probs = logits.double().softmax(dim=-1)  # (B, T, V)
    masked = (labels != -100).nonzero().tolist()
    assert [[p.batch_index, p.position] for p in record.predictions] == masked
    for p in record.predictions:
        row = logits[p.batch_index, p.position]
        assert p.true_id == labels[p.batch_index, p.position].item()
        assert p.true_token == str(p.true_id)
        expected = per_position[p.batch_index, p.position].item()  # float32, so relative accuracy
        assert p.neg_log_p == pytest.approx(expected, abs=1e-6, rel=1e-6)
        assert p.p_true == pytest.approx(math.exp(-p.neg_log_p), rel=1e-12)
        assert p.neg_log_p == pytest.approx(p.logsumexp - p.true_logit, abs=1e-12)
        assert p.true_logit == pytest.approx(row[p.true_id].item())
        assert p.top_probs == sorted(p.top_probs, reverse=True)
        assert p.top_ids == row.topk(5).indices.tolist()
        assert p.top_tokens == [str(i) for i in p.top_ids]
        assert p.top_probs == pytest.approx(probs[p.batch_index, p.position, p.top_ids].tolist())
        assert probs[p.batch_index, p.position].sum().item() == pytest.approx(1.0, abs=1e-12)
        assert p.rank == 1 + (row > row[p.true_id]).sum().item()
        assert (p.rank == 1) == (p.top_ids[0] == p.true_id)


def test_rank_and_top_k_clipped():
    logits = torch.tensor([[0.1, 3.0, 2.0]])  # true token 2 is second best
    _, record = mlm_loss(logits, torch.tensor([2]), top_k=10, id_to_token=lambda i: "abc"[i])
    p = record.predictions[0]
    assert p.rank == 2
    assert p.top_ids == [1, 2, 0] and p.top_tokens == ["b", "c", "a"]
    assert sum(p.top_probs) == pytest.approx(1.0, abs=1e-12)


def test_sparse_form_equals_dense(dense):
    logits, labels = dense
    where = labels != -100
    dense_loss, dense_record = mlm_loss(logits, labels)
    sparse_loss, sparse_record = mlm_loss(logits[where], labels[where])  # (N, V), (N,)
    assert sparse_loss.item() == pytest.approx(dense_loss.item(), abs=1e-6)
    assert sparse_record.loss_mean == pytest.approx(dense_record.loss_mean, abs=1e-12)
    assert sparse_record.loss_sum == pytest.approx(dense_record.loss_sum, abs=1e-12)
    for s, d in zip(sparse_record.predictions, dense_record.predictions, strict=True):
        assert (s.true_id, s.top_ids, s.rank) == (d.true_id, d.top_ids, d.rank)
        assert s.neg_log_p == pytest.approx(d.neg_log_p, abs=1e-12)
    assert [p.position for p in sparse_record.predictions] == list(range(int(where.sum())))
    assert {p.batch_index for p in sparse_record.predictions} == {0}


def test_single_sequence_form(dense):
    logits, labels = dense
    loss, record = mlm_loss(logits[1], labels[1] if (labels[1] != -100).any() else labels[0])
    assert loss.dim() == 0 and record.count >= 1
    assert {p.batch_index for p in record.predictions} == {0}


def test_loss_is_differentiable(dense):
    logits, labels = dense
    logits = logits.clone().requires_grad_(True)
    loss, _ = mlm_loss(logits, labels)
    loss.backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    assert (logits.grad[labels == -100] == 0).all()  # unmasked positions teach nothing


def test_seed_000_worked_example():
    values = [2.5, 0.3, 0.8, 0.1, -0.2, 0.5]
    p_true = math.exp(2.5) / sum(math.exp(v) for v in values)
    loss, record = mlm_loss(torch.tensor([values]), torch.tensor([0]))
    p = record.predictions[0]
    assert p.p_true == pytest.approx(p_true, abs=1e-7)
    assert p.neg_log_p == pytest.approx(-math.log(p_true), abs=1e-7)
    assert loss.item() == pytest.approx(-math.log(p_true), abs=1e-6)
    assert p.p_true == pytest.approx(0.63, abs=1e-3) and p.rank == 1
    assert p.logsumexp == pytest.approx(math.log(sum(math.exp(v) for v in values)), abs=1e-7)


def test_no_masked_positions():
    with pytest.raises(InputError, match="no masked positions"):
        mlm_loss(torch.zeros(2, 3, 5), torch.full((2, 3), -100))


@pytest.mark.parametrize("logits, labels, field", [
    (torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long), "do not match"),
    (torch.zeros(3, 5), torch.tensor([0, 5, -100]), "vocabulary size"),
    (torch.zeros(3, 5), torch.tensor([0, -1, -100]), "labels"),
    (torch.zeros(3, 5, dtype=torch.long), torch.tensor([0, 1, 2]), "logits"),
])
def test_bad_mlm_inputs(logits, labels, field):
    with pytest.raises(InputError, match=field):
        mlm_loss(logits, labels)


def test_bad_options():
    with pytest.raises(InputError, match="reduction"):
        mlm_loss(torch.zeros(1, 5), torch.tensor([0]), reduction="none")
    with pytest.raises(InputError, match="top_k"):
        mlm_loss(torch.zeros(1, 5), torch.tensor([0]), top_k=0)


def test_nsp_matches_cross_entropy():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(6, 2, generator=g) * 2).requires_grad_(True)
    labels = torch.tensor([0, 1, 1, 0, 0, 1])
    loss, record = nsp_loss(logits, labels)
    assert isinstance(record, NSPRecord)
    assert loss.item() == pytest.approx(F.cross_entropy(logits, labels).item(), abs=1e-6)
    assert record.loss == pytest.approx(loss.item(), abs=1e-6)
    per_example = F.cross_entropy(logits, labels, reduction="none")
    assert record.neg_log_p == pytest.approx(per_example.tolist(), abs=1e-6)
    assert record.p_is_next == pytest.approx(logits.softmax(dim=1)[:, 0].tolist(), abs=1e-6)
    assert record.labels == labels.tolist()
    assert [x for row in record.logits for x in row] == pytest.approx(logits.flatten().tolist())
    loss.backward()
    assert logits.grad is not None


def test_nsp_single_example_and_bad_labels():
    loss, record = nsp_loss(torch.tensor([1.0, -1.0]), torch.tensor(1))
    assert record.labels == [1]
    assert loss.item() == pytest.approx(math.log1p(math.exp(2.0)), abs=1e-6)
    with pytest.raises(InputError, match="labels"):
        nsp_loss(torch.zeros(2, 2), torch.tensor([0, 2]))
    with pytest.raises(InputError, match="nsp_logits"):
        nsp_loss(torch.zeros(2, 3), torch.tensor([0, 1]))


def test_total_loss(dense):
    logits, labels = dense
    _, mlm = mlm_loss(logits, labels)
    _, nsp = nsp_loss(torch.tensor([[0.5, -0.5]]), torch.tensor([0]))
    assert total_loss(mlm, nsp) == pytest.approx(mlm.loss_mean + nsp.loss)
    assert total_loss(mlm, None) == mlm.loss_mean
