"""The Attention page in AppTest: every widget, every bad input, and the figures' data
checked against the shipped model's own attention weights."""

import json
import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.figures import token_labels
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.attention import explorer as av
from bertviz_lab.views import inputs
from bertviz_lab.views.attention import layer as lv
from tests.helpers.figure_data import array, figures
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "attention.py")
DEFAULT = "the animal did not cross the street because it was too tired ."
COL_WEIGHT, COL_MODEL = "weight = exp ÷ Σ", "model weight"
COL_SCORE = "÷√d_head (√64 = 8) = score"  # the shipped model: d_head = 256 / 4 heads = 64
SMALL_WEIGHT = 0.000123456789  # %.6f would show 0.000123: 3 significant digits


def page(text: str | None = None) -> AppTest:
    at = app_test(PAGE).run()
    if text is not None:
        at.text_area(key="attn.text_a").input(text).run()
    return at


def shipped_weights(text_a: str, text_b: str | None = None):
    """(tokens, (L, H, T, T) weights) computed here, independently of the page."""
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text_a, text_b)
    return encoding, inputs.attention_matrices(inputs.run(ckpt.model, encoding, trace=True))


def titled(at: AppTest, start: str) -> dict:
    return next(f for f in figures(at) if f["layout"].get("title", {}).get("text", "").startswith(start))


def heatmap(at: AppTest) -> dict:
    return figures(at)[0]["data"][0]


def steps_table(at: AppTest):
    return next(df.value for df in at.dataframe if COL_WEIGHT in df.value.columns)


def layer_table(at: AppTest):
    return next(df.value for df in at.dataframe if lv.STEP in df.value.columns)


def shipped_hidden(text_a: str, layer: int, token: int, off: list[str] = ()) -> np.ndarray:
    """The layer's output for one token, from a forward run here (heads `off` switched off)."""
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text_a)
    mask = av.head_mask(list(off), ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads)
    return inputs.run(ckpt.model, encoding, head_mask=mask).hidden_states[layer + 1][0, token].numpy()


def sprintf_js(fmt: str, x: float) -> str:
    """What a NumberColumn shows: Streamlit hands its format to sprintf-js, where %.Ng is
    String(Number(x.toPrecision(N))), %.Nf is x.toFixed(N) and %.Ne is x.toExponential(N)."""
    match = re.fullmatch(r"%\.(\d+)([efg])", fmt)
    assert match, f"a format this test cannot read: {fmt}"
    digits, kind = int(match[1]), match[2]
    if kind != "g":
        return f"{x:.{digits}{kind}}"
    shortest = repr(float(f"{x:.{digits - 1}e}"))  # JS's String(Number) is also the shortest round trip,
    return shortest.removesuffix(".0")  # but writes a whole number without ".0"


def significant_digits(text: str) -> int:
    """'0.000123457' -> 6, '0.000123' -> 3, '1.23457e-05' -> 6."""
    return len(text.lstrip("-").lower().split("e")[0].replace(".", "").lstrip("0"))


def column_formats(at: AppTest, column: str) -> dict:
    """{column: format} of the dataframe that has `column`, as the page configured it."""
    element = next(df for df in at.dataframe if column in df.value.columns)
    configs = json.loads(element.proto.columns)  # also holds e.g. the hidden index, without a format
    return {name: config["type_config"]["format"] for name, config in configs.items() if "type_config" in config}


def markdown_text(at: AppTest) -> str:
    """Everything rendered as markdown: titles, captions, notes, alerts."""
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "subheader", "title")
    return "\n".join(str(e.value) for kind in kinds for e in at.get(kind))


def test_default_render_matches_the_model():
    at = page()
    assert not at.exception
    encoding, weights = shipped_weights(DEFAULT)
    trace = heatmap(at)
    z = array(trace["z"])
    assert trace["x"] == token_labels(encoding.tokens) and trace["y"] == token_labels(encoding.tokens)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(z, weights[0, 0], atol=1e-6)
    assert figures(at)[0]["layout"]["title"]["text"] == "Layer 0 · head 0"
    query = at.selectbox(key="attn.query")
    assert query.value == encoding.tokens.index("it")
    np.testing.assert_allclose(steps_table(at)[COL_WEIGHT], z[query.value], atol=1e-6)
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["filename"] == "attention_L0_H0"
    assert at.download_button[0].proto.label == "Download this matrix (CSV)"
    assert any(plain("Add [MASK]") in i.value for i in at.info)  # the message, as plain text


