"""The attention explorer's numbers agree with the model's own trace, step by step."""

import re
from dataclasses import replace
from io import StringIO

import numpy as np
import pandas as pd
import pytest
import torch

from bertviz_lab.bert.attention import MASK_VALUE
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.figures import attention as fa
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.predict import guesses as vpr
from tests.helpers.paths import ROOT

SENTENCE = "the animal did not cross the street because it was tired ."


@pytest.fixture
def single(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, SENTENCE)
    return encoding, av.explore(tiny_model, encoding)


@pytest.fixture
def pair(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat on the mat .", "it was tired .")
    return encoding, av.explore(tiny_model, encoding)


def model_trace(model, encoding, head_mask=None):
    return inputs.run(model, encoding, trace=True, head_mask=head_mask).trace


def test_explore_keeps_the_trace_and_every_row_sums_to_one(tiny_model, single):
    encoding, view = single
    trace = model_trace(tiny_model, encoding)
    T = len(encoding)
    assert view.weights.shape == (2, 4, T, T) and view.q.shape == (2, 4, T, 8)
    assert view.mask.shape == (2, 1, T, T) and view.additive_mask(1, 3).shape == (T, T)
    assert not view.additive_mask(1, 3).any()  # one unpadded input: nothing hidden
    assert not view.weights.flags.writeable  # shared through a cache, so frozen
    np.testing.assert_allclose(view.weights.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(view.weights[1], trace[1].weights[0].numpy())
    np.testing.assert_array_equal(view.scores[0], trace[0].scores[0].numpy())
    assert view.labels[0] == "0 [CLS]" and view.labels[-1] == f"{T - 1} [SEP]"
    assert view.heads_on.all() and not view.is_pair
    hidden = inputs.run(tiny_model, encoding).hidden_states  # an untraced forward of its own
    assert view.hidden.shape == (3, T, 32)
    for layer, h in enumerate(hidden):
        np.testing.assert_allclose(view.hidden[layer], h[0].numpy(), atol=1e-6)


@pytest.mark.parametrize("layer, head, query", [(0, 0, 0), (1, 3, 9), (1, 2, 5)])
def test_softmax_steps_reproduce_the_models_weights(single, layer, head, query):
    _, view = single
    steps = av.softmax_steps(view, layer, head, query)
    scaled = "÷√d_head (√8 = 2.82843) = score"  # the tiny model: d_head = 32 / 4 = 8
    assert list(steps.columns) == [av.KEY, av.DOT, scaled, av.MASK, av.MASKED, av.EXP, av.SUM, av.WEIGHT]
    assert list(steps[av.KEY]) == view.labels
    np.testing.assert_allclose(steps[av.WEIGHT], view.weights[layer, head, query], atol=1e-6, rtol=0)
    np.testing.assert_array_equal(steps[scaled], view.scores[layer, head, query].astype(np.float64))
    np.testing.assert_allclose(steps[av.DOT] / np.sqrt(view.head_dim), steps[scaled], atol=1e-5)
    assert steps[av.EXP].max() == 1.0  # exp(max - max)
    np.testing.assert_allclose(steps[av.SUM], steps[av.EXP].sum())


@pytest.mark.parametrize("head_dim, name", [(64, "÷√d_head (√64 = 8) = score"),
                                            (8, "÷√d_head (√8 = 2.82843) = score"),
                                            (96, "÷√d_head (√96 = 9.79796) = score")])
def test_the_score_column_names_d_head_and_its_root(head_dim, name):
    assert av.scaled_column(head_dim) == name  # BERT-base and the shipped model: 768 / 12 = 256 / 4 = 64
    assert av.sqrt_head_dim(head_dim) in name


def significant_digits(text: str) -> int:
    """Significant digits a formatted number shows: '0.000123457' -> 6, '1.23e-05' -> 3."""
    mantissa = text.lstrip("-").lower().split("e")[0].replace(".", "")
    return len(mantissa.lstrip("0"))


SMALL_WEIGHT = 0.000123456789  # a weight a learner may check by hand: %.4f would show 0.0001


def test_hover_shows_a_weight_to_six_significant_digits(single):
    _, view = single
    weights = view.weights[0, 0]
    figures = {"heatmap": fa.attention_heatmap(weights, view.axis_labels, view.axis_labels, "t"),
               "grid": fa.attention_grid(view.weights, view.axis_labels, view.axis_labels),
               "bars": fa.softmax_bars(pd.DataFrame({"weight": weights[0]}, index=view.axis_labels), "t")}
    for name, fig in figures.items():
        value = "z" if name != "bars" else "y"
        for trace in fig.data:
            spec = re.search(rf"%{{{value}:([^}}]*)}}", trace.hovertemplate)[1]  # d3-format, e.g. ".6g"
            assert re.fullmatch(r"\.\d+~?[eg]", spec), (name, spec)  # types d3 and Python format alike
            shown = format(SMALL_WEIGHT, spec.replace("~", ""))
            assert significant_digits(shown) >= 6, (name, shown)
    assert significant_digits(format(SMALL_WEIGHT, fa.WEIGHT_HOVER)) == fa.WEIGHT_DIGITS


def test_a_masked_key_gets_exp_zero_and_weight_zero(single):
    _, view = single
    mask = view.mask.copy()
    mask[:, :, :, 2] = MASK_VALUE  # hide key 2 from every query
    steps = av.softmax_steps(replace(view, mask=mask), 0, 1, 4)
    assert steps.loc[2, av.MASKED] < -1e8
    assert steps.loc[2, av.EXP] == 0.0 and steps.loc[2, av.WEIGHT] == 0.0
    assert steps[av.WEIGHT].sum() == pytest.approx(1.0)


def test_context_is_the_weighted_sum_of_values(tiny_model, single):
    encoding, view = single
    ctx = av.context_steps(view, 1, 2, 3)
    trace = model_trace(tiny_model, encoding)
    np.testing.assert_allclose(ctx.context, trace[1].context[0, 2, 3].numpy(), atol=1e-5)
    assert ctx.head_on and ctx.max_difference < 1e-5
    assert list(ctx.table.index[:-1]) == view.labels and len(ctx.table.columns) == 1 + view.head_dim
    np.testing.assert_allclose(ctx.table.iloc[-1, 1:], ctx.context)
    np.testing.assert_allclose(ctx.table["weight"].iloc[:-1] @ ctx.table.iloc[:-1, 1:], ctx.context)


def test_temperature_one_is_the_model_and_a_what_if_otherwise(single):
    _, view = single
    np.testing.assert_allclose(av.what_if_weights(view, 1, 0, 1.0), view.weights[1, 0], atol=1e-6)
    sharp, flat = av.what_if_weights(view, 1, 0, 0.25), av.what_if_weights(view, 1, 0, 4.0)
    assert (sharp.max(-1) >= view.weights[1, 0].max(-1) - 1e-9).all()
    assert (flat.max(-1) <= view.weights[1, 0].max(-1) + 1e-9).all()
    steps = av.softmax_steps(view, 1, 0, 4, temperature=2.0)
    assert av.TAU in steps and av.MODEL_WEIGHT in steps
    np.testing.assert_allclose(steps[av.WEIGHT], av.what_if_weights(view, 1, 0, 2.0)[4], atol=1e-12)
    np.testing.assert_array_equal(steps[av.MODEL_WEIGHT], view.weights[1, 0, 4].astype(np.float64))
    with pytest.raises(InputError):
        av.softmax_steps(view, 0, 0, 0, temperature=0.0)


def test_hide_specials_removes_exactly_cls_and_sep(single):
    encoding, view = single
    shown = av.matrix(view, 0, 1, hide_specials=True)
    kept = [i for i, t in enumerate(encoding.tokens) if t not in ("[CLS]", "[SEP]")]
    assert shown.rows == kept and shown.cols == kept
    assert not any("[CLS]" in label or "[SEP]" in label for label in shown.row_labels + shown.col_labels)
    np.testing.assert_array_equal(shown.weights, view.weights[0, 1][np.ix_(kept, kept)])
    assert (shown.weights.sum(-1) < 1.0).all()  # not renormalised


def test_pair_blocks_are_the_cross_sentence_sub_matrices(pair):
    encoding, view = pair
    a = [i for i, s in enumerate(encoding.sequence_ids) if s == 0]
    b = [i for i, s in enumerate(encoding.sequence_ids) if s == 1]
    assert view.is_pair and a and b
    a_to_b, b_to_a = av.matrix(view, 1, 0, block="A→B"), av.matrix(view, 1, 0, block="B→A")
    assert (a_to_b.rows, a_to_b.cols) == (a, b) and (b_to_a.rows, b_to_a.cols) == (b, a)
    np.testing.assert_array_equal(a_to_b.weights, view.weights[1, 0][np.ix_(a, b)])
    np.testing.assert_array_equal(b_to_a.weights, view.weights[1, 0][np.ix_(b, a)])
    assert a_to_b.name == "attention_L1_H0_AtoB" and b_to_a.title == "Layer 1 · head 0 · B→A"
    everything = av.grid(view, block="A→B")
    np.testing.assert_array_equal(everything.weights[1, 0], a_to_b.weights)


def test_grid_refuses_what_a_browser_cannot_draw(single, monkeypatch):
    _, view = single
    assert av.grid(view).weights.shape == (2, 4, len(view.tokens), len(view.tokens))
    monkeypatch.setattr(av, "GRID_MAX_CELLS", 100)
    with pytest.raises(InputError, match="too many to draw"):
        av.grid(view)


def test_blocks_need_a_pair_and_a_known_name(single):
    _, view = single
    with pytest.raises(ValueError):
        av.matrix(view, 0, 0, block="A→B")
    with pytest.raises(ValueError):
        av.matrix(view, 0, 0, block="sideways")


def test_mean_over_heads_and_csv_export(single):
    _, view = single
    mean = av.matrix(view, 1, None)
    np.testing.assert_allclose(mean.weights, view.weights[1].mean(0))
    np.testing.assert_allclose(mean.weights.sum(-1), 1.0, atol=1e-6)
    assert "mean over heads" in mean.title and mean.name == "attention_L1_mean"
    assert av.matrix(view, 0, 3, hide_specials=True).name == "attention_L0_H3_no_specials"
    frame = av.matrix(view, 0, 2).frame()
    assert list(frame.index) == view.labels and list(frame.columns) == view.labels
    back = pd.read_csv(StringIO(frame.to_csv()), index_col=0)
    np.testing.assert_allclose(back.to_numpy(), view.weights[0, 2], atol=1e-7)


def test_head_mask_switches_the_named_heads_off(tiny_model, single):
    encoding, view = single
    assert av.head_names(2, 2) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]
    assert av.head_mask([], 2, 4) is None
    mask = av.head_mask(["L0 H1", "L1 H3", "L9 H9"], 2, 4)
    assert mask.tolist() == [[1, 0, 1, 1], [1, 1, 1, 0]]
    off = av.explore(tiny_model, encoding, mask)
    assert not off.heads_on[0, 1] and off.heads_on.sum() == 6
    assert not off.context[0, 1].any()  # the switched-off head passes on zeros
    np.testing.assert_array_equal(off.weights[0], view.weights[0])  # layer 0's own weights are unchanged
    assert not np.allclose(off.weights[1], view.weights[1])  # the layer above sees a different input
    ctx = av.context_steps(off, 0, 1, 2)
    assert not ctx.head_on and ctx.context.any() and not ctx.model_context.any()


def test_dot_product_is_the_neuron_view_plus_scaling(single):
    _, view = single
    dot = av.dot_product(view, 1, 1, 3, 5)
    assert list(dot.table.columns) == ["q", "k", "q × k"] and len(dot.table) == view.head_dim
    assert dot.dot == pytest.approx(av.softmax_steps(view, 1, 1, 3).loc[5, av.DOT])
    assert dot.sqrt_d == pytest.approx(np.sqrt(8))
    assert dot.score == pytest.approx(float(view.scores[1, 1, 3, 5]), abs=1e-5)
    assert av.strongest_key(view, 1, 1, 3) == int(view.weights[1, 1, 3].argmax())
    assert view.tokens[av.default_query(view)] == "it"


def test_labels_are_plain_for_tables_and_escaped_for_plots(tiny_model):
    vocab = list(SPECIAL_TOKENS) + ["<", ">", "/", "script", "the"]
    tokenizer = WordPieceTokenizer.from_vocab(vocab + [f"tok{i}" for i in range(100 - len(vocab))])
    view = av.explore(tiny_model, inputs.encode(tokenizer, tiny_model, "<script> the"))
    assert view.labels[1] == "1 <" and view.axis_labels[1] == "1 &lt;"
    assert "&" not in "".join(av.matrix(view, 0, 0).row_labels)


def test_prediction_change_compares_all_heads_with_heads_off(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat on the [MASK] .")
    torch.manual_seed(0)
    table = av.prediction_change(tiny_model, tiny_tokenizer, encoding, av.head_mask(["L0 H0", "L1 H2"], 2, 4), 3)
    assert len(table) == 2 * 3 and list(table["rank"]) == [1, 2, 3, 1, 2, 3]
    expected = vpr.predict_masks(tiny_model, tiny_tokenizer, encoding, top_k=3)
    assert list(table["all heads"][:3]) == [c.token for c in expected.masks[0].candidates]
    assert set(table.columns) >= {"heads off", "p (heads off)"}
    only = av.prediction_change(tiny_model, tiny_tokenizer, encoding, None, 3)
    assert "heads off" not in only.columns


@pytest.mark.parametrize("off", [None, ["L0 H0", "L1 H2"]])
def test_the_traced_pass_gives_its_column_of_the_prediction_table_with_one_forward_less(
        tiny_model, tiny_tokenizer, monkeypatch, off):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat on the [MASK] .")
    mask = None if off is None else av.head_mask(off, 2, 4)
    alone = av.prediction_change(tiny_model, tiny_tokenizer, encoding, mask, 3)
    view = av.explore(tiny_model, encoding, mask, tiny_tokenizer.mask_id)
    assert view.mask_logits.shape == (2, tiny_model.config.vocab_size)
    forwards = []
    real = vpr.predict_masks
    monkeypatch.setattr(vpr, "predict_masks", lambda *a, **k: forwards.append(k) or real(*a, **k))
    shared = av.prediction_change(tiny_model, tiny_tokenizer, encoding, mask, 3, view=view)
    pd.testing.assert_frame_equal(shared, alone, check_exact=True)  # the same numbers, to the last bit
    # No heads off: the view's pass is the only one. Heads off: it gives that column; "all heads" runs.
    assert forwards == ([] if off is None else [{"top_k": 3, "head_mask": None}])
    # A view of other heads is not taken for these: the table then runs its own forwards.
    other = av.explore(tiny_model, encoding, av.head_mask(["L1 H1"], 2, 4), tiny_tokenizer.mask_id)
    forwards.clear()
    pd.testing.assert_frame_equal(av.prediction_change(tiny_model, tiny_tokenizer, encoding, mask, 3, view=other),
                                  alone, check_exact=True)
    assert len(forwards) == (1 if off is None else 2)


def test_a_view_without_a_mask_or_a_mask_id_keeps_no_logits(tiny_model, tiny_tokenizer):
    masked = inputs.encode(tiny_tokenizer, tiny_model, "the [MASK] sat .")
    assert av.explore(tiny_model, masked).mask_logits is None  # no mask id given
    plain = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat .")
    assert av.explore(tiny_model, plain, None, tiny_tokenizer.mask_id).mask_logits is None

def test_prediction_change_explains_what_is_missing(tiny_model, tiny_tokenizer, tiny_config):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, "the cat sat .")
    with pytest.raises(InputError, match=r"Add \[MASK\]"):
        av.prediction_change(tiny_model, tiny_tokenizer, encoding)
    bare = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False).eval()
    with pytest.raises(InputError, match="no MLM head"):
        av.prediction_change(bare, tiny_tokenizer, inputs.encode(tiny_tokenizer, bare, "the [MASK] ."))


def test_the_view_and_its_figures_never_import_streamlit():
    import subprocess
    import sys

    code = ("import sys, bertviz_lab.views.attention.explorer, bertviz_lab.figures.attention; "
            "sys.exit('streamlit' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
