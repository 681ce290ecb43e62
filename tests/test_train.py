"""The training loop in-process: learning, determinism, divergence, evaluation, validation."""

import math

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import ConfigError
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer

TIMING = ("tokens_per_s", "elapsed")


def small(**changes) -> TrainConfig:
    base = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=30, lr=5e-3,
                warmup=3, eval_every=10, eval_batches=2, checkpoint_every=10, device="cpu", threads=1)
    return TrainConfig(**{**base, **changes})


def records(trainer, kinds=("train", "eval")):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in trainer.run() if r["kind"] in kinds]


def test_thirty_steps_lower_the_loss():
    result = records(Trainer(small()))
    train = [r for r in result if r["kind"] == "train"]
    evals = [r for r in result if r["kind"] == "eval"]
    assert len(train) == 30 and [e["step"] for e in evals] == [0, 10, 20, 30]
    first, last = sum(r["mlm_loss"] for r in train[:3]) / 3, sum(r["mlm_loss"] for r in train[-3:]) / 3
    assert last < first - 0.5
    assert evals[-1]["mlm_loss"] < evals[0]["mlm_loss"] - 0.5
    assert evals[0]["mlm_loss"] == pytest.approx(math.log(Trainer(small()).tokenizer.vocab_size), rel=0.1)
    assert all(0 <= e["mlm_top1"] <= e["mlm_top5"] <= 1 and 0 <= e["nsp_acc"] <= 1 for e in evals)


def test_learning_rate_warms_up_then_decays():
    lrs = [r["lr"] for r in records(Trainer(small(steps=10, warmup=4))) if r["kind"] == "train"]
    assert lrs[:4] == pytest.approx([5e-3 * k / 4 for k in (1, 2, 3, 4)])
    assert lrs[4:] == sorted(lrs[4:], reverse=True) and lrs[-1] < lrs[4]


def test_same_seed_same_run_and_other_seed_differs():
    a, b = records(Trainer(small(steps=8))), records(Trainer(small(steps=8)))
    c = records(Trainer(small(steps=8, seed=1)))
    assert a == b and a != c


def test_mlm_only_run_has_no_nsp_head(tmp_path):
    trainer = Trainer(small(steps=3, nsp=False), tmp_path)
    result = list(trainer.run())
    assert "nsp_loss" not in result[2] and result[-1]["status"] == "finished"
    ckpt = load_checkpoint(result[-2]["path"])
    assert ckpt.model.has_mlm and not ckpt.model.has_nsp


def test_gradient_accumulation_sees_every_micro_batch():
    trainer = Trainer(small(steps=2, grad_accum=2, batch_size=4))
    seen = []
    original = trainer.batch
    trainer.batch = lambda step, micro=0, stream=0: seen.append((step, micro, stream)) or original(step, micro, stream)
    list(trainer.run())
    assert [s for s in seen if s[2] == 0] == [(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]


def test_absurd_learning_rate_diverges_and_keeps_a_loadable_checkpoint(tmp_path):
    trainer = Trainer(small(lr=10.0, warmup=0, steps=200, grad_clip=0.0, checkpoint_every=1000), tmp_path)
    result = list(trainer.run())
    end = result[-1]
    assert end["status"] == "diverged" and "learning rate" in end["message"]
    saved = [r for r in result if r["kind"] == "checkpoint"]
    assert saved and saved[-1]["step"] < end["step"]
    model = load_checkpoint(saved[-1]["path"]).model
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("changes, field", [
    (dict(steps=0), "steps"), (dict(steps=-5), "steps"), (dict(lr=0), "lr"), (dict(lr=-1e-3), "lr"),
    (dict(batch_size=0), "batch_size"), (dict(mask_rate=0), "mask_rate"), (dict(mask_rate=1), "mask_rate"),
    (dict(mask_rate=1.5), "mask_rate"), (dict(hidden=100, heads=3), "heads"), (dict(seq_len=4), "seq_len"),
    (dict(warmup=-1), "warmup"), (dict(preset="huge"), "preset"), (dict(lr=float("nan")), "lr"),
])
def test_invalid_hyperparameters_name_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        small(**changes)