def test_layer_and_head_pickers_pick_the_matrix():
    at = page()
    at.button_group(key="attn.layer").set_value(2)
    at.button_group(key="attn.head").set_value(3).run()
    assert not at.exception
    _, weights = shipped_weights(DEFAULT)
    np.testing.assert_allclose(array(heatmap(at)["z"]), weights[2, 3], atol=1e-6)
    assert figures(at)[0]["layout"]["title"]["text"] == "Layer 2 · head 3"
    assert "Layer 2, head 3." in markdown_text(at)


def test_mean_over_heads():
    at = page()
    at.button_group(key="attn.layer").set_value(1)
    at.toggle(key="attn.mean").set_value(True).run()
    _, weights = shipped_weights(DEFAULT)
    z = array(heatmap(at)["z"])
    np.testing.assert_allclose(z, weights[1].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)
    assert "steps are per head" in markdown_text(at)


def test_hide_specials_drops_cls_and_sep_without_renormalising():
    at = page()
    at.toggle(key="attn.hide").set_value(True).run()
    encoding, weights = shipped_weights(DEFAULT)
    labels = token_labels(encoding.tokens)[1:-1]
    trace = heatmap(at)
    assert trace["x"] == labels and trace["y"] == labels
    assert (array(trace["z"]).sum(axis=1) < 1.0).all()
    np.testing.assert_allclose(array(trace["z"]), weights[0, 0, 1:-1, 1:-1], atol=1e-6)
    assert "Rows no longer sum to 1" in markdown_text(at)


def test_pair_and_its_filters():
    at = page("the cat sat on the mat .")
    assert not at.get("button_group") or all(b.key != "attn.block" for b in at.get("button_group"))
    at.toggle(key="attn.pair").set_value(True).run()
    at.text_area(key="attn.text_b").input("it was a warm afternoon .").run()
    encoding, weights = shipped_weights("the cat sat on the mat .", "it was a warm afternoon .")
    labels = token_labels(encoding.tokens)
    assert heatmap(at)["x"] == labels
    a = [i for i, s in enumerate(encoding.sequence_ids) if s == 0]
    b = [i for i, s in enumerate(encoding.sequence_ids) if s == 1]
    at.button_group(key="attn.block").set_value("A→B").run()
    trace = heatmap(at)
    assert trace["y"] == [labels[i] for i in a] and trace["x"] == [labels[i] for i in b]
    np.testing.assert_allclose(array(trace["z"]), weights[0, 0][np.ix_(a, b)], atol=1e-6)
    assert json.loads(at.get("plotly_chart")[0].proto.config)["toImageButtonOptions"]["filename"] == \
        "attention_L0_H0_AtoB"
    at.button_group(key="attn.block").set_value("B→A").run()
    assert heatmap(at)["y"] == [labels[i] for i in b] and not at.exception


def test_switching_heads_off_changes_predictions_and_marks_the_grid():
    at = page("the animal did not cross the [MASK] because it was too tired .")
    before = next(df.value for df in at.dataframe if "all heads" in df.value.columns)
    assert "heads off" not in before.columns and len(before) == 5
    at.session_state["attn.grid"] = True  # open the grid expander
    at.multiselect(key="attn.off").set_value(["L0 H0", "L3 H1"]).run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "all heads" in df.value.columns)
    assert list(table["all heads"]) == list(before["all heads"])
    assert "heads off" in table.columns and table["p (heads off)"].between(0, 1).all()
    grid = titled(at, "All layers")
    titles = [a["text"] for a in grid["layout"]["annotations"]]
    assert "L0 H0 (off)" in titles and "L3 H1 (off)" in titles and "L0 H1" in titles
    assert "2 head(s) switched off: L0 H0, L3 H1" in markdown_text(at)
    assert "switched off" in markdown_text(at)


def test_grid_draws_every_head_only_when_open():
    at = page()
    assert len(figures(at)) == 5 and all("All layers" not in str(f["layout"].get("title")) for f in figures(at))
    at.session_state["attn.grid"] = True
    at.toggle(key="attn.hide").set_value(True).run()
    grid = titled(at, "All layers")
    encoding, weights = shipped_weights(DEFAULT)
    assert len(grid["data"]) == 16 and grid["data"][0]["x"] == token_labels(encoding.tokens)[1:-1]
    np.testing.assert_allclose(array(grid["data"][13]["z"]), weights[3, 1, 1:-1, 1:-1], atol=1e-6)
    assert grid["data"][13]["xaxis"] == "x14" and grid["layout"]["annotations"][13]["text"] == "L3 H1"


