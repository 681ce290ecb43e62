"""The Losses step-by-step page (AppTest on the shipped model): the stepper, the numbers, bad input."""

from __future__ import annotations

import math

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.ui.kit import tables
from bertviz_lab.views import inputs
from bertviz_lab.views.losses import masking_stats
from bertviz_lab.views.losses import walkthrough
from bertviz_lab.ui.shell.text import plain
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "losses.py")
TITLES = ["Tokens", "Pick the positions to predict", "Corrupt each picked position (80 / 10 / 10)",
          "Forward pass", "Logits → softmax → p(true) → −log p", "L_MLM: mean and sum",
          "Next sentence prediction (NSP)", "Total loss"]


def page() -> AppTest:
    at = app_test(PAGE).run()
    assert not at.exception, at.exception
    return at


def steps(at: AppTest) -> list[str]:
    return [s.value for s in at.subheader if s.value.startswith("Step ")]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def texts(at: AppTest) -> str:
    return "\n".join(t.value for t in at.text)


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(ROOT / "checkpoints" / "bertviz-mini")


def engine(ckpt, seed: int):
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, "the cat sat on the mat .", "it was a warm afternoon .")
    return walkthrough.walkthrough(ckpt.model, ckpt.tokenizer, encoding, seed=seed)


def test_next_walks_through_every_step_and_back_returns():
    at = page()
    assert at.title[0].value == "Losses step by step"
    assert steps(at) == ["Step 1 of 8 · Tokens"]
    assert at.button(key="losses.back").disabled
    content = {2: lambda: "picked" in texts(at), 3: lambda: "[MASK]" in at.code[0].value,
               4: lambda: "MLM logits (1, 16, 2171)" in at.code[0].value,
               5: lambda: "p(true) = exp(" in texts(at) and at.get("plotly_chart"),
               6: lambda: "L_MLM, mean over masked positions (BERT)" in metrics(at),
               7: lambda: {"P(IsNext)", "L_NSP = −log p(label)"} <= set(metrics(at)),
               8: lambda: "Total loss = L_MLM + L_NSP" in metrics(at)}
    for number in range(2, 9):
        at.button(key="losses.next").click().run()
        assert not at.exception
        assert steps(at) == [f"Step {number} of 8 · {TITLES[number - 1]}"]
        assert content[number](), number
    assert at.button(key="losses.next").disabled
    at.button(key="losses.back").click().run()
    assert steps(at) == ["Step 7 of 8 · Next sentence prediction (NSP)"]


def test_the_tokens_step_says_how_bert_frames_a_pair_and_marks_its_segments(shipped):
    at = page()
    step = next(c.value for c in at.caption if c.value.startswith("The tokenizer splits"))
    step = step.replace("\\", "")  # Markdown escapes
    assert step == ("The tokenizer splits the text into WordPiece tokens and frames a pair as [CLS] A [SEP] B [SEP]. "
                    "Segment A = 0, segment B = 1.")
    assert list(at.dataframe[0].value.index) == ["token", "id", "segment"]
    pair = at.toggle(key="losses.pair")
    assert pair.label == "Add a second sentence" and "sentence B's segment 1" in pair.help
    assert walkthrough.framing(shipped.tokenizer) == "[CLS] A [SEP] B [SEP]"


def test_the_token_tables_come_in_pieces_that_fit_a_projector(shipped):
    at = page()
    w = engine(shipped, seed=0)  # 16 tokens: more than one piece holds
    pieces = [df.value for df in at.dataframe if "token" in df.value.index]  # rows: token, id, segment
    assert len(pieces) == math.ceil(len(w.tokens) / tables.POSITIONS_PER_PIECE) >= 2
    assert all(len(piece.columns) <= tables.POSITIONS_PER_PIECE for piece in pieces)
    assert [c for piece in pieces for c in piece.columns] == [str(i) for i in range(len(w.tokens))]
    assert [t for piece in pieces for t in piece.loc["token"]] == w.tokens
    at.button(key="losses.next").click().run()  # the positions to pick: the same pieces
    assert [list(df.value.columns) for df in at.dataframe if "picked" in df.value.index] == \
        [list(piece.columns) for piece in pieces]


def test_show_all_shows_every_step_with_the_engines_numbers(shipped):
    at = page()
    at.toggle(key="losses.all").set_value(True).run()
    assert steps(at) == [f"Step {i} of 8 · {t}" for i, t in enumerate(TITLES, start=1)]
    w = engine(shipped, seed=0)
    shown = metrics(at)
    assert float(shown["L_MLM, mean over masked positions (BERT)"]) == pytest.approx(w.mlm.loss_mean, abs=5e-5)
    assert float(shown["L_MLM, sum (the convention of the mathematical formulation, seed text 004)"]) == pytest.approx(w.mlm.loss_sum, abs=5e-5)
    assert float(shown["L_NSP (true pair)"]) == pytest.approx(w.nsp_true.loss, abs=5e-5)
    assert float(shown["Total loss = L_MLM + L_NSP"]) == pytest.approx(w.total, abs=5e-5)
    table = next(df.value for df in at.dataframe if "−log p" in df.value.columns)
    assert table["−log p"].tolist() == pytest.approx([m.neg_log_p for m in w.mlm.predictions], abs=1e-9)
    assert table["position"].tolist() == w.positions
    assert len(at.get("plotly_chart")) >= 2


def test_reroll_changes_the_seed_and_the_numbers_follow(shipped):
    at = page()
    at.button(key="losses.reroll").click().run()
    seed = at.number_input(key="losses.seed").value
    assert not at.exception and seed != 0
    at.toggle(key="losses.all").set_value(True).run()
    w = engine(shipped, seed=seed)
    assert float(metrics(at)["Total loss = L_MLM + L_NSP"]) == pytest.approx(w.total, abs=5e-5)
    assert f"Seed {seed} picked {len(w.picked)}: positions " + ", ".join(map(str, w.positions)) in texts(at)


