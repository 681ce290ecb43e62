"""The grids' own checks, as tests (issue 54, item 4): patching every position at a depth gives the source run's
score and patching nothing the target's (float64: to 1e-9; float32: to the page's tolerance); noise that is seeded,
averaged over its draws and confined to its tokens; value zeroing against a hand computation; bf16 and fp16 (autocast
and bf16 weights) close to float32; the fast rows equal the textbook ones; progress that climbs to 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertviz_lab.bert.attention import merge_heads, split_heads
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.explain import patch_grids
from bertviz_lab.explain import patching
from bertviz_lab.explain.patching import Patch, Runs, position_mask, record, run_from, twin
from bertviz_lab.explain.score import Score

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

T, CHANGED = 8, 2
# bf16 / fp16 autocast on the CPU against float32, normalised cells (range 1.26 here): measured at most 0.033 (bf16)
# and 0.005 (fp16). bf16 keeps 8 bits of mantissa and the logits come out in it, so the error is about |F| / 256
# over the range: the shipped model's were/was pair (|F| 1.6, range 0.46) measured 0.17 (bf16) and 0.024 (fp16)
BF16_TOL, FP16_TOL = 0.05, 0.01


def model_of(seed: int = 0, layers: int = 2) -> BertForPreTraining:
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, initializer_range=0.2)
    model = BertForPreTraining(cfg).eval()  # weights 10x the default's: attention that mixes, a wide range
    with torch.no_grad():  # biases and LayerNorms off their init, as a trained model's are
        for name, p in model.named_parameters():
            if "bias" in name or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def runs_of(model: BertForPreTraining, noise: torch.Tensor | None = None) -> Runs:
    clean = torch.tensor([[2, *range(10, 10 + T - 3), 4, 3]])  # [CLS] words [MASK] [SEP]
    corrupt = clean.clone()
    if noise is None:
        corrupt[0, CHANGED] = 40
    position = T - 2
    with torch.no_grad():
        logits = [model(ids).mlm_logits[0, position].double() for ids in (clean, corrupt)]
    moved = logits[0] - logits[1] if noise is None else logits[0]
    score = Score(position, int(moved.argmax()), int(moved.argmin()), 100)
    return Runs(twin(model), clean, corrupt, torch.zeros_like(clean), score, noise)


def tolerance(traced) -> float:
    """views.patching.runs.tolerance's rule: 1e-5 of the logits' size over the range."""
    return 1e-5 * max(1.0, abs(traced.f_clean), abs(traced.f_corrupt)) / abs(traced.f_clean - traced.f_corrupt)


@pytest.mark.parametrize("direction", patch_grids.DIRECTIONS)
def test_whole_depth_gives_the_source_and_nothing_the_target(direction):
    exact = patch_grids.grid(patch_grids.trace(runs_of(model_of().double())), "resid", direction)
    assert exact.checks["whole"] < 1e-9 and exact.checks["nothing"] < 1e-9, exact.checks
    np.testing.assert_allclose(exact.whole, exact.expected_whole, atol=1e-9)
    traced = patch_grids.trace(runs_of(model_of()))
    single = patch_grids.grid(traced, "resid", direction)
    assert single.checks["whole"] <= tolerance(traced) and single.checks["nothing"] <= tolerance(traced)
    # the last row (the last layer's output) patched at the scored position alone is the whole source too
    assert abs(single.values[-1, traced.runs.score.position] - single.expected_whole) <= tolerance(traced)


def test_the_check_fails_when_the_source_is_wrong(monkeypatch):
    """Patching from the target itself (a wrong source) moves nothing: the whole-depth check must say so."""
    traced = patch_grids.trace(runs_of(model_of().double()))
    real = patching._stack
    monkeypatch.setattr(patching, "_stack", lambda patches, source, key, draws: real(
        patches, traced.corrupt, key, draws))
    broken = patch_grids.grid(traced, "resid", "denoise")
    assert broken.checks["whole"] > 0.99  # every whole row gives the corrupted score, 0 instead of 1
    assert broken.checks["nothing"] < 1e-9


def test_scored_rows_equal_the_full_layers():
    """The fast path (one query row at the last layer) gives the textbook layer's numbers at the scored position."""
    runs = runs_of(model_of(layers=3))
    with torch.no_grad():
        target, source = record(runs, "corrupt"), record(runs, "clean")
        for site, layer in (("resid", 0), ("attn", 0), ("v", 1), ("mlp", 2), ("resid", 3)):
            patches = [Patch(site, layer, position_mask(runs, [t])) for t in range(T)]
            full = run_from(runs, target, patches, source)[:, runs.score.position]
            fast = run_from(runs, target, patches, source, scored=True)[:, 0]
            torch.testing.assert_close(fast, full, atol=1e-5, rtol=0)
    assert runs.model.bert.encoder.layer[0].attention.self.query._forward_hooks == {}  # hooks removed


def noise(draws: int, seed: int, tokens=(CHANGED,)) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros(draws, T, 32)
    out[:, list(tokens)] = 3 * torch.randn(draws, len(tokens), 32, generator=g)
    return out


def test_noise_draws_are_averaged():
    model = model_of().double()
    both = patch_grids.trace(runs_of(model, noise(3, 0)))
    each = [patch_grids.trace(runs_of(model, noise(3, 0)[i:i + 1])) for i in range(3)]
    assert both.f_corrupt == pytest.approx(np.mean([t.f_corrupt for t in each]), abs=1e-12)
    for kind in ("resid", "heads"):
        grid = patch_grids.grid(both, kind, "denoise")
        mean = np.mean([patch_grids.grid(t, kind, "denoise").f for t in each], axis=0)
        np.testing.assert_allclose(grid.f, mean, atol=1e-10)
        assert not np.allclose(grid.f, patch_grids.grid(each[0], kind, "denoise").f, atol=1e-6)


