"""BERT's two pre-training losses, plus the numbers a teaching page shows for them.

Masked language model (MLM): at each masked position the model scores every
vocabulary token; the loss there is -log p(true token) under the softmax of
those scores, averaged over the masked positions (BERT's convention; the sum is
reported too, since some texts write L = -sum log p).

Next sentence prediction (NSP): two scores per example, index 0 = IsNext and
1 = NotNext (the order BERT and Hugging Face use); loss = -log p(label), mean.

Each loss is defined once, in `mlm_cross_entropy` and `nsp_cross_entropy`: plain
differentiable functions with no checks and no host sync, which the pretraining
loop calls every step. `mlm_loss` and `nsp_loss` validate their inputs, call
those same functions, and add a frozen record of plain Python numbers for
display, recomputed in float64 without gradients so the page can show e.g.
p = 0.000012 faithfully.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bertviz_lab.errors import InputError

# The label of a position the loss skips (an unmasked token, a word's later pieces, padding): torch's
# cross_entropy ignore_index default. Written once, here; every label tensor and file uses this name.
IGNORE_INDEX = -100
IS_NEXT, NOT_NEXT = 0, 1  # NSP label codes


@dataclass(frozen=True)
class MaskedPrediction:
    batch_index: int  # which sequence (0 for a single sequence or the sparse form)
    position: int  # token position in that sequence (row index in the sparse form)
    true_id: int
    true_token: str
    top_ids: list[int]  # the model's top-k guesses, best first
    top_tokens: list[str]
    top_logits: list[float]
    top_probs: list[float]
    true_logit: float
    logsumexp: float  # log of the softmax denominator: -log p = logsumexp - true_logit
    p_true: float
    neg_log_p: float  # this position's loss term
    rank: int  # rank of the true token, 1 = the model's top guess


@dataclass(frozen=True)
class MLMRecord:
    predictions: list[MaskedPrediction]
    loss_mean: float  # BERT's convention: mean over masked positions
    loss_sum: float  # the sum convention
    count: int  # number of masked positions


@dataclass(frozen=True)
class NSPRecord:
    logits: list[list[float]]  # (B, 2): index 0 = IsNext, 1 = NotNext
    p_is_next: list[float]
    labels: list[int]  # 0 = IsNext, 1 = NotNext
    neg_log_p: list[float]  # per example -log p(label)
    loss: float  # mean over the batch


def mlm_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """-log p(true token), averaged (or summed) over the masked positions; unchecked, no host sync.

    Dense form: logits (B, T, V) or (T, V), labels (B, T) or (T,) with IGNORE_INDEX
    at unmasked positions. Sparse form: logits (N, V) and labels (N,) already
    gathered at the masked positions, as the training loop's MLM head returns them.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),  # (N, V), (N,)
                           ignore_index=IGNORE_INDEX, reduction=reduction)


def nsp_cross_entropy(nsp_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """-log p(label) averaged over the pairs: nsp_logits (B, 2), labels (B,) of IS_NEXT / NOT_NEXT; unchecked."""
    return F.cross_entropy(nsp_logits, labels)


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor, *, reduction: str = "mean", top_k: int = 5,
             id_to_token: Callable[[int], str] | None = None) -> tuple[torch.Tensor, MLMRecord]:
    """Masked-LM cross-entropy and its per-position breakdown.

    Takes both forms of `mlm_cross_entropy`, after checking them. In the sparse
    form each prediction has batch_index 0 and position = its row index.
    """
    if reduction not in ("mean", "sum"):
        raise InputError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise InputError(f"top_k must be a positive integer, got {top_k!r}")
    labels = _check_mlm_inputs(logits, labels)
    length = labels.shape[-1]
    flat_logits = logits.reshape(-1, logits.shape[-1])  # (N, V) N = B*T in the dense form
    flat_labels = labels.reshape(-1)  # (N,)
    loss = mlm_cross_entropy(logits, labels, reduction)

    with torch.no_grad():
        where = (flat_labels != IGNORE_INDEX).nonzero().squeeze(1)  # (M,) flat indices of masked rows
        rows = flat_logits[where].detach().double()  # (M, V)
        true_ids = flat_labels[where]  # (M,)
        predictions = _predictions(rows, true_ids, where, length, min(top_k, rows.shape[1]),
                                   id_to_token or str)
    neg_log_p = sum(p.neg_log_p for p in predictions)
    record = MLMRecord(predictions=predictions, loss_mean=neg_log_p / len(predictions),
                       loss_sum=neg_log_p, count=len(predictions))
    return loss, record