def test_query_picker_drives_the_steps_table_and_bars():
    at = page()
    at.selectbox(key="attn.query").set_value(2).run()
    z = array(heatmap(at)["z"])
    steps = steps_table(at)
    np.testing.assert_allclose(steps[COL_WEIGHT], z[2], atol=1e-6)
    bars = titled(at, "Layer 0 · head 0 · query")
    np.testing.assert_allclose(array(bars["data"][0]["y"]), z[2], atol=1e-6)
    assert "query 2 animal" in bars["layout"]["title"]["text"]
    context = next(df.value for df in at.dataframe if "v[0]" in df.value.columns)
    assert context.index[-1] == "Σ = context"
    key = at.selectbox(key="attn.key").value
    assert key == int(z[2].argmax())
    q_k = titled(at, "q of 2 animal")
    dot = array(q_k["data"][2]["y"]).sum()
    assert q_k["data"][2]["name"] == "q × k"
    assert steps.loc[steps["key"] == at.selectbox(key="attn.key").format_func(key), "q·k"].item() == pytest.approx(dot)
    assert f"q·k = Σ q × k = {dot:.4f}" in at.text[0].value


def test_temperature_is_a_labelled_what_if():
    at = page()
    at.slider(key="attn.tau").set_value(0.5).run()
    assert not at.exception
    assert any("What-if, not what the model computes" in w.value for w in at.warning)
    z = array(heatmap(at)["z"])
    steps = steps_table(at)
    query = at.selectbox(key="attn.query").value
    np.testing.assert_allclose(steps[COL_MODEL], z[query], atol=1e-6)
    assert steps[COL_WEIGHT].max() > steps[COL_MODEL].max()  # τ < 1 sharpens
    titles = [f["layout"].get("title", {}).get("text", "") for f in figures(at)]
    assert any(t.startswith("WHAT-IF τ = 0.5") for t in titles)


LONG = " ".join(["the cat sat on the mat ."] * 715)  # 5,005 words


@pytest.mark.parametrize("text, kind, message", [
    ("", "warning", "Text A"),
    ("     ", "warning", "Text A"),
    ("\u200b\u200d\u200b", "warning", "no characters the tokenizer can read"),
    (LONG, "info", "tokens were dropped"),
])
def test_text_the_model_cannot_read_gives_a_message(text, kind, message):
    at = page(text)
    assert not at.exception
    assert any(message in e.value for e in at.get(kind))
    if kind == "info":  # the truncated text is still shown, at the model's 64 tokens
        assert len(heatmap(at)["x"]) == 64


@pytest.mark.parametrize("text, masks", [
    ("[MASK] [MASK] [MASK]", 3),
    (" ".join(["[MASK]"] * 60), 60),
    ("the cat 😀 sat on the [MASK] .", 1),
    ("猫は マットの上に 座った [MASK]", 1),
    ("החתול ישב על [MASK] השטיח", 1),
    ("the\u200bcat sat\u200d on the [MASK] .", 1),
])
def test_odd_text_renders_with_predictions(text, masks):
    at = page(text)
    assert not at.exception
    table = next(df.value for df in at.dataframe if "all heads" in df.value.columns)
    assert table["[MASK] at"].nunique() == masks
    np.testing.assert_allclose(array(heatmap(at)["z"]).sum(axis=1), 1.0, atol=1e-5)


def test_script_tags_stay_text():
    at = page("<script>alert(1)</script> the cat")
    assert not at.exception
    assert at.text_area(key="attn.text_a").value.startswith("<script>")
    assert "<script" not in markdown_text(at)
    encoding, _ = shipped_weights("<script>alert(1)</script> the cat")
    assert heatmap(at)["x"] == token_labels(encoding.tokens)  # plotly gets escaped labels


def test_a_model_without_mlm_head_says_so(tmp_path, tiny_config, tiny_tokenizer):
    torch.manual_seed(0)
    bare = BertForPreTraining(tiny_config, mlm_head=False, nsp_head=False, pooler=False)
    folder = save_checkpoint(bare, tiny_tokenizer, tmp_path / "bare")
    at = page()  # start on the shipped 4 x 4 model with choices the tiny model does not have
    at.button_group(key="attn.layer").set_value(3)
    at.button_group(key="attn.head").set_value(3)
    at.multiselect(key="attn.off").set_value(["L3 H3"])
    at.selectbox(key="attn.query").set_value(14).run()
    at.session_state["model.path"] = str(folder)
    at.run()
    at.text_area(key="attn.text_a").input("the [MASK] sat on the mat .").run()
    assert not at.exception
    assert any("no MLM head" in i.value for i in at.info)
    assert len(heatmap(at)["x"]) == 9
    assert len(at.button_group(key="attn.layer").options) == 2
    assert at.button_group(key="attn.layer").value == 0 and at.multiselect(key="attn.off").value == []
    assert at.selectbox(key="attn.query").value < 9
    assert "÷√d_head (√8 = 2.82843) = score" in steps_table(at).columns  # d_head = 32 / 4 = 8
    assert "÷ √d_head (√8 = 2.82843)" in at.text[0].value
    assert layer_table(at)[lv.SIZE].tolist()[4:6] == ["d = 32", "d_ff = 64"]


