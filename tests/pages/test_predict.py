"""The Mask & predict page (AppTest on the shipped model): every widget, bad input, charts = tables."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.figures.predictions import confidence_strip, prediction_bars
from tests.helpers.figure_data import figures
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "predict.py")
CAT = "the cat sat on the [MASK] ."


def page(text: str | None = None) -> AppTest:
    at = app_test(PAGE).run()
    if text is not None:
        at.text_area(key="predict.text_a").input(text).run()
    assert not at.exception, at.exception
    return at


def candidates(at: AppTest, index: int = 0) -> list[str]:
    return at.dataframe[index].value["token"].tolist()


def frame_with(at: AppTest, column: str):
    """The first table holding `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def read(text: str) -> str:
    """The tokens "What BERT reads" shows for `text` (the shipped model has a token for each of these words)."""
    return f"[CLS] {text} [SEP]"


def codes(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


def test_default_sentence_guesses_mat_and_the_chart_shows_the_table():
    at = page()
    assert at.title[0].value == "Mask & predict"
    assert "mat" in candidates(at)[:3]
    assert codes(at) == [read(CAT), "the cat sat on the «mat» ."]
    table = at.dataframe[0].value
    (bars,) = figures(at)
    assert bars["data"][0]["y"] == table["token"].tolist()
    assert bars["data"][0]["x"] == pytest.approx(table["probability"].tolist())
    assert bars["data"][0]["text"][0] == f"{table['probability'][0]:.1%}"
    assert at.metric[0].label == "Entropy (uncertainty)" and at.metric[0].value.endswith("nats")
    assert at.pills[0].options == ["the", "cat", "sat", "on", "the₂", "\\."]  # the typed [MASK] is no pill


def test_no_mask_says_how_to_mask_and_clicking_a_word_masks_it():
    at = page("the cat sat on the mat .")
    assert "Type [MASK]" in at.info[0].value and "click words" in at.info[0].value
    assert not at.dataframe
    at.pills[0].set_value(["mat"]).run()
    assert not at.exception and not at.info
    assert codes(at)[0] == read(CAT) and "mat" in candidates(at)[:3]
    assert at.dataframe[1].value["hidden word"].tolist() == ["mat"]
    at.text_area(key="predict.text_a").input("a mat is on the floor").run()  # the clicked word follows its text
    assert codes(at)[0] == read("a [MASK] is on the floor")
    at.text_area(key="predict.text_a").input("the dog sat .").run()  # ... and is dropped once it is gone
    assert not at.exception and at.pills[0].value == [] and at.info


def test_clicking_a_split_word_masks_all_its_pieces_and_fills_them_both_ways():
    at = page("the biggest cat sat on the mat .")  # biggest = big ##g ##e ##s ##t
    at.pills[0].set_value(["biggest", "mat"]).run()
    assert not at.exception
    assert codes(at)[0] == read("the [MASK] [MASK] [MASK] [MASK] [MASK] cat sat on the [MASK] .")
    assert len(at.get("plotly_chart")) == 2  # more than four masks: one bar chart, picked, plus the entropy strip
    assert [m.value for m in at.markdown if m.value.startswith("**Mask")] == ["**Mask #1** · token 2"]
    at.selectbox(key="predict.inspect").set_value(5).run()
    assert [m.value for m in at.markdown if m.value.startswith("**Mask")] == ["**Mask #6** · token 11"]
    independent, iterative = codes(at)[1:3]
    assert independent.count("«") == 6 and iterative.count("«") == 6 and "[MASK]" not in iterative
    rows = at.dataframe[1].value
    assert rows["step"].tolist() == [1, 2, 3, 4, 5, 6] and rows["hidden word"].tolist()[-1] == "mat"


def test_several_masks_side_by_side_with_entropy_chart_and_steps():
    at = page("i went to the [MASK] to [MASK] money .")
    assert [m.value for m in at.markdown if m.value.startswith("**")][-2:] == [
        "**Independent**: every mask from one pass; no guess sees another.",
        "**Left-to-right iterative**: fill the leftmost mask with its top guess, run again, repeat."]
    rows, steps = at.dataframe[2].value, at.dataframe[3].value
    strip = figures(at)[-1]["data"][0]
    assert strip["y"] == pytest.approx(rows["entropy (nats)"].tolist())
    assert [label.split(" → ")[1] for label in strip["x"]] == rows["independent"].tolist()
    assert steps["step"].tolist() == [1, 2] and "«" in steps["sentence after this step"][0]
    assert rows["left-to-right"][0] == rows["independent"][0]


def test_top_k_and_temperature_change_the_table_and_the_bars():
    at = page()
    at.slider(key="predict.top_k").set_value(12).run()
    assert len(candidates(at)) == 12 and len(figures(at)[0]["data"][0]["y"]) == 12
    cold = at.dataframe[0].value
    entropy_cold = float(at.metric[0].value.split()[0])
    at.slider(key="predict.temperature").set_value(2.5).run()
    hot = at.dataframe[0].value
    assert hot["token"].tolist() == cold["token"].tolist()  # temperature never changes the ranking
    assert hot["probability"][0] < cold["probability"][0] and float(at.metric[0].value.split()[0]) > entropy_cold
    assert hot["logit"].tolist() == pytest.approx(cold["logit"].tolist())


def test_causal_toggle_hides_the_right_context_and_says_so():
    at = page("i love [MASK] language processing .")
    assert candidates(at)[0] == "natural"
    at.toggle(key="predict.causal").set_value(True).run()
    assert not at.exception and candidates(at)[0] != "natural"
    warning = next(w.value for w in at.warning if "words on its left" in w.value)
    # an ablation of a bidirectional model, not what a left-to-right model would predict
    assert "Ablation, out of distribution" in warning and "not what a left-to-right model" in warning
    assert "ablation" in at.toggle(key="predict.causal").label


def test_entropy_at_another_temperature_is_named_as_the_tempered_distributions():
    at = page("the [MASK] sat on the [MASK] .")
    assert at.metric[0].label == "Entropy (uncertainty)"
    assert "entropy (nats)" in frame_with(at, "independent")
    at.slider(key="predict.temperature").set_value(0.5).run()
    assert not at.exception
    assert at.metric[0].label == "Entropy of the tempered distribution (τ = 0.5)"
    rows = frame_with(at, "independent")
    assert "entropy at τ = 0.5 (nats)" in rows and "entropy (nats)" not in rows
    assert any("tempered distribution softmax(logits / 0.5)" in c.value for c in at.caption)
    strip = figures(at)[-1]
    assert strip["layout"]["yaxis"]["title"]["text"] == "entropy at τ = 0.5 (nats)"
    assert strip["data"][0]["y"] == pytest.approx(rows["entropy at τ = 0.5 (nats)"].tolist())


def test_pair_toggle_adds_segment_b_and_its_words():
    at = page()
    at.toggle(key="predict.pair").set_value(True).run()
    at.text_area(key="predict.text_b").input("it was soft .").run()
    assert not at.exception
    assert codes(at)[0] == read(CAT + " [SEP] it was soft .")
    assert at.pills[0].options[-4:] == ["it", "was", "soft", "\\.₂"]
    at.pills[0].set_value(["soft"]).run()
    assert codes(at)[0] == read("the cat sat on the [MASK] . [SEP] it was [MASK] .")


@pytest.mark.parametrize("text, kind, message", [
    ("", "warning", "empty"),
    ("   \n ", "warning", "empty"),
    ("\u200b\u200b", "warning", "no characters the tokenizer can read"),
    ("the [MASK] " + "cat " * 5000, "info", "tokens were dropped"),
])
def test_unusable_or_overlong_text_gives_a_message(text, kind, message):
    at = page(text)
    assert any(message in box.value for box in at.get(kind))


@pytest.mark.parametrize("text, guessed", [
    ("[MASK] [MASK] [MASK]", 3),
    ("[MASK] " * 60, 60),
    ("i love 🐱 [MASK] .", 1),
    ("猫 [MASK] 日本語", 1),
    ("שלום [MASK] עולם", 1),
    ("the\u200bcat sat on the [MASK] .", 1),
])
def test_strange_text_is_predicted_without_breaking(text, guessed):
    at = page(text)
    masks = at.dataframe[-2 if guessed > 1 else -1].value
    assert len(masks) == guessed and masks["independent"].str.len().min() > 0
    if guessed == 60:
        assert any("filled the remaining 53 masks together" in c.value for c in at.caption)
    if text.startswith("[MASK]"):
        assert not at.pills  # nothing left to click


def test_script_tags_are_shown_as_text_never_as_html():
    at = page("<script>alert(1)</script> [MASK] <b>bold</b>")
    assert not at.get("html")
    assert all(not m.proto.allow_html and "<script" not in m.value for m in at.markdown)
    options = at.pills[0].options
    assert options[:3] == ["\\<", "script", "\\>"] and "\\/" in options  # Markdown escapes: shown literally
    at.pills[0].set_value(["alert"]).run()
    assert not at.exception and codes(at)[0].count("[MASK]") == 6  # a ##l ##e ##r ##t and the typed one


def test_model_without_mlm_head_says_so(headless_checkpoint):
    at = app_test(PAGE)
    at.session_state["model.path"] = str(headless_checkpoint)
    at.run()
    assert not at.exception and "no masked-language-model (MLM) head" in at.error[0].value
    assert not at.text_area


def test_bar_chart_escapes_tokens_and_keeps_numbers_as_categories():
    fig = prediction_bars([{"token": "<b>", "probability": 0.6, "logit": 2.0},
                           {"token": "1", "probability": 0.4, "logit": 1.0}])
    assert list(fig.data[0].y) == ["&lt;b&gt;", "1"] and fig.layout.yaxis.type == "category"
    assert fig.layout.yaxis.autorange == "reversed" and list(fig.data[0].text) == ["60.0%", "40.0%"]
    strip = confidence_strip([{"mask": 1, "position": 3, "independent": "<i>", "entropy (nats)": 0.5}], 7.0)
    assert list(strip.data[0].x) == ["#1 → &lt;i&gt;"] and strip.layout.shapes[0].y0 == 7.0


def test_what_bert_reads_shows_its_tokens_and_names_the_words_it_reads_in_pieces():
    at = page("the capital of france is [MASK] .")
    assert codes(at)[0] == "[CLS] the cap ##i ##t ##a ##l of france is [MASK] . [SEP]"
    (warning,) = at.warning
    assert "no token for capital \\(cap \\#\\#i \\#\\#t" in warning.value and "france" not in warning.value
    assert "2,171 tokens" in warning.value and "bert-base-uncased" in warning.value
    at.text_area(key="predict.text_a").input(CAT).run()
    assert not at.warning and any("only the lab's story world" in c.value for c in at.caption)


def test_a_model_outside_the_story_world_names_its_unknown_words_only(tiny_checkpoint):
    at = app_test(PAGE)
    at.session_state["model.path"] = str(tiny_checkpoint)
    at.run()
    at.text_area(key="predict.text_a").input("the zebra sat on the [MASK] .").run()
    assert not at.exception
    (warning,) = at.warning
    assert "zebra as \\[UNK\\]" in warning.value and "story world" not in warning.value
    assert not any("story world" in c.value for c in at.caption)


def test_a_typed_sentence_with_hidden_characters_says_so_and_shows_what_the_model_reads():
    # U+202E draws "tam" as "mat" in the box; the shipped tokenizer drops it silently and reads "tam"
    at = page("the cat sat on the \u202etam [MASK] .")
    notes = [i.value for i in at.info if "invisible or direction-changing" in i.value]
    assert len(notes) == 1 and "(U+202E)" in notes[0] and not at.exception
    assert not [i for i in page("the cat sat on the [MASK] .").info if "invisible" in i.value]


def test_a_hangul_filler_that_looks_like_a_space_is_named_and_writing_is_not():
    # "the cat sat" on screen; the model reads one word, cat U+3164 sat, which it does not know
    at = page("the cat\u3164sat on the [MASK] .")
    notes = [i.value for i in at.info if "invisible or direction-changing" in i.value]
    assert len(notes) == 1 and "(U+3164)" in notes[0]
    assert codes(at)[0] == read("the [UNK] on the [MASK] .")
    for writing in ("i \u2764\ufe0f the [MASK] .", "the \U0001f468\u200d\U0001f469\u200d\U0001f467 sat on the [MASK] .",
                    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 [MASK] .", "שלום [MASK] עולם"):
        at.text_area(key="predict.text_a").input(writing).run()
        assert not at.exception and not [i for i in at.info if "invisible" in i.value], writing


def test_the_guesses_line_tells_small_probabilities_from_zero():
    from bertviz_lab.views.predict.guesses import share
    assert [share(p) for p in (0.26, 0.1, 0.05, 0.00046, 1e-7)] == ["26%", "10%", "5%", "0.046%", "< 0.001%"]
