"""The training loop in-process: learning, determinism, divergence, evaluation, validation."""

import json
import math
import subprocess
import sys

import pytest
import torch

from bertviz_lab.bert import masking, precision
from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.losses import IGNORE_INDEX
from bertviz_lab.errors import ConfigError
from bertviz_lab.metrics import CHECKPOINT, EVAL, TRAIN
from bertviz_lab.pretrain.config import TrainConfig, warmup_then_decay
from bertviz_lab.pretrain.data import Batch
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.pretrain.totals import BatchLosses, StepTotals
from tests.helpers.paths import ROOT
from tests.helpers.training import records, small
TRAIN_KEYS = {"kind", "step", "loss", "acc", "lr", "grad_norm", "tokens_per_s", "elapsed", "nsp_loss", "nsp_acc"}
EVAL_KEYS = {"kind", "step", "loss", "acc", "top5", "nsp_loss", "nsp_acc"}  # metrics.Metrics' names, as fine-tuning


def test_thirty_steps_lower_the_loss():
    result = records(Trainer(small()))
    train = [r for r in result if r["kind"] == TRAIN]
    evals = [r for r in result if r["kind"] == EVAL]
    assert len(train) == 30 and [e["step"] for e in evals] == [0, 10, 20, 30]
    first, last = sum(r["loss"] for r in train[:3]) / 3, sum(r["loss"] for r in train[-3:]) / 3
    assert last < first - 0.5
    assert evals[-1]["loss"] < evals[0]["loss"] - 0.5
    assert evals[0]["loss"] == pytest.approx(math.log(Trainer(small()).tokenizer.vocab_size), rel=0.1)
    assert all(0 <= e["acc"] <= e["top5"] <= 1 and 0 <= e["nsp_acc"] <= 1 for e in evals)


def test_learning_rate_warms_up_then_decays():
    lrs = [r["lr"] for r in records(Trainer(small(steps=10, warmup=4))) if r["kind"] == TRAIN]
    assert lrs[:4] == pytest.approx([5e-3 * k / 4 for k in (1, 2, 3, 4)])
    assert lrs[4:] == sorted(lrs[4:], reverse=True) and lrs[-1] < lrs[4]


def test_a_warmup_longer_than_the_run_still_reaches_the_peak_at_its_last_step():
    assert [warmup_then_decay(step, 10, 4) for step in range(5)] == [0.25, 0.5, 0.75, 1.0, 0.0]
    assert [warmup_then_decay(step, 0, 4) for step in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]
    lrs = [r["lr"] for r in records(Trainer(small(steps=4, warmup=10, eval_every=4))) if r["kind"] == TRAIN]
    assert lrs == pytest.approx([5e-3 * k / 4 for k in (1, 2, 3, 4)])


def test_same_seed_same_run_and_other_seed_differs():
    a, b = records(Trainer(small(steps=8))), records(Trainer(small(steps=8)))
    c = records(Trainer(small(steps=8, seed=1)))
    assert a == b and a != c


def test_a_fresh_process_runs_the_same_as_a_later_run_in_this_one(monkeypatch):
    # A process's first Trainer once drew other dropout masks: choosing the CPU precision timed
    # a random matmul on the global RNG after it was seeded. The CLI always runs a first Trainer.
    # That choice is a timing ("auto": bf16 where measured faster), so on a loaded machine the two processes may
    # choose differently; this one then takes the fresh process's choice, and the records must still agree.
    script = ("import json; from tests.helpers.training import small, records; from bertviz_lab.pretrain.loop import "
              "Trainer; from bertviz_lab.bert.precision import cpu_bf16_is_faster; "
              "print(json.dumps([records(Trainer(small(steps=3))), cpu_bf16_is_faster()]))")
    fresh = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           check=False)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    fresh_records, fresh_bf16 = json.loads(fresh.stdout)
    monkeypatch.setattr(precision, "cpu_bf16_is_faster", lambda: fresh_bf16)
    first, second = records(Trainer(small(steps=3))), records(Trainer(small(steps=3)))
    assert fresh_records == first == second


def test_choosing_the_cpu_precision_draws_nothing_from_the_global_generator():
    torch.manual_seed(0)
    precision.cpu_bf16_is_faster.__wrapped__()  # the timing itself, leaving this process's cached choice as it is
    after = torch.rand(4)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(4))


def test_records_keep_their_keys():
    result = list(Trainer(small(steps=3)).run())
    assert [set(r) for r in result if r["kind"] == TRAIN] == [TRAIN_KEYS] * 3
    assert [set(r) for r in result if r["kind"] == EVAL] == [EVAL_KEYS] * 2
    mlm_only = list(Trainer(small(steps=1, nsp=False)).run())
    assert [set(r) for r in mlm_only if r["kind"] == TRAIN] == [TRAIN_KEYS - {"nsp_loss", "nsp_acc"}]


