"""The training step's fused operations: several textbook steps as one, for the same numbers in less time.
The textbook forms stay where they are defined (bert/losses.py); tests/bert/test_fused.py proves each fused form
gives their values and gradients.

`masked_lm_loss`: the MLM loss at the masked rows and the model's top guess at each, in one pass over the
logits and one back. The textbook form is `F.cross_entropy` (log-softmax, then the true token's term)
followed by `argmax` for the accuracy: four passes over the (N, V) logits forward and three back. Here a
row's max gives both the softmax's shift and the guess, exp(logit - max) is kept, and the backward pass
scales it in place into softmax - one-hot: forward and backward with the guesses in less than half the time.

What was tried and did not pay:
- dropout + residual in one `addcmul` before the LayerNorm: the same time either way; drawing the random mask
  is most of it.
- bias + GELU as oneDNN's post-op: the bias is already inside the matrix product, and the GELU's backward
  needs its input, which the fused product does not keep; for inference alone it saved a few percent.

Measured by python -m bench.train_throughput's shapes; figures in docs/benchmarks.md, "Inference and training
against transformers".
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


class _MaskedLMLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor):
        top, guesses = logits.max(-1)  # (N,) each row's largest score and where it is
        shifted = torch.sub(logits, top[:, None]).exp_()  # (N, V) exp(logit - max): softmax * its row sum
        sums = shifted.sum(-1)  # (N,)
        # -log p(true) = logsumexp - logit(true) = log(sum) + max - logit(true), averaged over the rows
        loss = (sums.log() + top - logits.gather(1, targets[:, None]).squeeze(1)).mean()
        ctx.save_for_backward(shifted, sums, targets)
        ctx.mark_non_differentiable(guesses)
        return loss, guesses

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_loss: torch.Tensor, _grad_guesses):
        shifted, sums, targets = ctx.saved_tensors
        n = shifted.shape[0]
        scale = grad_loss / n
        grad = shifted.mul_((scale / sums)[:, None])  # softmax * scale, in the saved buffer (used once)
        grad[torch.arange(n, device=grad.device), targets] -= scale  # minus the one-hot
        return grad, None


def masked_lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the mean of -log p(true token), differentiable; each row's top guess (N,)) for logits (N, V) at
    the masked rows and their true ids (N,): `losses.mlm_cross_entropy(logits, targets)` and
    `logits.argmax(-1)`. With no rows the loss is NaN, as cross_entropy's mean over nothing is."""
    if logits.shape[0] == 0:
        return logits.sum() / 0, torch.zeros(0, dtype=torch.long, device=logits.device)
    return _MaskedLMLoss.apply(logits, targets)
