"""The lab on a CUDA GPU (issue 38): bf16 pretraining that saves and resumes, a fine-tuning step, every page's
forward on the GPU, parity with `transformers` in fp32, and a two-process NCCL run. Skipped without a GPU
(select with -m cuda). Each test's body is a function of the device, so it can be checked on the CPU too:
`body(device="cpu", ...)` runs the same assertions there."""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.bert.precision import autocast_dtype
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import FineTuner
from bertviz_lab.finetune.tasks import PAIR, Example, Task
from bertviz_lab.metrics import TRAIN
from bertviz_lab.pretrain import runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.ui.shell import models
from bertviz_lab.views import inputs
from tests.helpers.family_models import build
from tests.helpers.lab import open_page
from tests.helpers.paths import ROOT
from tests.helpers.runs import torchrun

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

PAGES = sorted((ROOT / "pages").glob("*.py"))
SMALL = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=2, lr=5e-3, warmup=1,
             eval_every=1, eval_batches=1, checkpoint_every=10, threads=1)
GPU_FP32 = dict(atol=1e-4, rtol=0)  # fp32 on a GPU (TF32 off): other kernels and summation orders than the CPU's
PARITY = ["bert-cased", "bert-tanh", "distilbert", "roberta", "electra-discriminator", "albert"]
SENTENCES = [("the cat sat on the [MASK] .", None), ("The Cat sat on the mat .", "he sat by the river bank .")]
NO_SEGMENTS = ("distilbert", "roberta", "xlm-roberta")  # transformers' forward takes no token_type_ids


def on(device: str, module: torch.nn.Module) -> bool:
    """Every parameter of `module` sits on `device` ("cuda" means any GPU)."""
    return all(p.device.type == device for p in module.parameters())


def bf16_native(device: str) -> bool:
    return device == "cpu" or torch.cuda.get_device_capability() >= (8, 0)


# --- Pretraining: two bf16 steps, a save, a resume ---------------------------------------------------------
def pretrain_and_resume(device: str, run_dir: Path) -> None:
    cfg = TrainConfig(**SMALL, device=device, precision="bf16")
    first = Trainer(cfg, run_dir)
    records = list(first.run())
    train = [r for r in records if r["kind"] == TRAIN]
    assert records[-1]["status"] == "finished", records[-1]
    assert [r["step"] for r in train] == [1, 2] and all(math.isfinite(r["loss"]) for r in train), train
    assert on(device, first.model)
    if bf16_native(device):
        assert first.amp_dtype is torch.bfloat16
    saved = {k: v.detach().cpu().clone() for k, v in first.model.state_dict().items()}
    second = Trainer(replace(cfg, steps=3), run_dir, resume=True)
    assert second.step == 2 and on(device, second.model)
    for key, value in second.model.state_dict().items():
        torch.testing.assert_close(value.cpu(), saved[key], rtol=0, atol=0, msg=key)
    moments = [s["step"] for s in second.optimizer.state.values()]
    assert moments and all(int(step) == 2 for step in moments)  # AdamW's state came back with the weights
    rest = list(second.run())
    assert [r["step"] for r in rest if r["kind"] == TRAIN] == [3], rest
    assert rest[-1]["status"] == "finished" and rest[-1]["step"] == 3


def test_two_bf16_training_steps_save_and_resume_on_the_gpu(tmp_path):
    pretrain_and_resume("cuda", tmp_path / "run")


def test_autocast_is_bfloat16_on_a_gpu_with_bf16_units():
    device = torch.device("cuda")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("compute capability below 8.0: no bf16 units")
    assert autocast_dtype("auto", device) is torch.bfloat16
    assert autocast_dtype("bf16", device) is torch.bfloat16
    assert autocast_dtype("fp32", device) is None


# --- Fine-tuning: one step ------------------------------------------------------------------------------
def toy_task() -> Task:
    """Pairs whose label ("tired" or "happy") is in sentence B."""
    def example(i: int) -> Example:
        mood = "tired" if i % 2 else "happy"
        return Example(f"the cat sat on the mat {i % 7} .", f"it was {mood} .", label=mood)
    return Task("toy", PAIR, ("happy", "tired"), "toy pairs", tuple(example(i) for i in range(16)),
                tuple(example(i) for i in range(16, 20)))


def finetune_step(device: str) -> None:
    cfg = FinetuneConfig(task="acceptability", scratch="tiny", layers=1, hidden=32, heads=2, seq_len=32,
                         batch_size=8, steps=2, lr=3e-3, warmup=1, device=device, threads=1)
    tuner = FineTuner(cfg, task=toy_task())
    assert on(device, tuner.model)
    before = {k: v.detach().clone() for k, v in tuner.model.state_dict().items()}
    metrics, healthy = tuner.train_step()
    assert healthy and metrics.step == 1 and math.isfinite(metrics.loss) and metrics.grad_norm > 0
    moved = [k for k, v in tuner.model.state_dict().items() if not torch.equal(v, before[k])]
    assert "classifier.weight" in moved and any(k.startswith("bert.") for k in moved)


def test_one_fine_tuning_step_on_the_gpu():
    finetune_step("cuda")


