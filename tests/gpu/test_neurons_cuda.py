"""The feed-forward neurons on a CUDA GPU (issue 55): the shipped model's activations there equal the CPU's within
1e-4 (fp32, TF32 off), and so do the logits after an edit (neurons switched off at every position, one set at one
position). The body is a function of the device: `test_the_body_on_the_cpu` runs the same assertions on the CPU, so it
keeps working on a machine without a GPU; on a GPU, `-m cuda` runs it there."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.neurons.read import Edit, one_sentence, run, twin
from tests.helpers.paths import ROOT

TEXT = "the children in the park [MASK] happy ."
DEVICE_TOL = 1e-4  # fp32 on the GPU against the CPU: other kernels, other summation orders


def logits_after(model, ids: torch.Tensor, edits) -> np.ndarray:
    with torch.no_grad():
        return model.mlm_head(run(twin(model), ids, edits=edits).hidden)[0].float().cpu().numpy()  # (T, V)


def body(device: str) -> None:
    matmul = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ckpt = load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")
        cpu = ckpt.model
        here = copy.deepcopy(cpu).to(device)
        ids = torch.tensor([ckpt.tokenizer.encode(TEXT).ids])
        there = one_sentence(here, ids.to(device))
        for a, b in zip(there, one_sentence(cpu, ids)):
            assert a.shape == b.shape and np.abs(b).max() > 0.1
            np.testing.assert_allclose(a, b, rtol=0, atol=DEVICE_TOL)
        position = int((ids[0] == ckpt.tokenizer.mask_id).nonzero()[0, 0])
        edits = [Edit(2, (5, 100, 900)), Edit(3, (17,), (4.0,), (position,))]
        edited, clean = logits_after(here, ids.to(device), edits), logits_after(cpu, ids, ())
        reference = logits_after(cpu, ids, edits)
        assert np.abs(reference - clean).max() > 1e-2  # the edit moves the guess
        np.testing.assert_allclose(edited, reference, rtol=0, atol=DEVICE_TOL * np.abs(reference).max())
        with torch.autocast(device, dtype=torch.bfloat16):
            low = one_sentence(here, ids.to(device))
        assert all(np.isfinite(a).all() for a in low)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_neurons_on_cuda():
    body("cuda")


@pytest.mark.usefixtures("one_thread")
def test_the_body_on_the_cpu():
    body("cpu")