def test_a_shorter_sentence_forgets_a_query_it_no_longer_has():
    at = page()
    at.selectbox(key="attn.query").set_value(13).run()
    at.text_area(key="attn.text_a").input("the cat sat .").run()
    assert not at.exception
    assert at.selectbox(key="attn.query").value == 1
    assert len(steps_table(at)) == 6


def test_weights_show_six_significant_digits_on_hover_and_in_the_tables():
    at = page()
    at.slider(key="attn.tau").set_value(0.5).run()  # adds the model-weight column
    hover = heatmap(at)["hovertemplate"]
    spec = re.search(r"%{z:([^}]*)}", hover)[1]  # d3-format
    assert re.fullmatch(r"\.\d+~?[eg]", spec) and significant_digits(format(SMALL_WEIGHT, spec.replace("~", ""))) >= 6
    assert "Hover a cell for its weight to 6 significant digits." in markdown_text(at)
    steps = column_formats(at, COL_WEIGHT)
    for column in ("exp(x − max)", "Σ exp", COL_WEIGHT, COL_MODEL):
        assert significant_digits(sprintf_js(steps[column], SMALL_WEIGHT)) >= 6, (column, steps[column])
        assert sprintf_js(steps[column], 0.5) == "0.5" and sprintf_js(steps[column], 1.0) == "1"
    assert significant_digits(sprintf_js(column_formats(at, "v[0]")["weight"], SMALL_WEIGHT)) >= 6
    assert sprintf_js("%.6f", SMALL_WEIGHT) == "0.000123"  # what the table showed before: 3 digits


def test_the_score_column_and_the_qk_line_name_d_head():
    at = page()
    assert COL_SCORE in steps_table(at).columns and "÷√d = score" not in steps_table(at).columns
    assert "÷ √d_head (√64 = 8)   →   score" in at.text[0].value


def test_the_rest_of_the_layer_lands_on_the_models_hidden_state():
    at = page()
    assert not at.exception
    text = markdown_text(at)
    assert "After attention: the rest of the layer for this query" in text
    assert "Post-LN, as in the original BERT: x = LayerNorm(x + Sublayer(x))" in text
    assert "the activation is GELU, exact" in text
    query = at.selectbox(key="attn.query").value
    table = layer_table(at)
    assert table[lv.STEP].iloc[0] == "input x" and table[lv.STEP].iloc[-1] == "LayerNorm → output"
    assert table[lv.SIZE].iloc[5] == "d_ff = 1024" and table[lv.EQUATION].iloc[1] == "c = [head₀; …; head₃]"
    np.testing.assert_allclose(table.iloc[-1, 4:].to_numpy(float), shipped_hidden(DEFAULT, 0, query)[:8], atol=1e-5)
    within = re.search(r"hidden_states\[1\]\) to within ([0-9.e+-]+)\.", text)
    assert within and float(within[1]) < 1e-5
    concat = re.search(r"c equals the heads' contexts the model computed to within ([0-9.e+-]+),", text)
    assert concat and float(concat[1]) < 1e-5
    bars = titled(at, "Layer 0 · query")
    assert bars["data"][0]["y"][-1] == "LayerNorm → output"
    np.testing.assert_allclose(array(bars["data"][0]["x"]), table[lv.NORM], rtol=1e-6)


def test_the_rest_of_the_layer_with_a_head_switched_off():
    at = page()
    at.button_group(key="attn.layer").set_value(2)
    at.multiselect(key="attn.off").set_value(["L2 H1"])
    at.selectbox(key="attn.query").set_value(3).run()
    assert not at.exception
    text = markdown_text(at)
    assert "Switched off here: head 1, zeros in c." in text
    out = layer_table(at).iloc[-1, 4:].to_numpy(float)
    np.testing.assert_allclose(out, shipped_hidden(DEFAULT, 2, 3, ["L2 H1"])[:8], atol=1e-5)
    assert not np.allclose(out, shipped_hidden(DEFAULT, 2, 3)[:8], atol=1e-5)  # the head mattered
    assert float(re.search(r"hidden_states\[3\]\) to within ([0-9.e+-]+)\.", text)[1]) < 1e-5
