"""What the Why page's words claim, held to the numbers: a contrast's deletion curve follows F, tied values decide
no order, a tie with the best random order is called a tie, a rho over few tokens comes with its p-value, the
methods read from attention or from the layers' mixing (value zeroing) are the same for any target or contrast, and the sentence about attention is the
deletion test's verdict on this sentence."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bertviz_lab.explain import checks, rank
from bertviz_lab.explain.report import METHODS
from bertviz_lab.views import inputs
from bertviz_lab.views.why.ask import Ask
from bertviz_lab.views.why.explanation import TITLES, deletion_for, why

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

TEXT = "the cat sat on the [MASK] , and the dog sat on the rug ."
ATTENTION = [k for k, m in METHODS.items() if m.kind == "attention"]


def encoded(tiny_model, tiny_tokenizer, text: str = TEXT):
    return inputs.encode(tiny_tokenizer, tiny_model, text)


def test_a_contrasts_deletion_curve_follows_sigmoid_of_f_not_p_target(tiny_model, tiny_tokenizer):
    """With a contrast the curve is sigmoid(F) = p(target) / (p(target) + p(contrast)) after each removal: a
    removal that lowers both words alike leaves it where it was. Before, it followed p(target)."""
    result = why(tiny_model, tiny_tokenizer, encoded(tiny_model, tiny_tokenizer), Ask(target="mat", contrast="rug"))
    deletion = deletion_for(result)
    assert deletion.follows == "sigmoid(F)" and result.follows == "p(mat | mat or rug)"
    case = result.case
    f = float(case.score(case.model, case.ids, case.segments)[0])
    for name, curve in deletion.curves.items():
        assert curve[0] == pytest.approx(1 / (1 + math.exp(-f)), abs=1e-6), name
    plain = deletion_for(why(tiny_model, tiny_tokenizer, encoded(tiny_model, tiny_tokenizer), Ask(target="mat")))
    assert plain.follows == "p(target)"
    assert plain.curves["occlusion"][0] == pytest.approx(result.explanation.prob, abs=1e-6)  # p(mat), not sigmoid(F)
    assert not np.allclose(deletion.random_curves, plain.random_curves)


def test_float_noise_is_a_tie_and_ties_are_grouped_in_sentence_order():
    values = np.array([0.2, 1.0, 0.9999999999999999, 0.5, 1.0, 0.1])
    np.testing.assert_array_equal(rank.snap(values)[[1, 2, 4]], [rank.snap(values)[1]] * 3)
    assert rank.groups(values, np.arange(6)) == ((1, 2, 4), (3,), (0,), (5,))
    assert rank.groups(values[::-1].copy(), np.arange(6)) == ((1, 3, 4), (2,), (5,), (0,))
    assert checks.agreement({"a": values, "b": np.where(values > 0.99, 1.0, values)}, np.arange(6))["a"]["b"] == 1.0


def test_tied_tokens_are_averaged_over_their_orders_so_the_tie_break_decides_nothing(tiny_model, tiny_tokenizer):
    """A method that ties two tokens (one at 1.0, one a rounding below) gets the same curve whichever of them the
    rounding puts first: inside the group, the mean over both orders."""
    result = why(tiny_model, tiny_tokenizer, encoded(tiny_model, tiny_tokenizer))
    movable = result.explanation.movable
    a, b = int(movable[0]), int(movable[3])
    values = np.linspace(0.1, 0.5, len(result.encoding.ids))
    first, second = values.copy(), values.copy()
    first[a], first[b] = 1.0, 1.0 - 1e-16
    second[a], second[b] = 1.0 - 1e-16, 1.0
    one = checks.deletion(result.case, {"tied": first}, random_orders=1)
    other = checks.deletion(result.case, {"tied": second}, random_orders=1)
    np.testing.assert_array_equal(one.curves["tied"], other.curves["tied"])
    assert one.orders["tied"][0] == (a, b) and one.tied("tied") == 2
    by_a = checks.deletion(result.case, {"x": np.where(np.arange(len(values)) == b, 0.9, first)}, random_orders=1)
    by_b = checks.deletion(result.case, {"x": np.where(np.arange(len(values)) == a, 0.9, second)}, random_orders=1)
    np.testing.assert_allclose(one.curves["tied"][1], (by_a.curves["x"][1] + by_b.curves["x"][1]) / 2, atol=1e-12)
    np.testing.assert_allclose(one.curves["tied"][2:], by_a.curves["x"][2:], atol=1e-12)


def test_an_aopc_equal_to_the_best_random_order_is_called_a_tie():
    random = np.array([[0.8, 0.7, 0.6, 0.5, 0.5, 0.5], [0.8, 0.6, 0.5, 0.4, 0.4, 0.4]])
    curves = {"value_norm": random[1].copy(), "rollout": np.array([0.8, 0.1, 0.1, 0.0, 0.0, 0.0]),
              "attention": np.full(6, 0.8)}
    result = checks.Deletion(tuple(range(1, 6)), {m: tuple((i,) for i in range(1, 6)) for m in curves}, curves,
                             random)
    assert result.verdict("value_norm") == "ties" and result.beats_random("value_norm") is False
    sentence = checks.deletion_sentence(result, TITLES)
    assert f"Tied with the best random order: value-weighted norm ({result.aopc['value_norm']:.3f})" in sentence
    assert "value-weighted norm" not in sentence.split("Not:")[1]
    said = checks.attention_sentence(result, TITLES, ["attention", "value_norm", "rollout"], "p(mat)")
    aopc = result.aopc
    assert f"rollout ({aopc['rollout']:.3f}) lowered p(mat) faster than all 2 random orders" in said
    assert f"value-weighted norm ({aopc['value_norm']:.3f}) tied the best random order" in said
    assert "attention (0.000) did not beat them" in said
    assert "a clue to test" in said


def brute_p(a: np.ndarray, b: np.ndarray) -> float:
    """Every order of a's values, Spearman by checks.spearman itself."""
    rho = checks.spearman(a, b)
    hits = [abs(checks.spearman(np.array(p), b)) >= abs(rho) - 1e-12 for p in itertools.permutations(a)]
    return sum(hits) / len(hits)


