"""Activation patching on a CUDA GPU (issue 54, item 5): the shipped model's grids there equal the CPU's (fp32, TF32
off), the checks hold, bf16 autocast and bf16 weights run and stay near fp32, and progress climbs to 1. The body is a
function of the device: `test_the_body_on_the_cpu` runs the same assertions on the CPU, so it keeps working on a
machine without a GPU; on a GPU, `-m cuda` runs it there."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.explain import patch_grids
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.paths import ROOT

ASK = PatchAsk("the children in the park [MASK] happy .", "the child in the park [MASK] happy .", answer="were",
               foil="was")
DEVICE_TOL = 1e-4  # normalised cells, fp32 on the GPU against the CPU: other kernels, other summation orders
BF16_TOL = 0.3  # normalised cells under bf16 (the logits in 8 bits of mantissa: |F| 1.6 over a range of 0.46)


def grids_on(device: str, dtype: torch.dtype | None = None, autocast: torch.dtype | None = None) -> dict:
    ckpt = load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")
    model = copy.deepcopy(ckpt.model).to(device)
    if dtype is not None:
        model = model.to(dtype)
    with torch.autocast(device, dtype=autocast, enabled=autocast is not None):
        patching = vpa.prepare(model, ckpt.tokenizer, ASK)
        out = {}
        for kind in patch_grids.GRIDS:
            for d in patch_grids.DIRECTIONS:
                seen = []
                out[(kind, d)] = vpa.grid(patching, kind, d, head=(1, 2), progress=lambda f, _w, seen=seen: seen.append(f))
                assert seen == sorted(seen) and seen[-1] == 1.0
    assert patching.traced.runs.clean.device.type == device
    return out, patching


def body(device: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    here, patching = grids_on(device)
    cpu, _ = grids_on("cpu")
    for key, grid in here.items():
        np.testing.assert_allclose(grid.values, cpu[key].values, atol=DEVICE_TOL, rtol=0, err_msg=str(key))
    for d in patch_grids.DIRECTIONS:
        resid = here[("resid", d)]
        assert max(resid.checks.values()) <= vpa.tolerance(patching), resid.checks
    for kwargs in (dict(autocast=torch.bfloat16), dict(dtype=torch.bfloat16)):
        low, _ = grids_on(device, **kwargs)
        for key, grid in low.items():
            assert np.isfinite(grid.f).all() and np.abs(grid.values - cpu[key].values).max() <= BF16_TOL, key


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_patching_on_cuda():
    body("cuda")


@pytest.mark.usefixtures("one_thread")
def test_the_body_on_the_cpu():
    body("cpu")
