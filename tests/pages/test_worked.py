"""The Worked examples page (AppTest): seed numbers, every input recomputes, bad input warns, charts = tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers.figure_data import figures
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "worked.py")


def page() -> AppTest:
    at = app_test(PAGE).run()
    assert not at.exception, at.exception
    return at


def frame(at: AppTest, column: str, nth: int = 0) -> pd.DataFrame:
    """The nth table that has `column` (tables are found by what they hold, not by position)."""
    return [d.value for d in at.dataframe if column in d.value.columns][nth]


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def softmax(xs):
    exps = [math.exp(x) for x in xs]
    return [e / sum(exps) for e in exps]


def test_seed_numbers_render_with_their_comparisons():
    at = page()
    assert at.title[0].value == "Worked examples"
    assert [t.label for t in at.tabs] == [
        "Attention softmax · the worked forward pass (seed text 000)",
        "MLM head and loss · the worked forward pass (seed text 000)",
        "One-hot attention, with and without 1/√d · the academic manual (seed text 001)"]
    assert metric(at, "Σ exp") == f"{sum(math.exp(s) for s in [0.1, 1.8, 0.9, 0.4, 1.2, 0.0, 0.7, 0.1]):.4f}"
    assert metric(at, "p(true word)") == "0.6302" and metric(at, "Loss −ln p(true word)") == "0.4617"
    assert metric(at, "Uniform baseline ln 6") == f"{math.log(6):.4f}"
    assert metric(at, "Weight on the query itself, no scaling") == f"{softmax([0, 1, 0])[1]:.4f}"
    warnings = [x.value for x in at.warning]
    assert [x.split(" printed")[0] for x in warnings] == ["1 of the 17", "2 of the 16", "6 of the 6"]
    wrong = [d.value for d in at.dataframe if "which is right" in d.value.columns and len(d.value) < 16]
    assert wrong[0]["figure"].tolist() == ["weight of mat"]
    assert wrong[1]["figure"].tolist() == ["Σ exp", "uniform loss −ln(1/V)"]
    assert len(at.get("plotly_chart")) == 4


def test_charts_show_the_tables_numbers():
    at = page()
    attn, mlm, plain, scaled = figures(at)
    weights = frame(at, "weight")
    assert attn["data"][0]["y"] == pytest.approx(weights["weight"].tolist())
    assert attn["data"][1]["y"] == pytest.approx(weights["weight (as printed in the worked forward pass, seed text 000)"].tolist())
    assert attn["data"][0]["x"][5] == "5 [MASK]"
    assert mlm["data"][0]["y"] == pytest.approx(frame(at, "probability")["probability"].tolist())
    side = frame(at, "weight (no scaling)")
    assert plain["data"][0]["y"] == pytest.approx(side["weight (no scaling)"].tolist())
    assert scaled["data"][0]["y"] == pytest.approx(side["weight (÷ √3)"].tolist())


def test_editing_scores_and_tokens_recomputes_and_drops_the_print():
    at = page()
    at.text_input(key="worked.attn.scores").input("0 0 1").run()
    assert "3 scores for 8 labels" in at.warning[0].value
    at.text_input(key="worked.attn.tokens").input("a b c").run()
    assert not at.exception
    table = frame(at, "weight")
    assert table["token"].tolist() == ["a", "b", "c"]
    assert table["weight"].tolist() == pytest.approx(softmax([0, 0, 1]))
    assert "weight (as printed in the worked forward pass, seed text 000)" not in table
    assert metric(at, "Largest weight") == f"{softmax([0, 0, 1])[2]:.4f}"
    assert figures(at)[0]["data"][0]["y"] == pytest.approx(table["weight"].tolist())
    at.button(key="worked.attn.reset").click().run()
    assert frame(at, "weight")["token"].tolist()[0] == "[CLS]" and "1 of the 17" in at.warning[0].value


def test_big_scores_are_explained_not_overflowed():
    at = page()
    at.text_input(key="worked.attn.scores").input("1000 999 0 0 0 0 0 0").run()
    assert not at.exception and "exp(score − max)" in frame(at, "weight").columns
    assert any("too big for the computer" in i.value for i in at.info)
    assert frame(at, "weight")["weight"].tolist()[:2] == pytest.approx([1 / (1 + math.exp(-1)),
                                                                         math.exp(-1) / (1 + math.exp(-1))])


@pytest.mark.parametrize("text, message", [("1 two 3 4 5 6", "is not a number"), ("", "Type some logits"),
                                           ("1 2 nan 4 5 6", "not a finite number")])
def test_invalid_logits_warn_without_a_traceback(text, message):
    at = page()
    at.text_input(key="worked.mlm.logits").input(text).run()
    assert not at.exception
    assert any(message in x.value for x in at.warning)
    assert not [d for d in at.dataframe if "probability" in d.value.columns]


def test_editing_logits_words_and_true_word_recomputes_the_loss():
    at = page()
    at.text_input(key="worked.mlm.logits").input("1, 2, 3, 0, 0, 0").run()
    p = softmax([1, 2, 3, 0, 0, 0])
    assert metric(at, "p(true word)") == f"{p[0]:.4f}"
    assert metric(at, "Loss −ln p(true word)") == f"{-math.log(p[0]):.4f}"
    at.selectbox(key="worked.mlm.true").set_value(2).run()
    assert metric(at, "Loss −ln p(true word)") == f"{-math.log(p[2]):.4f}"
    assert frame(at, "probability")["true word?"].tolist() == [False, False, True, False, False, False]
    at.text_input(key="worked.mlm.words").input("x y").run()
    assert any("6 logits for 2 labels" in x.value for x in at.warning)
    at.text_input(key="worked.mlm.logits").input("0 0").run()
    assert metric(at, "Uniform baseline ln 2") == f"{math.log(2):.4f}"
    assert metric(at, "Loss −ln p(true word)") == f"{math.log(2):.4f}"  # the true word was reset to 0


def test_one_hot_query_and_embedding_edits_recompute():
    at = page()
    at.selectbox(key="worked.onehot.query").set_value(0).run()
    side = frame(at, "weight (no scaling)")
    assert side["q·k"].tolist() == [1.0, 0.0, 0.0]
    assert side["weight (÷ √3)"].tolist() == pytest.approx(softmax([1 / math.sqrt(3), 0, 0]))
    assert "weight (as printed in the academic manual, seed text 001)" not in side
    at.session_state["worked.onehot.matrix.0"] = {"edited_rows": {"0": {"dim 0": 3.0}}, "added_rows": [],
                                                  "deleted_rows": []}
    at.run()
    assert not at.exception
    side = frame(at, "weight (no scaling)")
    assert side["q·k"].tolist() == [9.0, 0.0, 0.0]
    assert side["weight (no scaling)"].tolist() == pytest.approx(softmax([9, 0, 0]))
    assert figures(at)[2]["data"][0]["y"] == pytest.approx(side["weight (no scaling)"].tolist())
    at.button(key="worked.onehot.reset").click().run()
    assert frame(at, "weight (no scaling)")["q·k"].tolist() == [0.0, 1.0, 0.0]
    assert "6 of the 6" in at.warning[-1].value


def test_typed_text_is_never_markdown():
    at = page()
    at.text_input(key="worked.attn.scores").input("**1** 2").run()
    assert r"\*\*1\*\*" in at.warning[0].value and "is not a number" in at.warning[0].value


def test_the_learner_says_whether_the_scores_are_already_scaled():
    at = page()
    kind = at.radio(key="worked.attn.kind")
    assert kind.value == "scaled" and "already ÷ √d_head" in kind.format_func(kind.value)
    assert any("raw scores" in c.value and "already divided" in c.value for c in at.caption)
    assert "worked.attn.d_head" not in [n.key for n in at.number_input]  # asked only for plain q·k
    kind.set_value("dot").run()
    assert not at.exception
    at.number_input(key="worked.attn.d_head").set_value(4).run()
    table = frame(at, "weight")
    scores = [0.1, 1.8, 0.9, 0.4, 1.2, 0.0, 0.7, 0.1]
    assert table["q·k"].tolist() == scores
    assert table["score"].tolist() == pytest.approx([s / 2 for s in scores])
    assert table["weight"].tolist() == pytest.approx(softmax([s / 2 for s in scores]))
    assert "weight (as printed in the worked forward pass, seed text 000)" not in table  # the seed's print is for the other reading
    assert any("only in that reading" in c.value for c in at.caption)
    at.button(key="worked.attn.reset").click().run()
    assert at.radio(key="worked.attn.kind").value == "scaled"
    assert "weight (as printed in the worked forward pass, seed text 000)" in frame(at, "weight")
