"""Text -> model -> records: mask prediction, temperature, causal view, empty segment B."""

import math

import numpy as np
import pytest
import torch

from bertviz_lab.errors import InputError
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from tests.helpers.paths import ROOT


def test_predictions_match_a_manual_softmax(tiny_model, tiny_tokenizer):
    enc = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat on the [MASK] .")
    pred = vpr.predict_masks(tiny_model, tiny_tokenizer, enc, top_k=3)
    with torch.no_grad():
        logits = tiny_model(torch.tensor([enc.ids])).mlm_logits[0, 6].double()
    probs = logits.softmax(-1)
    top = probs.topk(3)
    (mask,) = pred.masks
    assert mask.position == 6 and [c.id for c in mask.candidates] == top.indices.tolist()
    assert np.allclose([c.prob for c in mask.candidates], top.values.numpy(), atol=1e-6)
    assert mask.candidates[0].logit == pytest.approx(float(logits[top.indices[0]]), abs=1e-5)
    assert mask.entropy == pytest.approx(float(-(probs * probs.log()).sum()), abs=1e-6)
    assert 0 < mask.entropy < math.log(100)
    assert pred.filled[6] == mask.candidates[0].token and pred.filled[:6] == enc.tokens[:6]


def test_temperature_flattens_and_sharpens(tiny_model, tiny_tokenizer):
    enc = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat")
    entropies = [vpr.predict_masks(tiny_model, tiny_tokenizer, enc, temperature=t).masks[0].entropy
                 for t in (0.5, 1.0, 4.0)]
    assert entropies[0] < entropies[1] < entropies[2]
    with pytest.raises(InputError, match="temperature"):
        vpr.predict_masks(tiny_model, tiny_tokenizer, enc, temperature=0)


def test_causal_view_ignores_words_to_the_right(tiny_model, tiny_tokenizer):
    a = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat on the mat")
    b = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] went to the bank")
    pa, pb = (vpr.predict_masks(tiny_model, tiny_tokenizer, e, causal=True) for e in (a, b))
    assert [c.id for c in pa.masks[0].candidates] == [c.id for c in pb.masks[0].candidates]
    full = [vpr.predict_masks(tiny_model, tiny_tokenizer, e).masks[0].candidates[0].prob for e in (a, b)]
    assert full[0] != full[1]


def test_empty_second_sentence_means_single_sentence(tiny_model, tiny_tokenizer):
    enc = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat", "   ")
    assert set(enc.segment_ids) == {0}


def test_overlong_text_is_truncated_and_reported_or_refused(tiny_model, tiny_tokenizer):
    text = "the [MASK] " + "cat " * 100
    enc = inputs.encode(tiny_tokenizer, tiny_model, text)
    assert len(enc) == 64 and enc.truncated == 102 + 2 - 64
    with pytest.raises(InputError, match="at most 64"):
        inputs.encode(tiny_tokenizer, tiny_model, text, allow_truncation=False)


def test_model_without_mlm_head_says_so(tiny_config, tiny_tokenizer):
    from bertviz_lab.bert.model import BertForPreTraining

    bare = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False)
    enc = inputs.encode(tiny_tokenizer, bare, "the [MASK] sat")
    with pytest.raises(InputError, match="no MLM head"):
        vpr.predict_masks(bare, tiny_tokenizer, enc)


def test_attention_matrices_shape(tiny_model, tiny_tokenizer):
    enc = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat", "it was tired")
    weights = inputs.attention_matrices(inputs.run(tiny_model, enc, trace=True))
    assert weights.shape == (2, 4, len(enc), len(enc))
    assert np.allclose(weights.sum(-1), 1, atol=1e-5)


def test_engine_never_imports_streamlit():
    """Every module of the package except bertviz_lab.ui imports without pulling in streamlit."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, sys, bertviz_lab\n"
            "for m in pkgutil.walk_packages(bertviz_lab.__path__, 'bertviz_lab.'):\n"
            "    if not m.name.startswith(('bertviz_lab.ui', 'bertviz_lab.__main__')):\n"
            "        importlib.import_module(m.name)\n"
            "sys.exit(3 if 'streamlit' in sys.modules else 0)")
    root = ROOT
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0
