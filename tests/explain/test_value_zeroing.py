"""Value zeroing (Mohebbi et al. 2023), the ninth row of Why this guess?: its values are explain/patch_grids.py's
rolled out to the explained position (not any other), it never reads F, it takes its place in the agreement matrix,
the deletion curves (dashed: it never reads F) and the JSON, and adding it changed none of the eight other
methods' numbers. (Its parity with plain PyTorch hooks on `transformers` is in test_parity.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.explain import methods, patch_grids
from bertviz_lab.explain.report import METHODS
from bertviz_lab.figures import why as fy
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.ask import Ask

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

TWO = "the [MASK] sat on the mat , and the dog sat on the [MASK] ."
OLD = ("attention", "rollout", "flow", "value_norm", "gradient", "gradient_x_input", "integrated_gradients",
       "occlusion")


@pytest.fixture
def second(tiny_model, tiny_tokenizer) -> vw.Why:
    """The guess at the second [MASK] explained (so the explained position is not the first mask's)."""
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TWO)
    return vw.why(tiny_model, tiny_tokenizer, encoding, Ask(mask=1, ig_steps=8))


def test_value_zeroing_is_the_rollout_of_the_mixing_at_the_explained_position(second, tiny_model):
    case = second.case
    mixing = patch_grids.value_zeroing(tiny_model, case.ids, case.segments)  # (L, T, T), the shared model itself
    T = len(second.encoding)
    assert mixing.shape == (tiny_model.config.num_hidden_layers, T, T)
    np.testing.assert_allclose(mixing.sum(-1), 1.0, atol=1e-12)
    assert second.position == second.masks[1] != second.masks[0]
    shown = second.explanation.values["value_zeroing"]
    np.testing.assert_allclose(shown, patch_grids.value_zeroing_rollout(mixing, second.position), rtol=0, atol=1e-12)
    other = patch_grids.value_zeroing_rollout(mixing, second.masks[0])  # the tiny random model mixes nearly evenly,
    assert np.abs(shown - other).max() > 1e-5  # so the rows are close, but another position's is not the one shown
    assert shown.sum() == pytest.approx(1.0, abs=1e-9) and (shown >= 0).all()


def test_value_zeroing_never_reads_f(tiny_model, tiny_tokenizer):
    encoding = inputs.encode(tiny_tokenizer, tiny_model, TWO)
    top = vw.why(tiny_model, tiny_tokenizer, encoding, Ask(mask=1, ig_steps=4)).explanation.values
    other = vw.why(tiny_model, tiny_tokenizer, encoding, Ask(mask=1, target="rug", contrast="dog",
                                                             ig_steps=4)).explanation.values
    np.testing.assert_array_equal(top["value_zeroing"], other["value_zeroing"])
    assert not np.allclose(top["occlusion"], other["occlusion"])
    assert METHODS["value_zeroing"].kind == "mixing" and not METHODS["value_zeroing"].signed
    assert "value zeroing" in vw.NEVER_F and "occlusion" not in vw.NEVER_F


def test_the_eight_other_methods_are_unchanged_by_it(second, tiny_model, tiny_tokenizer, monkeypatch):
    """The same explanation with value zeroing replaced by zeros: every other method's numbers are equal, bit for
    bit (its runs leave no hook, no flag, no state behind on the model the others read)."""
    monkeypatch.setattr(methods, "value_zeroing", lambda case: np.zeros(case.length))
    without = vw.why(tiny_model, tiny_tokenizer, second.encoding, Ask(mask=1, ig_steps=8))
    assert not without.explanation.values["value_zeroing"].any() and second.explanation.values["value_zeroing"].any()
    for key in OLD:
        np.testing.assert_array_equal(second.explanation.values[key], without.explanation.values[key], err_msg=key)
    assert list(METHODS) == [*OLD[:4], "value_zeroing", *OLD[4:]]


def test_it_is_in_the_agreement_matrix_the_deletion_curves_and_the_json(second):
    deletion = vw.deletion_for(second, random_orders=3)
    report = vw.json_report(second, deletion)
    assert list(report["methods"]) == list(METHODS) and len(METHODS) == 9
    assert report["methods"]["value_zeroing"] == [float(x) for x in second.explanation.values["value_zeroing"]]
    rho = report["agreement"]
    assert len(rho) == 9 and all(len(row) == 9 for row in rho.values())
    assert rho["value_zeroing"]["value_zeroing"] == pytest.approx(1.0)
    assert rho["value_zeroing"]["occlusion"] == rho["occlusion"]["value_zeroing"] is not None
    assert "value_zeroing" in report["agreement_p"]
    curve = deletion.curves["value_zeroing"]
    assert curve.shape == (len(second.explanation.movable) + 1,) and curve[0] == pytest.approx(second.explanation.prob)
    first = deletion.orders["value_zeroing"][0][0]  # the removable token value zeroing ranks first
    assert first == vw.strongest(second.explanation.values["value_zeroing"], second.explanation.movable)
    assert report["deletion"]["aopc"]["value_zeroing"] == pytest.approx(np.mean(curve[0] - curve))


def test_the_figures_draw_nine_rows_and_nine_distinct_dashed_or_solid_curves(second):
    e = second.explanation
    strips = fy.strips(vw.titled(e.values), vw.SIGNED, e.tokens, e.layer, e.head)
    assert list(strips.data[0].y) == [vw.TITLES[k] for k in METHODS]
    np.testing.assert_array_equal(strips.data[0].customdata[4], e.values["value_zeroing"])
    matrix = fy.agreement(vw.titled(second.agreement), len(e.movable))
    assert np.asarray(matrix.data[0].z).shape == (9, 9) and "value zeroing" in matrix.data[0].x
    deletion = vw.deletion_for(second, random_orders=3)
    figure = fy.deletion(vw.titled(deletion.curves), deletion.random_curves, vw.NEVER_F, second.follows)
    lines = {t.name: t.line for t in figure.data if t.name in vw.TITLES.values()}
    assert len(lines) == 9 and len({line.color for line in lines.values()}) == 9
    dashed = {name for name, line in lines.items() if line.dash == "dash"}
    assert dashed == {vw.TITLES[k] for k, m in METHODS.items() if m.kind != "score"} and "value zeroing" in dashed
    assert figure.layout.legend.title.text == "dashed: never reads F"