def test_step_totals_count_micro_batches_and_round_trip_through_one_tensor():
    totals = StepTotals()
    for loss, hits in ((2.5, [1, 2, 0]), (1.25, [7, 3, 3])):
        logits = torch.nn.functional.one_hot(torch.tensor(hits), 10).float()  # (3, 10) guesses = hits
        out = BatchLosses(torch.tensor(loss), logits, torch.tensor([1, 2, 3]), torch.tensor(0.5), torch.tensor(4))
        ids = torch.zeros(6, 9, dtype=torch.long)  # 6 pairs of 9 tokens, 40 of them real
        batch = Batch(ids, ids, None, torch.full_like(ids, IGNORE_INDEX), torch.zeros(6, dtype=torch.long), 40)
        totals.add(out, batch)
    assert isinstance(totals.mlm_loss, torch.Tensor)  # still on the device: no host sync while counting
    packed = totals.packed(torch.device("cpu"))
    assert packed.shape == (7,) and packed.dtype == torch.float32
    back = StepTotals.unpacked(packed.tolist())
    assert back == StepTotals(mlm_loss=3.75, nsp_loss=1.0, mlm_correct=3, masked=6, nsp_correct=8, pairs=12,
                              tokens=80)
    assert StepTotals.unpacked(back.packed(torch.device("cpu")).tolist()) == back


def test_mlm_only_run_has_no_nsp_head(tmp_path):
    trainer = Trainer(small(steps=3, nsp=False), tmp_path)
    result = list(trainer.run())
    train = [r for r in result if r["kind"] == TRAIN]
    assert train and "nsp_loss" not in train[0] and result[-1]["status"] == "finished"
    ckpt = load_checkpoint([r for r in result if r["kind"] == CHECKPOINT][-1]["path"])
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
    saved = [r for r in result if r["kind"] == CHECKPOINT]
    assert saved and saved[-1]["step"] < end["step"]
    model = load_checkpoint(saved[-1]["path"]).model
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("changes, field", [
    (dict(steps=0), "steps"), (dict(steps=-5), "steps"), (dict(lr=0), "lr"), (dict(lr=-1e-3), "lr"),
    (dict(batch_size=0), "batch_size"), (dict(mask_rate=0), "mask_rate"), (dict(mask_rate=1), "mask_rate"),
    (dict(mask_rate=1.5), "mask_rate"), (dict(hidden=100, heads=3), "heads"), (dict(seq_len=4), "seq_len"),
    (dict(warmup=-1), "warmup"), (dict(preset="huge"), "preset"), (dict(lr=float("nan")), "lr"),
    (dict(random_tokens="special"), "random_tokens"), (dict(random_tokens=None), "random_tokens"),
])
def test_invalid_hyperparameters_name_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        small(**changes)


def test_random_tokens_default_to_the_whole_vocabulary_and_an_old_config_reads_as_wordpieces():
    assert TrainConfig().random_tokens == "vocabulary"  # as BERT, for every new run
    assert [small(random_tokens=option).random_tokens for option in masking.RANDOM_TOKENS] == list(masking.RANDOM_TOKENS)
    saved = small(random_tokens="wordpieces").to_dict()
    assert saved["random_tokens"] == "wordpieces" and TrainConfig.from_dict(saved) == small(random_tokens="wordpieces")
    old = {k: v for k, v in small().to_dict().items() if k != "random_tokens"}  # a run.json from before the setting
    assert TrainConfig.from_dict(old).random_tokens == "wordpieces"
    assert TrainConfig.from_dict({**old, "random_tokens": "vocabulary"}).random_tokens == "vocabulary"


def test_random_tokens_reach_the_batches_and_change_only_the_replacements():
    vocab, pieces = Trainer(small(steps=2)), Trainer(small(steps=2, random_tokens="wordpieces"))
    a, b = vocab.batch(0), pieces.batch(0)
    assert torch.equal(a.labels, b.labels)  # the same positions are picked...
    differ = a.input_ids != b.input_ids
    assert differ.any() and (a.labels[differ] != IGNORE_INDEX).all()  # ...only random replacements differ
    assert records(vocab) != records(pieces)


def test_inference_after_a_training_step_sees_the_new_weights(monkeypatch):
    """The fused AdamW step moves no version counter; the loop drops the model's packed copies instead."""
    from bertviz_lab.bert import ops

    monkeypatch.setattr(ops, "ONEDNN_MIN_WEIGHT", 0)  # every weight of the tiny model packed for inference
    trainer = Trainer(small(steps=2, lr=1e-2, warmup=0))
    model, batch = trainer.model, trainer.batch(0)

    def inference():
        with torch.no_grad():
            return model.eval()(batch.input_ids, batch.token_type_ids, batch.attention_mask).mlm_logits

    before = inference()  # packs every weight (where this PyTorch has oneDNN)
    trainer.train_step()
    after = inference()
    monkeypatch.setattr(ops, "_ONEDNN", False)
    torch.testing.assert_close(after, inference(), atol=1e-5, rtol=1e-5)  # the plain path reads the weights
    assert not torch.allclose(after, before, atol=1e-3)


def test_held_out_batches_are_made_once_and_training_batches_follow_the_step():
    from bertviz_lab.pretrain.loop import EVAL_STREAM
    trainer = Trainer(TrainConfig(hidden=32, heads=2, batch_size=4, seq_len=16, steps=3, device="cpu"))
    held_out = trainer.batch(0, stream=EVAL_STREAM)
    assert trainer.batch(0, stream=EVAL_STREAM) is held_out  # every evaluation reads the same batch
    assert not torch.equal(trainer.batch(1, stream=EVAL_STREAM).input_ids[:, :4], held_out.input_ids[:, :4])
    assert torch.equal(trainer.batch(2).input_ids, trainer.batch(2).input_ids)  # a pure function of the step
    assert trainer.evaluate() == trainer.evaluate()