def test_noise_moves_only_its_tokens():
    """At the embeddings, patching a token that was not noised restores nothing (its vectors are the same)."""
    traced = patch_grids.trace(runs_of(model_of().double(), noise(2, 0, tokens=(1, 3))))
    embedded = traced.runs.embedded("corrupt") - traced.runs.embedded("clean")  # (N, T, d)
    assert embedded[:, [0, 2, 4, 5, 6, 7]].abs().max() == 0 and embedded[:, [1, 3]].abs().min(-1).values.max() > 0
    row = patch_grids.grid(traced, "resid", "denoise").values[0]
    np.testing.assert_allclose(row[[0, 2, 4, 5, 6, 7]], 0, atol=1e-9)
    assert np.abs(row[[1, 3]]).max() > 1e-3


def value_zeroed(model: BertForPreTraining, layer: int, x: torch.Tensor, j: int | None) -> torch.Tensor:
    """Layer `layer`'s output (T, d) from its input x (1, T, d), token j's value vectors zeroed, written out."""
    block = model.bert.encoder.layer[layer]
    attn, H = block.attention.self, model.config.num_attention_heads
    q, k, v = (split_heads(m(x), H) for m in (attn.query, attn.key, attn.value))
    if j is not None:
        v = v.clone()
        v[:, :, j] = 0
    weights = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)
    a = block.attention.output.LayerNorm(x + block.attention.output.dense(merge_heads(weights @ v)))
    return block.output.LayerNorm(a + block.output.dense(block.intermediate(a)))[0]


def test_value_zeroing_by_hand():
    model = model_of().double()
    runs = runs_of(model)
    mixing = patch_grids.value_zeroing(model, runs.clean, torch.zeros_like(runs.clean))
    assert mixing.shape == (2, T, T)
    np.testing.assert_allclose(mixing.sum(-1), 1, atol=1e-12)
    layer = 1
    with torch.no_grad():
        x = model(runs.clean).hidden_states[layer]
        kept = value_zeroed(model, layer, x, None)
        moved = torch.stack([1 - torch.cosine_similarity(value_zeroed(model, layer, x, j), kept, dim=-1)
                             for j in range(T)], dim=1)  # (i, j)
    hand = (moved / moved.sum(-1, keepdim=True)).numpy()
    np.testing.assert_allclose(mixing[layer], hand, atol=1e-9)
    rollout = patch_grids.value_zeroing_rollout(mixing, T - 2)
    np.testing.assert_allclose(rollout, (mixing[1] @ mixing[0])[T - 2], atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, BF16_TOL), (torch.float16, FP16_TOL)])
def test_autocast_is_close_to_float32(dtype, tol):
    runs = runs_of(model_of())
    traced = patch_grids.trace(runs)
    full = {kind: patch_grids.grid(traced, kind, "denoise", head=(1, 1)).values for kind in patch_grids.GRIDS}
    with torch.autocast("cpu", dtype=dtype):
        low = patch_grids.trace(runs)
        grids = {kind: patch_grids.grid(low, kind, "denoise", head=(1, 1)).values for kind in patch_grids.GRIDS}
    off = {kind: float(np.abs(grids[kind] - full[kind]).max()) for kind in patch_grids.GRIDS}
    assert all(np.isfinite(g).all() for g in grids.values()) and max(off.values()) <= tol, off
    assert max(off.values()) > 0  # autocast did run in the lower precision


def test_bf16_weights_run():
    runs = runs_of(model_of().to(torch.bfloat16), noise(2, 0).to(torch.bfloat16))
    traced = patch_grids.trace(runs)
    for kind in patch_grids.GRIDS:
        for direction in patch_grids.DIRECTIONS:
            grid = patch_grids.grid(traced, kind, direction, head=(0, 1))
            assert grid.values.dtype == np.float64 and np.isfinite(grid.f).all()
    assert np.isfinite(patch_grids.value_zeroing(runs.model, runs.clean, runs.segments)).all()


@pytest.mark.parametrize("kind", patch_grids.GRIDS)
def test_progress_climbs_to_one(kind):
    traced = patch_grids.trace(runs_of(model_of(layers=3)))
    seen = []
    patch_grids.grid(traced, kind, "noise", head=(2, 3), progress=lambda f, what: seen.append((f, what)))
    fractions = [f for f, _ in seen]
    assert fractions and fractions == sorted(fractions) and fractions[-1] == 1.0 and 0 < fractions[0]
    assert all(isinstance(what, str) and what for _, what in seen)


def test_seeded_noise_same_grid():
    model = model_of()
    grids = [patch_grids.grid(patch_grids.trace(runs_of(model, noise(2, seed))), "resid", "denoise").f
             for seed in (0, 0, 1)]
    np.testing.assert_array_equal(grids[0], grids[1])
    assert not np.allclose(grids[0], grids[2])


def test_chunks_do_not_change_the_numbers():
    """Rows batched one at a time or all together (with their noise draws) give the same F."""
    runs = runs_of(model_of().double(), noise(3, 0))
    with torch.no_grad():
        target, source = record(runs, "corrupt"), record(runs, "clean")
        patches = [Patch("resid", depth, position_mask(runs, [t])) for depth in range(3) for t in range(T)]
        np.testing.assert_allclose(patching.patched(runs, target, source, patches, chunk=1),
                                   patching.patched(runs, target, source, patches), atol=1e-12)
