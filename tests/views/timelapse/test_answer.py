"""Where the answer is made, as it learned (views/timelapse/answer.py): a checkpoint's grid is views/patching's
residual grid of the pair, denoising; a pair that cannot be patched there, or whose two scores only rounding tells
apart, is one sentence instead; the kept checkpoint shown for a step is the last at or before it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.corpus import minimal_pairs
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.timelapse.answer import PAIR, ROUNDING_MAX, answer_at, kept_at, readable
from tests.helpers.paths import ROOT


@pytest.fixture(scope="module")
def mini():
    return load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")


def test_a_checkpoints_grid_is_the_pairs_residual_grid_denoising(mini):
    pair = minimal_pairs.by_key(PAIR)
    found = answer_at(mini.model, mini.tokenizer, pair)
    patching = vpa.prepare(mini.model, mini.tokenizer, PatchAsk(pair.clean, pair.corrupt, answer=pair.answer,
                                                                foil=pair.foil))
    grid = vpa.grid(patching, "resid", "denoise")
    assert not found.note and found.rows == grid.rows and found.tokens == patching.tokens
    np.testing.assert_allclose(found.values, grid.values, atol=1e-6)
    assert found.sentences == vpa_read.sentences(patching, grid) and found.metric == "logit(were) - logit(was)"


def test_a_pair_that_cannot_be_patched_is_one_sentence(mini):
    pair = minimal_pairs.by_key(PAIR)
    found = answer_at(mini.model, mini.tokenizer, replace(pair, corrupt=pair.clean))
    assert found.values is None and found.note.startswith("The two sentences are the same")
    assert found.note.endswith("between two runs).")  # a sentence: a full stop added


def test_scores_that_only_rounding_tells_apart_are_refused():
    readable(SimpleNamespace(f_clean=2.0, f_corrupt=1.0))  # a clear difference: nothing said
    with pytest.raises(InputError, match="nearly the same score"):
        readable(SimpleNamespace(f_clean=-0.222487, f_corrupt=-0.222491))  # an untrained run's step, as seen
    assert vpa.tolerance(SimpleNamespace(f_clean=1.0, f_corrupt=1.0 - 1e-5 / ROUNDING_MAX)) == pytest.approx(
        ROUNDING_MAX)


def test_a_step_shows_the_last_checkpoint_kept_at_or_before_it():
    kept = ((0, Path("a")), (5, Path("b")), (20, Path("c")))
    assert kept_at(kept, 5) == (5, Path("b")) and kept_at(kept, 19) == (5, Path("b"))
    assert kept_at(kept, 100) == (20, Path("c")) and kept_at(kept[1:], 2) is None and kept_at((), 3) is None
