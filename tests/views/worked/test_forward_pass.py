"""bertviz_lab.views.worked.forward_pass: the seeds' hand computations, exactly, and the printed-vs-exact flags."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bertviz_lab.errors import InputError
from bertviz_lab.figures.worked import weight_bars
from bertviz_lab.views.worked import onehot
from bertviz_lab.views.worked import forward_pass as worked


def softmax(xs: list[float]) -> list[float]:
    exps = [math.exp(x) for x in xs]
    return [e / sum(exps) for e in exps]


def seed001_embeddings() -> pd.DataFrame:
    return pd.DataFrame({"token": list(onehot.SEED001_TOKENS),
                         **{f"dim {j}": [r[j] for r in onehot.SEED001_EMBEDDINGS] for j in range(3)}})


def test_attention_softmax_of_the_seed_scores_is_exact():
    steps = worked.softmax_table(worked.SEED000_TOKENS, worked.SEED000_SCORES)
    assert steps.total == pytest.approx(sum(math.exp(s) for s in worked.SEED000_SCORES), rel=1e-12)
    assert steps.total == pytest.approx(18.54529, abs=1e-5)
    assert steps.table["weight"].tolist() == pytest.approx(softmax(list(worked.SEED000_SCORES)), rel=1e-12)
    assert steps.table["weight"].sum() == pytest.approx(1.0)
    assert steps.table["token"].tolist() == list(worked.SEED000_TOKENS) and steps.shift == 0
    assert steps.checks is None and "matches print?" not in steps.table


def test_attention_flags_only_the_weight_of_mat_as_off():
    steps = worked.softmax_table(worked.SEED000_TOKENS, worked.SEED000_SCORES, worked.SEED000_ATTENTION_PRINTED)
    assert steps.table["matches print?"].tolist() == [True] * 6 + [False, True]
    wrong = steps.checks[~steps.checks["within rounding?"]]
    assert wrong["figure"].tolist() == ["weight of mat"]
    exact = math.exp(0.7) / sum(math.exp(s) for s in worked.SEED000_SCORES)
    assert f"{exact:.3f}" == "0.109"
    assert wrong["which is right"].iloc[0] == "✗ should be 0.109 (the seed used its rounded figures)"
    assert len(steps.checks) == 17  # 8 exp values, the sum, 8 weights


def test_mlm_loss_probabilities_and_baseline_are_exact():
    result = worked.mlm_loss_table(worked.SEED000_WORDS, worked.SEED000_LOGITS, worked.SEED000_TRUE)
    total = sum(math.exp(x) for x in worked.SEED000_LOGITS)
    assert result.total == pytest.approx(total, rel=1e-12)
    assert result.p_true == pytest.approx(math.exp(2.5) / total, rel=1e-12)
    assert result.p_true == pytest.approx(0.63022, abs=1e-5)
    assert result.loss == pytest.approx(-math.log(result.p_true), rel=1e-12)
    assert result.loss == pytest.approx(0.46169, abs=1e-5)
    assert result.uniform == pytest.approx(-math.log(1 / 6), rel=1e-12) and result.vocab_size == 6
    assert result.table["true word?"].tolist() == [True] + [False] * 5


def test_mlm_flags_the_sum_and_the_baseline_but_not_the_loss():
    result = worked.mlm_loss_table(worked.SEED000_WORDS, worked.SEED000_LOGITS, 0, worked.SEED000_MLM_PRINTED)
    checks = result.checks.set_index("figure")
    assert sorted(checks.index[~checks["within rounding?"]]) == ["uniform loss −ln(1/V)", "Σ exp"]
    # 0.4617 rounds to the printed 0.462, as does −ln(0.630) = 0.4620 from the seed's rounded p
    assert checks.loc["loss −ln p(true)", "within rounding?"]
    assert checks.loc["loss −ln p(true)", "from the seed's rounded figures"] == pytest.approx(-math.log(0.630))
    assert checks.loc["Σ exp", "which is right"] == "✗ should be 19.33 (the seed used its rounded figures)"
    baseline = checks.loc["uniform loss −ln(1/V)", "which is right"]
    assert baseline == "✗ should be 1.792 (even its rounded figures give 1.790)"
    assert result.table["matches print?"].all()


def test_within_rounding_uses_the_printed_decimals():
    assert worked.within_rounding(0.10859, "0.109") and not worked.within_rounding(0.10859, "0.108")
    assert worked.within_rounding(18.5453, "18.55") and not worked.within_rounding(19.3305, "19.34")
    assert worked.within_rounding(1.0, "1") and not worked.within_rounding(1.6, "1")


def test_one_hot_attention_without_and_with_scaling():
    e = seed001_embeddings()
    plain = onehot.one_hot_attention(e, 1, scale=False)
    scaled = onehot.one_hot_attention(e, 1, scale=True)
    assert plain.table["q·k"].tolist() == [0.0, 1.0, 0.0]
    assert plain.weights.tolist() == pytest.approx(softmax([0, 1, 0]), rel=1e-12)
    assert plain.weights.tolist() == pytest.approx([0.21194, 0.57612, 0.21194], abs=1e-5)
    assert scaled.weights.tolist() == pytest.approx(softmax([0, 1 / math.sqrt(3), 0]), rel=1e-12)
    assert scaled.scale == pytest.approx(1 / math.sqrt(3))
    np.testing.assert_allclose(plain.output, plain.weights)  # one-hot values: the output is the weights
    np.testing.assert_allclose(plain.q, [0, 1, 0])
    np.testing.assert_allclose(plain.k, plain.v)


def test_seed001_printed_weights_match_neither_variant():
    checks = onehot.one_hot_checks(seed001_embeddings(), 1, onehot.SEED001_PRINTED)
    assert len(checks) == 6 and not checks["within rounding?"].any()
    assert checks["which is right"].iloc[1] == "✗ should be 0.5761; with ÷ √3, 0.4711"


def test_side_by_side_and_a_general_embedding():
    e = pd.DataFrame({"token": ["a", "b"], "dim 0": [2.0, 0.0], "dim 1": [0.0, 1.0]})
    side, output = onehot.scaling_side_by_side(e, 0)
    assert side["q·k"].tolist() == [4.0, 0.0]
    assert side["weight (no scaling)"].tolist() == pytest.approx(softmax([4, 0]))
    assert side["weight (÷ √2)"].tolist() == pytest.approx(softmax([4 / math.sqrt(2), 0]))
    assert output["output (no scaling)"].tolist() == pytest.approx([2 * softmax([4, 0])[0], softmax([4, 0])[1]])


@pytest.mark.parametrize("text, message", [
    ("", "Type some scores"), ("0.1 abc", "'abc' is not a number"), ("1 nan", "not a finite number"),
    ("1 inf", "not a finite number"), ("1 2", "2 scores for 3 labels"), ("1e7 1 2", "too large"),
    (" ".join(["1"] * 65), "65 scores is too many")])
def test_parser_rejects_bad_input_with_its_message(text, message):
    with pytest.raises(InputError, match=message):
        worked.parse_numbers(text, ["a", "b", "c"], "scores")


def test_parser_accepts_commas_semicolons_and_the_typographic_minus():
    np.testing.assert_array_equal(worked.parse_numbers("0.1, 1.8;−0.9  2"), [0.1, 1.8, -0.9, 2.0])
    assert worked.parse_labels("  [CLS] The  cat ") == ["[CLS]", "The", "cat"]
    with pytest.raises(InputError, match="Type the words"):
        worked.parse_labels("   ", "words")


def test_big_scores_do_not_overflow():
    steps = worked.softmax_table(["a", "b"], [1000.0, 999.0])
    assert steps.shift == 1000.0 and steps.exp_column == "exp(score − max)"
    assert steps.table["weight"].tolist() == pytest.approx(softmax([1, 0]))
    low = worked.softmax_table(["a", "b"], [-1000.0, -1001.0])
    assert low.table["weight"].tolist() == pytest.approx(softmax([1, 0]))
    mlm = worked.mlm_loss_table(["a", "b"], [1000.0, -1000.0], 1)
    assert mlm.loss == pytest.approx(2000.0) and math.isfinite(mlm.loss)


def test_bad_tables_raise_input_errors():
    with pytest.raises(InputError, match="one logit per word"):
        worked.mlm_loss_table(["a", "b"], [1.0], 0)
    with pytest.raises(InputError, match="true word"):
        worked.mlm_loss_table(["a", "b"], [1.0, 2.0], 5)
    e = seed001_embeddings()
    e.loc[0, "dim 1"] = np.nan
    with pytest.raises(InputError, match="needs a number"):
        onehot.one_hot_attention(e, 0, scale=False)
    e = seed001_embeddings()
    e.loc[2, "token"] = " "
    with pytest.raises(InputError, match="token name"):
        onehot.one_hot_attention(e, 0, scale=False)


def test_weight_bars_show_the_values_and_escape_labels():
    fig = weight_bars(["<b>x</b>", "y"], [0.25, 0.75], other=[0.3, 0.7])
    exact, printed = fig.data
    assert list(exact.y) == [0.25, 0.75] and list(printed.y) == [0.3, 0.7]
    assert list(exact.x) == ["0 &lt;b&gt;x&lt;/b&gt;", "1 y"] and list(exact.text) == ["0.250", "0.750"]
    assert printed.text is None and fig.layout.showlegend


def test_scores_given_as_plain_dot_products_are_divided_by_sqrt_d_head():
    steps = worked.softmax_table(["a", "b", "c"], [2.0, 4.0, 0.0], d_head=4)
    assert steps.table["q·k"].tolist() == [2.0, 4.0, 0.0]
    assert steps.table["score"].tolist() == [1.0, 2.0, 0.0]  # ÷ √4
    assert steps.table["weight"].tolist() == pytest.approx(softmax([1.0, 2.0, 0.0]))
    assert steps.d_head == 4 and steps.exp_column == "exp(score)"
    as_given = worked.softmax_table(["a", "b", "c"], [2.0, 4.0, 0.0])
    assert "q·k" not in as_given.table and as_given.d_head is None
    assert as_given.table["weight"].tolist() == pytest.approx(softmax([2.0, 4.0, 0.0]))


@pytest.mark.parametrize("d_head", [0, -3, 2.5, True, "64", 10**9])
def test_a_bad_d_head_is_refused_in_words(d_head):
    with pytest.raises(InputError, match="d_head"):
        worked.softmax_table(["a", "b"], [1.0, 2.0], d_head=d_head)
