"""`prepare` on the shipped model: each mistake a learner can make is one sentence (nothing computed), the default
answer and foil are the runs' own top guesses, the runs read the [MASK] as Mask & predict does, noise is seeded and
stays on its tokens, and `grid` checks the grid, the direction and the head it is asked for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import InputError
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from bertviz_lab.views.predict.guesses import ReadOptions, predict_at
from tests.helpers.family_models import build
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

CLEAN, CORRUPT = "the children in the park [MASK] happy .", "the child in the park [MASK] happy ."


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")


@pytest.fixture(scope="module")
def pair(shipped):
    return vpa.prepare(shipped.model, shipped.tokenizer, PatchAsk(CLEAN, CORRUPT, answer="were", foil="was"))


@pytest.mark.parametrize("ask,words", [
    (PatchAsk(CLEAN, CLEAN.replace("park", "park .")), "must be the same length in tokens"),
    (PatchAsk(CLEAN.replace("[MASK]", "were"), CORRUPT.replace("[MASK]", "was")), "has no [MASK]"),
    (PatchAsk(CLEAN, CLEAN), "the two sentences are the same"),
    (PatchAsk(CLEAN, CORRUPT, answer="xylophonically"), "is not a single token"),
    (PatchAsk(CLEAN, CORRUPT, foil="xylophonically"), "is not a single token"),
    (PatchAsk(CLEAN, CORRUPT, answer="were", foil="were"), "the foil is the answer itself"),
    (PatchAsk(CLEAN, "the child in the [MASK] park happy ."), "[MASK] at the same place"),
    (PatchAsk(CLEAN, noise=True), "pick the tokens to corrupt with noise"),
    (PatchAsk(CLEAN, noise=True, noised=(0,)), "token 0 is not a word of the clean sentence"),
    (PatchAsk(CLEAN, noise=True, noised=(6,)), "token 6 is not a word"),
    (PatchAsk(CLEAN, CORRUPT, answer="happy", foil="park"), None),  # a score both runs give alike is allowed
])
def test_mistakes_are_one_sentence(shipped, ask, words):
    if words is None:
        assert vpa.prepare(shipped.model, shipped.tokenizer, ask).f_clean != 0
        return
    with pytest.raises(InputError) as caught:
        vpa.prepare(shipped.model, shipped.tokenizer, ask)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_same_score_twice_is_refused(shipped, monkeypatch):
    monkeypatch.setattr(vpa.patch_grids.Traced, "f_corrupt", property(lambda self: self.f_clean))
    with pytest.raises(InputError, match="the two runs give the same score"):
        vpa.prepare(shipped.model, shipped.tokenizer, PatchAsk(CLEAN, CORRUPT))


def test_default_answer_and_foil_are_the_runs_top_guesses(shipped):
    p = vpa.prepare(shipped.model, shipped.tokenizer, PatchAsk(CLEAN, CORRUPT))
    clean_top = p.guesses[0].masks[0].candidates[0].token
    corrupt_other = next(c.token for c in p.guesses[1].masks[0].candidates if c.token != clean_top)
    assert (p.answer, p.foil) == (clean_top, corrupt_other) and p.answer != p.foil
    assert p.metric == f"logit({p.answer}) - logit({p.foil})"


def test_runs_read_as_mask_and_predict(shipped, pair):
    assert (pair.answer, pair.foil, pair.position) == ("were", "was", 6) and pair.tokens[6] == "[MASK]"
    for encoding, rec, top in ((pair.clean, pair.traced.clean, pair.tops[0]),
                               (pair.corrupt, pair.traced.corrupt, pair.tops[1])):
        shown = predict_at(shipped.model, shipped.tokenizer, encoding, [6], ReadOptions(top_k=5)).masks[0]
        assert top == shown.candidates[0].token and int(rec.top[0]) == shown.candidates[0].id
        were = next(c for c in shown.candidates if c.token == "were")
        assert abs(float(rec.p[0]) - were.prob) <= 1e-5
        logits = {c.token: c.logit for c in shown.candidates}
        assert abs(float(rec.f[0]) - (logits["were"] - logits["was"])) <= 1e-4


def test_noise_is_seeded_and_stays_on_its_tokens(shipped):
    def noised(seed: int, draws: int = 3):
        return vpa.prepare(shipped.model, shipped.tokenizer,
                           PatchAsk(CLEAN, noise=True, noised=(2,), seed=seed, draws=draws, answer="were", foil="was"))

    a, b, c = noised(0), noised(0), noised(1)
    noise = a.traced.runs.noise  # (N, T, e)
    assert noise.shape[0] == 3 and noise[:, 2].abs().min() > 0
    assert torch.count_nonzero(noise[:, [i for i in range(len(a.tokens)) if i != 2]]) == 0
    assert a.noised == (2,) and a.corrupt is None and a.guesses is None
    grids = [vpa.grid(p, "resid", "denoise").f for p in (a, b, c)]
    np.testing.assert_array_equal(grids[0], grids[1])
    assert not np.allclose(grids[0], grids[2])
    std = float(shipped.model.bert.embeddings.word_embeddings.weight.std())
    assert float(noise[:, 2].std()) == pytest.approx(3.0 * std, rel=0.15)  # 3 x the word vectors' spread


@pytest.mark.parametrize("kind,direction,head,words", [
    ("qkv", "denoise", (4, 0), "there is no head 5.1: this model has 4 layers of 4 heads"),
    ("qkv", "denoise", (0, 4), "there is no head 1.5"),
    ("qkv", "denoise", (-1, 0), "there is no head 0.1"),
    ("qkv", "noise", None, "pick the head"),
    ("layers", "denoise", None, "no grid called 'layers'"),
    ("resid", "up", None, "no direction called 'up'"),
])
def test_grid_checks_what_it_is_asked(pair, kind, direction, head, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        vpa.grid(pair, kind, direction, head)


def test_a_real_grid_and_the_tolerance(pair):
    grid = vpa.grid(pair, "qkv", "noise", (3, 3))
    assert grid.values.shape == (3, len(pair.tokens)) and grid.head == (3, 3)
    assert 0 < vpa.tolerance(pair) < 1e-3 and (pair.layers, pair.heads) == (4, 4)


def test_the_tolerance_scales_with_the_logits_not_the_score(pair):
    """Float32 rounding moves each logit by about 1e-6 of its size, so F = logit(were) - logit(was) of a pair whose
    runs score close (noise barely moving it) may move by far more than 1e-5 of F itself: the bound reads the logits."""
    h = pair.traced.clean.resid[-1][:, pair.position]
    largest = float(pair.traced.runs.model.mlm_head(h).abs().max())
    assert pair.logit_size >= largest > max(abs(pair.f_clean), abs(pair.f_corrupt))
    assert vpa.tolerance(pair) == pytest.approx(1e-5 * pair.logit_size / abs(pair.f_clean - pair.f_corrupt))


def test_the_discriminator_scores_the_replaced_token(tmp_path):
    torch.manual_seed(0)
    build("electra-discriminator", tmp_path)
    ckpt = load_checkpoint(tmp_path)
    p = vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk("the cat sat on the mat .", "the dog sat on the mat ."))
    assert p.replaced and p.metric == "the replaced-token logit" and p.position == 2 and p.guesses is None
    assert p.tops == ("", "") and np.isfinite(vpa.grid(p, "heads", "denoise").f).all()
    with pytest.raises(InputError, match="token 0 is not a word"):
        vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk("the cat sat .", "the dog sat .", position=0))