def _predictions(rows: torch.Tensor, true_ids: torch.Tensor, where: torch.Tensor, length: int,
                 k: int, id_to_token: Callable[[int], str]) -> list[MaskedPrediction]:
    """One MaskedPrediction per masked row; all maths in float64, one .tolist() per field."""
    lse = torch.logsumexp(rows, dim=1)  # (M,)
    true_logit = rows.gather(1, true_ids.unsqueeze(1)).squeeze(1)  # (M,)
    neg_log_p = lse - true_logit  # (M,) equals -log_softmax(rows)[true]
    # Ties count in the true token's favour: rank = 1 + tokens scored strictly higher.
    rank = 1 + (rows > true_logit.unsqueeze(1)).sum(dim=1)  # (M,)
    top_logits, top_ids = rows.topk(k, dim=1)  # (M, k) each, best first
    top_probs = torch.exp(top_logits - lse.unsqueeze(1))  # (M, k)
    p_true = torch.exp(-neg_log_p)  # (M,)
    batch_index, position = (where // length).tolist(), (where % length).tolist()
    fields = zip(batch_index, position, true_ids.tolist(), top_ids.tolist(), top_logits.tolist(),
                 top_probs.tolist(), true_logit.tolist(), lse.tolist(), p_true.tolist(),
                 neg_log_p.tolist(), rank.tolist())
    return [MaskedPrediction(batch_index=b, position=t, true_id=i, true_token=id_to_token(i),
                             top_ids=ids, top_tokens=[id_to_token(j) for j in ids], top_logits=lg,
                             top_probs=pr, true_logit=tl, logsumexp=z, p_true=p, neg_log_p=n, rank=r)
            for b, t, i, ids, lg, pr, tl, z, p, n, r in fields]


def _check_mlm_inputs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Validate shapes and label values; return labels as a long tensor on the logits' device."""
    if not isinstance(logits, torch.Tensor) or not logits.dtype.is_floating_point:
        raise InputError("logits must be a floating-point torch tensor")
    labels = torch.as_tensor(labels, device=logits.device)
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise InputError(f"labels must hold integer token ids, got dtype {labels.dtype}")
    labels = labels.long()
    if labels.dim() not in (1, 2) or logits.shape[:-1] != labels.shape or logits.shape[-1] == 0:
        raise InputError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match: "
                         "expected (B, T, V) with (B, T), (T, V) with (T,), or (N, V) with (N,)")
    masked = labels[labels != IGNORE_INDEX]
    if masked.numel() == 0:
        raise InputError("no masked positions in labels: nothing to predict, so no MLM loss")
    if masked.min() < 0 or masked.max() >= logits.shape[-1]:
        raise InputError(f"labels must be {IGNORE_INDEX} or a token id below the vocabulary size {logits.shape[-1]}")
    return labels


def nsp_loss(nsp_logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, NSPRecord]:
    """Next-sentence cross-entropy: nsp_logits (B, 2) or (2,), labels (B,) or a scalar of 0/1."""
    if not isinstance(nsp_logits, torch.Tensor) or not nsp_logits.dtype.is_floating_point:
        raise InputError("nsp_logits must be a floating-point torch tensor")
    labels = torch.as_tensor(labels, device=nsp_logits.device)
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise InputError(f"labels must be 0 (IsNext) or 1 (NotNext), got dtype {labels.dtype}")
    if nsp_logits.dim() == 1:
        nsp_logits, labels = nsp_logits.unsqueeze(0), labels.reshape(1)  # (1, 2), (1,)
    labels = labels.long()
    if nsp_logits.dim() != 2 or nsp_logits.shape[1] != 2 or labels.shape != nsp_logits.shape[:1]:
        raise InputError(f"nsp_logits {tuple(nsp_logits.shape)} and labels {tuple(labels.shape)} "
                         "do not match: expected (B, 2) with (B,)")
    if labels.numel() == 0:
        raise InputError("labels is empty: NSP needs at least one sentence pair")
    if ((labels != IS_NEXT) & (labels != NOT_NEXT)).any():
        raise InputError("labels must be 0 (IsNext) or 1 (NotNext)")
    loss = nsp_cross_entropy(nsp_logits, labels)

    with torch.no_grad():
        scores = nsp_logits.detach().double()  # (B, 2)
        log_p = F.log_softmax(scores, dim=1)  # (B, 2)
        neg_log_p = -log_p.gather(1, labels.unsqueeze(1)).squeeze(1)  # (B,)
        record = NSPRecord(logits=scores.tolist(), p_is_next=log_p[:, IS_NEXT].exp().tolist(),
                           labels=labels.tolist(), neg_log_p=neg_log_p.tolist(),
                           loss=neg_log_p.mean().item())
    return loss, record


def total_loss(mlm: MLMRecord, nsp: NSPRecord | None) -> float:
    """BERT's pre-training objective: mean MLM loss plus mean NSP loss (NSP optional)."""
    return mlm.loss_mean + (nsp.loss if nsp is not None else 0.0)
