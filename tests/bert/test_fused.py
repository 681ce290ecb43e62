"""The fused MLM loss (bert/fused.py) gives the textbook loss, gradients and guesses (bert/losses.py)."""

import math

import pytest
import torch

from bertviz_lab.bert.fused import masked_lm_loss
from bertviz_lab.bert.losses import mlm_cross_entropy
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import loop
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer


@pytest.mark.parametrize("n, v, scale", [(7, 11, 1.0), (64, 500, 30.0), (1, 3, 1e-3)])
def test_the_fused_loss_is_cross_entropy_with_its_gradient_and_the_argmax(n, v, scale):
    g = torch.Generator().manual_seed(n)
    logits = (torch.randn(n, v, generator=g, dtype=torch.float64) * scale)  # float64: equal to rounding
    targets = torch.randint(v, (n,), generator=g)
    textbook = logits.clone().requires_grad_()
    mlm_cross_entropy(textbook, targets).mul(3.0).backward()  # an upstream gradient other than 1
    fused = logits.clone().requires_grad_()
    loss, guesses = masked_lm_loss(fused, targets)
    loss.mul(3.0).backward()
    torch.testing.assert_close(loss, mlm_cross_entropy(logits, targets), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused.grad, textbook.grad, rtol=1e-10, atol=1e-12)
    assert torch.equal(guesses, logits.argmax(-1))
    assert not guesses.requires_grad


def test_huge_logits_stay_finite_as_cross_entropy_does():
    logits = torch.tensor([[1000.0, -1000.0, 0.0], [-5e4, 5e4, 5e4]], requires_grad=True)
    targets = torch.tensor([1, 0])
    loss, guesses = masked_lm_loss(logits, targets)
    assert math.isfinite(loss.item())
    torch.testing.assert_close(loss, mlm_cross_entropy(logits.detach(), targets))
    loss.backward()
    assert torch.isfinite(logits.grad).all()
    assert guesses.tolist() == [0, 1]  # a tie goes to the first, as argmax


def test_no_masked_rows_give_nan_as_the_textbook_mean_over_nothing():
    loss, guesses = masked_lm_loss(torch.zeros(0, 5, requires_grad=True), torch.zeros(0, dtype=torch.long))
    assert math.isnan(loss.item()) and math.isnan(mlm_cross_entropy(torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)))
    assert guesses.shape == (0,)


def test_training_with_the_fused_loss_follows_the_textbook_loss(monkeypatch):
    """Ten steps of the tiny preset with each: the same losses and accuracies, step for step."""
    cfg = TrainConfig(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=10, lr=5e-3,
                      warmup=2, eval_every=5, eval_batches=1, device="cpu", threads=1)

    def history():
        trainer = Trainer(cfg)
        return [r for r in trainer.run() if r["kind"] in (TRAIN, EVAL)]

    fused = history()

    def textbook(logits, targets):
        return mlm_cross_entropy(logits, targets), logits.detach().argmax(-1)

    monkeypatch.setattr(loop, "masked_lm_loss", textbook)
    plain = history()
    assert len(fused) == len(plain) == 10 + 3
    for a, b in zip(fused, plain, strict=True):
        assert a["kind"] == b["kind"] and a["step"] == b["step"]
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
        assert a["acc"] == pytest.approx(b["acc"], abs=1e-9)
