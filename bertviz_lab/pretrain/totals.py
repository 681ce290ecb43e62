"""A training step's numbers: the losses of one forward pass (`BatchLosses`) and the sums its metrics are
made of, over a step's micro-batches and ranks (`StepTotals`) and over the held-out batches (`EvalTotals`).
The loop (loop.py) fills them and turns each into a `Metrics` record (bertviz_lab/metrics.py)."""

from __future__ import annotations

from dataclasses import astuple, dataclass

import torch
import torch.distributed as dist

from bertviz_lab.metrics import EVAL, Metrics
from bertviz_lab.pretrain.data import Batch


@dataclass
class BatchLosses:
    """One forward pass: the losses to train on and what the metrics count (all on the device)."""
    mlm_loss: torch.Tensor  # () mean over the masked positions, differentiable
    mlm_logits: torch.Tensor  # (N, V) float32, detached: one row per masked position
    mlm_targets: torch.Tensor  # (N,) the true token ids
    nsp_loss: torch.Tensor | None = None  # () mean over the pairs, differentiable; None without NSP
    nsp_correct: torch.Tensor | None = None  # () pairs whose IsNext/NotNext guess is right
    mlm_guesses: torch.Tensor | None = None  # (N,) the top guess at each masked position; None: argmax of the logits

    @property
    def loss(self) -> torch.Tensor:
        """BERT's objective: MLM loss plus NSP loss."""
        return self.mlm_loss if self.nsp_loss is None else self.mlm_loss + self.nsp_loss


@dataclass
class StepTotals:
    """One optimizer step's metric sums over its micro-batches (and, after `all_reduce`, over ranks).

    While the step runs the losses and hit counts stay device tensors, so counting costs no host sync;
    `packed()` stacks the fields into one tensor, which DDP sums in one all_reduce and the record reads
    in one .tolist(); `unpacked()` builds back."""
    mlm_loss: torch.Tensor | float = 0.0  # sum of the micro-batches' mean MLM losses
    nsp_loss: torch.Tensor | float = 0.0  # the same for NSP; 0 without NSP
    mlm_correct: torch.Tensor | float = 0  # masked positions whose top guess is the true token
    masked: float = 0  # masked positions seen
    nsp_correct: torch.Tensor | float = 0  # pairs whose IsNext/NotNext guess is right
    pairs: float = 0  # sequences seen
    tokens: float = 0  # real (non-padding) tokens seen

    def add(self, out: BatchLosses, batch: Batch) -> None:
        self.mlm_loss = self.mlm_loss + out.mlm_loss.detach()
        guesses = out.mlm_logits.argmax(-1) if out.mlm_guesses is None else out.mlm_guesses
        self.mlm_correct = self.mlm_correct + (guesses == out.mlm_targets).sum()
        self.masked += out.mlm_targets.numel()
        self.pairs += len(batch.input_ids)
        self.tokens += batch.tokens
        if out.nsp_loss is not None:
            self.nsp_loss = self.nsp_loss + out.nsp_loss.detach()
            self.nsp_correct = self.nsp_correct + out.nsp_correct

    def packed(self, device: torch.device) -> torch.Tensor:
        """(7,) float32 on `device`, in field order."""
        return torch.stack([torch.as_tensor(v, dtype=torch.float32, device=device) for v in astuple(self)])

    @classmethod
    def unpacked(cls, values: list[float]) -> StepTotals:
        """From `packed(...).tolist()`: every field a Python float."""
        return cls(*values)

    @staticmethod
    def all_reduce(packed: torch.Tensor, world: int) -> None:
        """Sum a packed tensor over the ranks in place; the losses, each rank's own mean, are averaged."""
        dist.all_reduce(packed)
        packed[:2] /= world  # mlm_loss, nsp_loss: the first two fields


@dataclass
class EvalTotals:
    """Held-out sums over the evaluation batches, in Python numbers (evaluation is not the hot path)."""
    mlm_loss: float = 0.0  # sum of -log p over masked positions (each batch's mean times its count)
    top1: int = 0  # masked positions whose top guess is the true token
    top5: int = 0  # ... whose five best guesses include it
    masked: int = 0
    nsp_loss: float = 0.0  # sum of -log p(label) over pairs
    nsp_correct: int = 0
    pairs: int = 0  # sentence pairs scored for NSP

    def add(self, out: BatchLosses, pairs: int) -> None:
        n = out.mlm_targets.numel()
        top5 = out.mlm_logits.topk(min(5, out.mlm_logits.shape[-1]), dim=-1).indices  # (N, 5)
        hits = top5 == out.mlm_targets[:, None]  # (N, 5)
        self.mlm_loss += float(out.mlm_loss) * n
        self.top1 += int(hits[:, 0].sum())
        self.top5 += int(hits.any(-1).sum())
        self.masked += n
        if out.nsp_loss is not None:
            self.nsp_loss += float(out.nsp_loss) * pairs
            self.nsp_correct += int(out.nsp_correct)
            self.pairs += pairs

    def record(self, step: int) -> Metrics:
        m = max(self.masked, 1)
        nsp = dict(nsp_loss=self.nsp_loss / self.pairs, nsp_acc=self.nsp_correct / self.pairs) if self.pairs else {}
        return Metrics(EVAL, step, loss=self.mlm_loss / m, acc=self.top1 / m, top5=self.top5 / m, **nsp)
