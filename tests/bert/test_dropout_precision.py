"""Dropout in every precision. ops.dropout (the fast path's CPU sampler) drops a share p of fp32, bf16 and fp16
inputs and scales the rest by 1 / (1 - p); a training step under bf16 or fp16 autocast with dropout reaches every
encoder weight, on the fast and the textbook path, and gives the fp32 step's gradients with the same masks.

Once the sampler made its 0/1 mask in the input's dtype: in bf16 and fp16 the two int16 bounds of p = 0.1 round
to one number, so every element was dropped and the encoder of a bf16 run never trained. A run's card says its
autocast, and a run resumed on the CPU keeps it."""

from __future__ import annotations

import json
import math

import pytest
import torch

from bertviz_lab.bert import ops, precision
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.metrics import CHECKPOINT
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
def test_dropout_drops_a_share_p_of_every_dtype_and_scales_the_rest(dtype, p):
    torch.manual_seed(0)
    x = torch.ones(601, 667, dtype=dtype)  # 400,867 elements
    y = ops.dropout(x, p, training=True)
    assert y.dtype == dtype and y.shape == x.shape
    dropped = (y == 0).double().mean().item()
    assert abs(dropped - p) < 6 * math.sqrt(p * (1 - p) / x.numel())  # six standard errors
    kept = y[y != 0]
    assert (kept == torch.tensor(1 / (1 - p)).to(dtype)).all()  # 1 / (1 - p) rounded once, to the dtype


def test_the_masks_are_the_same_in_every_dtype():
    """The random bits do not depend on the dtype, so a bf16 step and an fp32 step of one seed drop the same
    elements (the grid below compares their gradients)."""
    masks = []
    for dtype in DTYPES.values():
        torch.manual_seed(3)
        masks.append(ops.dropout(torch.ones(257, 33, dtype=dtype), 0.1, training=True) == 0)
    assert all(torch.equal(masks[0], m) for m in masks[1:])


def tiny_model(dropout: float) -> BertForPreTraining:
    cfg = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=48, max_position_embeddings=16, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    torch.manual_seed(0)
    return BertForPreTraining(cfg)


def step_gradients(fast: bool, precision: str, dropout: float) -> dict[str, torch.Tensor]:
    """One training forward and backward of the MLM and NSP logits under `precision`'s autocast, masks of seed 5."""
    model = tiny_model(dropout).train()
    model.fast = fast
    g = torch.Generator().manual_seed(1)
    ids, labels = torch.randint(5, 60, (4, 12), generator=g), torch.randint(5, 60, (4, 12), generator=g)
    amp = AUTOCAST[precision]
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
        out = model(ids)
    loss = (torch.nn.functional.cross_entropy(out.mlm_logits.float().flatten(0, 1), labels.flatten())
            + out.nsp_logits.float().logsumexp(-1).mean())
    scale = 2.0**12 if amp is torch.float16 else 1.0  # as the trainer's loss scaler does: fp16 gradients underflow
    (loss * scale).backward()
    return {name: p.grad / scale for name, p in model.named_parameters() if name.startswith("bert.encoder.")
            and not name.endswith("key.bias")}


# A key's bias adds the same amount to every score of a query, which the softmax ignores: its true gradient is 0
# (what a backward gives is rounding), so it is left out of the checks.


@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("precision", list(AUTOCAST))
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "textbook"])
def test_a_step_reaches_every_encoder_weight_in_every_precision(fast, precision, dropout):
    grads = step_gradients(fast, precision, dropout)
    assert len(grads) == 30  # 16 tensors a layer less the key's bias, 2 layers
    for name, grad in grads.items():
        assert grad is not None and torch.isfinite(grad).all(), name
        assert grad.abs().sum() > 0, f"{name}: no gradient under {precision} at dropout {dropout}"
    if precision == "fp32":
        return
    # the fp32 step with the same masks: close, to the half-precision products' rounding
    reference = step_gradients(fast, "fp32", dropout)
    for name, grad in grads.items():
        assert (grad - reference[name]).norm() <= 0.05 * reference[name].norm(), name


def test_a_bf16_training_step_of_the_trainer_reaches_every_encoder_weight():
    """The Trainer's own loss (sparse last layer, fused MLM loss) under bf16 autocast at dropout 0.1."""
    trainer = Trainer(TrainConfig(device="cpu", threads=1, precision="bf16", dropout=0.1, batch_size=8,
                                  eval_batches=1))
    assert trainer.amp_dtype is torch.bfloat16 and trainer.card()["autocast"] == "bf16"
    trainer.model.train()
    trainer.losses(trainer.model, trainer.batch(0)).loss.backward()
    encoder = {n: p.grad for n, p in trainer.model.named_parameters()
               if n.startswith("bert.encoder.") and not n.endswith("key.bias")}
    assert len(encoder) == 15 * trainer.model.config.num_hidden_layers
    assert all(g is not None and g.abs().sum() > 0 for g in encoder.values())


def test_a_run_resumed_on_the_cpu_keeps_the_autocast_auto_chose_when_it_began(tmp_path, monkeypatch):
    """On the CPU "auto" is a timing: a resume in a busier (or quieter) moment must not switch precision halfway."""
    cfg = TrainConfig(device="cpu", threads=1, batch_size=8, steps=4, eval_every=2, eval_batches=1,
                      checkpoint_every=2)
    monkeypatch.setattr(precision, "cpu_bf16_is_faster", lambda: False)  # the timing said fp32 when it began
    first = Trainer(cfg, tmp_path / "run")
    for record in first.run():
        if record["kind"] == CHECKPOINT and record["step"] == 2:
            first.stop_requested = True
    assert first.step == 2 and first.card()["autocast"] == "off"
    monkeypatch.setattr(precision, "cpu_bf16_is_faster", lambda: True)  # and bf16 at the resume
    assert Trainer(cfg, tmp_path / "run", resume=True).amp_dtype is None
    assert Trainer(cfg, tmp_path / "new").amp_dtype is torch.bfloat16  # a new run asks again
    card = tmp_path / "run" / "checkpoints" / "step-000002" / "model_card.json"
    card.write_text(json.dumps({k: v for k, v in json.loads(card.read_text()).items() if k != "autocast"}))
    assert Trainer(cfg, tmp_path / "run", resume=True).amp_dtype is torch.bfloat16  # an older card: asked again
