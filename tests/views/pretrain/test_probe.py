"""The probe: a sentence read by a training run's newest checkpoint, and what happens when
there is no checkpoint yet or the newest one cannot be read at that moment."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bertviz_lab.pretrain import checkpoints, runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.views.pretrain import probe
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

TINY = TrainConfig(hidden=32, heads=2, layers=2, steps=10, batch_size=8, seq_len=32, eval_every=5,
                   checkpoint_every=5, threads=1, device="cpu")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real 10-step run made by the CLI (a few seconds)."""
    folder = tmp_path_factory.mktemp("runs") / "tiny"
    subprocess.run([sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(folder), *runs.cli_args(TINY)],
                   cwd=ROOT, env=no_gpu_env(), check=True, capture_output=True, timeout=120)
    return folder


def test_probe_reads_the_latest_checkpoint(run_dir):
    result = probe.probe_run(run_dir, "the cat sat on the [MASK] .", top_k=5)
    assert result.ok and result.message == ""
    assert result.step == 10 and result.checkpoint == checkpoints.latest(run_dir)
    assert result.tokens[0] == "[CLS]" and "[MASK]" in result.tokens
    T = len(result.tokens)
    assert result.attention.shape == (2, 2, T, T)
    np.testing.assert_allclose(result.attention.sum(-1), 1.0, atol=1e-5)
    (mask,) = result.predictions
    assert mask.position == result.tokens.index("[MASK]")
    probs = [c.prob for c in mask.candidates]
    assert len(probs) == 5 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1


def test_two_masks_give_two_predictions_and_no_mask_gives_a_note(run_dir):
    assert len(probe.probe_run(run_dir, "the [MASK] sat on the [MASK] .").predictions) == 2
    plain = probe.probe_run(run_dir, "the cat sat on the mat .")
    assert plain.ok and plain.predictions == [] and "[MASK]" in plain.message


def test_no_checkpoint_yet_is_a_message_not_an_error(tmp_path):
    result = probe.probe_run(tmp_path, probe.DEFAULT_SENTENCE)
    assert not result.ok and result.attention is None and result.predictions == []
    assert "No checkpoint yet" in result.message


def test_an_unreadable_newest_checkpoint_falls_back_or_says_so(run_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    weights = checkpoints.latest(copy) / "model.safetensors"
    weights.write_bytes(b"half-written")  # as if caught mid-write
    result = probe.probe_run(copy)
    assert not result.ok and "being written" in result.message

    fresh = tmp_path / "fresh"
    shutil.copytree(run_dir, fresh)
    good = probe.probe_run(fresh)
    (checkpoints.latest(fresh) / "model.safetensors").write_bytes(b"half-written")
    os.utime(checkpoints.latest(fresh) / "model.safetensors", ns=(1, 1))  # a new mtime: not the cached entry
    again = probe.probe_run(fresh)
    assert again.ok and again.step == good.step  # the last checkpoint that loaded
    np.testing.assert_array_equal(again.attention, good.attention)


def test_checkpoints_are_cached_by_path_and_mtime(run_dir, tmp_path):
    copy = tmp_path / "cached"
    shutil.copytree(run_dir, copy)
    first, _ = probe.latest_checkpoint(copy)
    assert probe.latest_checkpoint(copy)[0] is first
    weights = checkpoints.latest(copy) / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # rewritten
    assert probe.latest_checkpoint(copy)[0] is not first