# --- Every page, its model on the GPU ----------------------------------------------------------------------
def page_on(device: str, page: Path, monkeypatch: pytest.MonkeyPatch, runs_dir: Path) -> None:
    """Open `page` with the device picker on `device`: it raises nothing, and every model it asks the cache for
    is asked on `device` and sits there (a page that shows a model asks for one). Home runs as app.py's first
    page: its links need app.py's router."""
    asked = []

    def recording(path: str, where: str = "cpu"):
        ckpt = cached(path, where)
        asked.append((where, ckpt))
        return ckpt

    cached = models.cached_checkpoint
    monkeypatch.setenv("BERTVIZ_RUNS", str(runs_dir))  # the run pages list this empty folder, not the user's runs
    monkeypatch.setattr(models, "cached_checkpoint", recording)
    open_page(ROOT / "app.py" if page.stem == "home" else page, model__device=device)
    if "active_model()" in page.read_text(encoding="utf-8"):
        assert asked, f"{page.name} asked for no model"
    assert all(name == device and on(device, ckpt.model) for name, ckpt in asked), \
        [(name, next(ckpt.model.parameters()).device) for name, ckpt in asked]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_every_page_runs_its_model_on_the_gpu(page, monkeypatch, tmp_path):
    page_on("cuda", page, monkeypatch, tmp_path / "runs")


# --- Parity with transformers, fp32 on the GPU -----------------------------------------------------------
@contextlib.contextmanager
def full_fp32():
    """Matmuls in true fp32 (no TF32) for the block, whatever the process had before."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def parity(device: str, name: str, folder: Path) -> None:
    """Our model and transformers' on `device`: the same logits and attention weights, traced (our math path) and
    untraced (the fast path: fused attention on a GPU), and the same last hidden states in a padded batch."""
    hf, _ = build(name, folder)
    hf = hf.to(device).eval()
    ckpt = load_checkpoint(folder, device=device)
    assert on(device, ckpt.model) and on(device, hf)
    with full_fp32(), torch.no_grad():
        for text_a, text_b in SENTENCES:
            encoding = ckpt.tokenizer.encode(text_a, text_b)
            segments = {} if name in NO_SEGMENTS else {"token_type_ids": torch.tensor([encoding.segment_ids],
                                                                                      device=device)}
            theirs = hf(input_ids=torch.tensor([encoding.ids], device=device), output_attentions=True, **segments)
            expected = theirs.logits if ckpt.model.has_rtd or not hasattr(theirs, "prediction_logits") else \
                theirs.prediction_logits
            for trace in (True, False):
                out = inputs.run(ckpt.model, encoding, trace=trace)
                torch.testing.assert_close(out.rtd_logits if ckpt.model.has_rtd else out.mlm_logits, expected,
                                           **GPU_FP32)
            assert len(out.hidden_states) == len(theirs.attentions) + 1
            for steps, weights in zip(inputs.run(ckpt.model, encoding, trace=True).trace, theirs.attentions):
                torch.testing.assert_close(steps.weights, weights, **GPU_FP32)
        batch = inputs.pad_batch([ckpt.tokenizer.encode(a, b) for a, b in SENTENCES], ckpt.tokenizer.pad_id, device)
        segments = {} if name in NO_SEGMENTS else {"token_type_ids": batch.segments}
        mine = inputs.run_batch(ckpt.model, batch)
        theirs = hf(input_ids=batch.ids, attention_mask=batch.attention_mask, output_hidden_states=True, **segments)
        real = batch.attention_mask.bool()
        torch.testing.assert_close(mine.hidden_states[-1][real], theirs.hidden_states[-1][real], **GPU_FP32)


@pytest.mark.parametrize("name", PARITY)
def test_fp32_parity_with_transformers_on_the_gpu(name, tmp_path):
    parity("cuda", name, tmp_path / name)


# --- Two processes, NCCL ----------------------------------------------------------------------------------
def two_processes(device: str, tmp_path: Path) -> None:
    """`torchrun --nproc_per_node=2 -m bertviz_lab train --device DEVICE`: NCCL on GPUs (gloo on the CPU); rank 0
    writes the run, trained on its own GPU, cuda:0."""
    run_dir = tmp_path / "ddp"
    status, outputs = torchrun(tmp_path, "train", "--run-dir", str(run_dir), "--preset", "tiny", "--hidden", "32",
                               "--heads", "2", "--layers", "2", "--batch-size", "4", "--seq-len", "32", "--steps", "6",
                               "--eval-every", "3", "--eval-batches", "1", "--device", device)
    if status != 0:
        everything = "\n".join(f"----- {name} -----\n{text}" for name, text in outputs.items())
        pytest.fail(f"torchrun exited with {status}\n{everything}", pytrace=False)
    info = runs.read(run_dir)
    assert info.status == "finished" and info.step == 6, info.message
    assert len(runs.read_metrics(run_dir, kind=TRAIN)) == 6  # rank 0 alone writes
    card = load_checkpoint(info.checkpoint).card
    assert card["steps"] == 6 and card["device"] == ("cuda:0" if device == "cuda" else device)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_torchrun_two_processes_with_nccl(tmp_path):
    two_processes("cuda", tmp_path)