def test_spearman_p_is_the_share_of_orders_as_extreme():
    assert rank.spearman_p(np.arange(4.0), np.arange(4.0)) == pytest.approx(2 / 24)  # the order and its reverse
    a, b = np.array([3.0, 1, 4, 1, 5, 9]), np.array([2.0, 7, 1, 8, 2, 8])
    assert rank.spearman_p(a, b) == pytest.approx(brute_p(a, b), abs=1e-12)
    long = np.arange(30.0)
    assert rank.spearman_p(long, long) == pytest.approx(1 / (rank.PERMUTATIONS + 1))  # sampled: never 0
    assert rank.spearman_p(np.ones(5), np.arange(5.0)) is None


def test_a_rho_of_half_over_six_tokens_is_not_called_agreement():
    """The default sentence's case: rho = 0.54 over 6 tokens has p of about 0.3. The sentence gives n and p and does
    not say the method ranks the words as occlusion does."""
    a = np.array([1.0, 2, 3, 4, 5, 6])
    b = np.array([2.0, 1, 5, 3, 6, 4])  # rho = 0.66, p = 0.175
    rho, p = checks.spearman(a, b), rank.spearman_p(a, b)
    assert rho >= checks.AGREE and p > rank.SIGNIFICANT
    sentence = checks.agreement_sentence({"occlusion": {"occlusion": 1.0, "gradient": rho}}, TITLES, {"gradient": p}, 6)
    assert "beyond chance" not in sentence.split("within chance")[0].split("p: the share")[1]
    assert f"within chance over 6 tokens (p ≥ 0.05): gradient (ρ = {rho:.2f}, p = {p:.2g})" in sentence
    assert "over 6 removable tokens" in sentence and "all 720 orders" in sentence and "noisy" in sentence
    assert "really does" not in sentence and "one at a time" in sentence


def test_the_attention_and_mixing_methods_never_read_f_and_the_page_says_so(tiny_model, tiny_tokenizer):
    """Their rows (value zeroing's too) are the same for any target and contrast; the rows read from F are not."""
    enc = encoded(tiny_model, tiny_tokenizer)
    top = why(tiny_model, tiny_tokenizer, enc).explanation.values
    other = why(tiny_model, tiny_tokenizer, enc, Ask(target="rug", contrast="dog")).explanation.values
    for key, method in METHODS.items():
        if method.kind in ("attention", "mixing"):
            np.testing.assert_array_equal(top[key], other[key], err_msg=key)
        else:
            assert not np.allclose(top[key], other[key]), key
    from bertviz_lab.ui.why.sections import lead

    kinds = [m.kind for m in METHODS.values()]
    assert lead().startswith(f"Which tokens made the model guess what it guessed? {kinds.count('score')} of these "
                             f"{len(kinds)} methods answer for one number, F")
    assert set(kinds) == {"attention", "mixing", "score"} and kinds.count("mixing") == 1
    assert (f"the other {len(kinds) - kinds.count('score')} read only the attention ({kinds.count('attention')}) or "
            f"how the layers mix the tokens (1), never F, so their rows are the same for any target or contrast "
            "word") in lead()


def test_the_definitions_say_what_the_methods_compute():
    assert "in any direction" not in METHODS["gradient"].definition
    assert "steepest direction" in METHODS["gradient"].definition
    assert "really does" not in METHODS["occlusion"].definition
    assert "one token at a time" in METHODS["occlusion"].definition
    assert "not why" not in METHODS["attention"].definition and "a clue to test" in METHODS["attention"].definition