def test_one_optimizer_step_lowers_the_loss():
    at = page()
    at.button(key="losses.train").click().run()
    assert not at.exception and not at.warning
    total = metrics(at)["total: before → after"]
    delta = next(m.delta for m in at.metric if m.label == "total: before → after")
    before = float(delta.split("from ")[1].rstrip(")"))
    assert float(total) < before and delta.startswith("-")


@pytest.mark.parametrize("key, value, message", [
    ("losses.rate", 0.0, "mask_rate must be between 0 and 1"),
    ("losses.rate", 1.5, "mask_rate must be between 0 and 1"),
    ("losses.keep", 0.2, "must add up to 1"),
    ("losses.random", -0.1, "random_prob must be between 0 and 1")])
def test_invalid_rates_give_their_message(key, value, message):
    at = page()
    at.number_input(key=key).set_value(value).run()
    assert not at.exception and not steps(at)
    assert any(plain(message) in w.value for w in at.warning), [w.value for w in at.warning]  # as plain text


def test_a_model_without_nsp_head_says_so_and_skips_the_step(tmp_path, tiny_config, tiny_tokenizer):
    model = BertForPreTraining(tiny_config, nsp_head=False, pooler=False).eval()
    path = save_checkpoint(model, tiny_tokenizer, tmp_path / "no_nsp")
    at = app_test(PAGE)
    at.session_state["model.path"] = str(path)
    at.run()
    assert not at.exception
    assert any("no NSP head" in i.value for i in at.info)
    at.toggle(key="losses.all").set_value(True).run()
    assert steps(at)[-1] == "Step 7 of 7 · Total loss" and "Next sentence" not in "".join(steps(at))
    assert "Total loss = L_MLM" in metrics(at)


@pytest.mark.parametrize("text, pair, kind, message", [
    ("", True, "warning", "Text A"), ("[CLS] [SEP]", False, "warning", "no token that can be masked"),
    ("!!! ?? **bold** <b>x</b>", True, "subheader", "Step 1 of 8"),
    ("the cat " * 5000, True, "info", "tokens were dropped")])
def test_bad_text_never_breaks_the_page(text, pair, kind, message):
    at = page()
    at.toggle(key="losses.pair").set_value(pair).run()
    at.text_area(key="losses.text_a").input(text).run()
    assert not at.exception
    assert any(message in e.value for e in getattr(at, kind)), [e.value for e in getattr(at, kind)]


def test_a_one_word_sentence_still_has_a_masked_token():
    at = page()
    at.toggle(key="losses.pair").set_value(False).run()
    at.text_area(key="losses.text_a").input("cat").run()
    at.toggle(key="losses.all").set_value(True).run()
    assert not at.exception
    assert "picked 1: positions 1" in texts(at)
    assert any(walkthrough.NO_B_REASON in i.value for i in at.info)
    assert "Total loss = L_MLM" in metrics(at)


def test_picking_step_names_every_excluded_token_and_the_exact_expected_count(shipped):
    at = page()
    at.button(key="losses.next").click().run()
    assert steps(at) == ["Step 2 of 8 · Pick the positions to predict"]
    shown, w = texts(at), engine(shipped, seed=0)
    assert sum(w.eligible) == 13
    assert "13 tokens can be picked. Never picked: the special tokens [PAD], [UNK], [CLS], [SEP], [MASK]" in shown
    assert "(here: [CLS] at position 0; [SEP] at positions 8, 15)" in shown
    # n·r + (1 − r)^n with the at-least-one rule, not n·r = 1.95
    assert "Expected number of picks: n·r + (1 − r)^n = 13 × 0.15 + 0.85^13 = 2.07." in shown
    assert "about 1.95" not in shown and "not [CLS] / [SEP]" not in shown
    caption = " ".join(c.value for c in at.caption)
    assert "skips only [CLS] and [SEP]" in caption and "no at-least-one rule" in caption


def test_random_tokens_choice_is_said_and_used(shipped):
    at = page()
    assert at.radio(key="losses.random_tokens").value == "vocabulary"  # as BERT, by default
    assert any("Active: the whole vocabulary, special tokens included (as in BERT)" in c.value for c in at.caption)
    at.toggle(key="losses.all").set_value(True).run()
    assert "Random tokens are drawn from the whole vocabulary" in texts(at)
    at.radio(key="losses.random_tokens").set_value("wordpieces").run()
    assert not at.exception
    assert any("Active: word pieces only (never a special token)" in c.value for c in at.caption)
    assert "Random tokens are drawn from word pieces only" in texts(at)


def test_frequency_table_shows_both_standard_errors_and_the_interval(shipped):
    at = page()
    table = next(df.value for df in at.dataframe if "se_rule" in df.value.columns)
    encoding = inputs.encode(shipped.tokenizer, shipped.model, "the cat sat on the mat .", "it was a warm afternoon .")
    expected = masking_stats.masking_frequencies(shipped.tokenizer, encoding, draws=2000, seed=0)
    assert {"se_rule", "se_draws", "low", "high", "inside"} <= set(table.columns) and "std_error" not in table
    assert table["se_rule"].tolist() == pytest.approx(expected["se_rule"].tolist())
    assert table["inside"].tolist() == expected["inside"].tolist()
    caption = " ".join(c.value for c in at.caption)
    assert "“SE (rule)” is the standard error the masking rule predicts" in caption
    assert "“SE (draws)” estimates the same from the spread of the draws themselves" in caption
