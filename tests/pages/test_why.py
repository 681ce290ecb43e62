"""The Why-this-guess page in AppTest: its strips, agreement matrix and causal check hold the numbers
`views.why.json_report` gives for the same input (what `attribute --json` prints), every picker changes what it
should and nothing else, bad words say why, and RoBERTa, ELECTRA's discriminator and a headless model open."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.explain import methods
from bertviz_lab.figures import token_labels
from bertviz_lab.ui.why import sections as ui_why
from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.why.ask import Ask
from tests.helpers.family_models import build
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.why_page import page
CAT = "the cat sat on the [MASK] ."
TWO = "the [MASK] sat on the [MASK] ."


def report(text: str = CAT, folder: Path | None = None, **options) -> dict:
    """What `attribute --json` prints for `text`: `views.why` run here, independently of the page."""
    ckpt = cached_checkpoint(str(folder or DEFAULT_CHECKPOINT), "cpu")
    result = vw.why(ckpt.model, ckpt.tokenizer, inputs.encode(ckpt.tokenizer, ckpt.model, text), Ask(**options))
    return vw.json_report(result, vw.deletion_for(result))


def titled(at: AppTest, start: str) -> dict:
    return next(f for f in figures(at) if f["layout"].get("title", {}).get("text", "").startswith(start))


def strips(at: AppTest) -> dict[str, np.ndarray]:
    """Each strip's raw values (the hover's), by its method's title."""
    (heatmap,) = titled(at, "Each method's answer")["data"]
    return dict(zip(heatmap["y"], array(heatmap["customdata"])))


def score_line(at: AppTest) -> str:
    return shown(next(m.value for m in at.markdown if m.value.startswith("**F = ")))


def assert_strips_are(at: AppTest, expected: dict) -> None:
    drawn = strips(at)
    assert list(drawn) == [vw.TITLES[k] for k in expected["methods"]]
    for key, values in expected["methods"].items():
        np.testing.assert_allclose(drawn[vw.TITLES[key]], values, rtol=1e-6, atol=1e-9, err_msg=key)
    labels = titled(at, "Each method's answer")["data"][0]["x"]
    assert labels == token_labels(expected["tokens"])


def test_the_strips_agreement_and_causal_check_are_the_reports_numbers():
    at = page()
    expected = report()
    assert at.title[0].value == "Why this guess?"
    assert_strips_are(at, expected)
    assert score_line(at) == (f"**F = logit(mat)** at [MASK] #1 (token 6) = {expected['score']:.4f};  "
                              f"p(mat) = {expected['probability']:.4f}")
    matrix = titled(at, "Do the methods rank")["data"][0]
    rho = np.array([[np.nan if r is None else r for r in row.values()] for row in expected["agreement"].values()])
    np.testing.assert_allclose(array(matrix["z"]), rho, atol=1e-9)
    aopc = next(d.value for d in at.dataframe if "AOPC" in d.value.columns)
    assert aopc["method"].tolist() == [vw.TITLES[k] for k in expected["methods"]]
    np.testing.assert_allclose(aopc["AOPC"], list(expected["deletion"]["aopc"].values()), atol=1e-9)
    assert aopc["beats random"].tolist() == list(expected["deletion"]["beats_random"].values())
    curves = titled(at, "p(mat) after each removal")["data"]
    occlusion = next(t for t in curves if t.get("name") == "occlusion")
    np.testing.assert_allclose(array(occlusion["y"]), expected["deletion"]["curves"]["occlusion"], atol=1e-9)
    random = np.array([c for c in expected["deletion"]["random_aopc"]])
    assert at.metric[0].value == f"{random.mean():.4f} ± {random.std():.4f}"
    ig = expected["ig"]
    assert any(f"delta = {ig['delta']:.3g}" in m.value for m in at.markdown)
    assert not at.warning  # the shipped model's integrated gradients converge on this sentence


def test_a_layer_and_head_change_the_attention_strip_only_and_run_no_method_again(monkeypatch):
    ui_why.EXPLAINED.clear()
    calls = []
    real = vw.why
    monkeypatch.setattr(vw, "why", lambda *a, **k: calls.append(k) or real(*a, **k))
    at = page()
    before = strips(at)
    at.segmented_control(key="why.layer").set_value(0).run()
    at.segmented_control(key="why.head").set_value(2).run()
    assert not at.exception and len(calls) == 1
    expected = report(layer=0, head=2)
    assert_strips_are(at, expected)
    assert not np.allclose(strips(at)["attention"], before["attention"])
    assert "(attention at layer 0, head 2)" in titled(at, "Each method's answer")["layout"]["title"]["text"]


def test_a_word_not_in_the_vocabulary_says_so_and_a_contrast_changes_f():
    at = page()
    at.text_input(key="why.target").input("zzzqqq").run()
    assert not at.exception and "not a single token" in at.error[0].value
    at.text_input(key="why.target").input("rug").run()
    at.text_input(key="why.contrast").input("mat").run()
    expected = report(target="rug", contrast="mat")
    assert not at.exception and not at.error
    assert score_line(at).startswith(f"**F = logit(rug) − logit(mat)** at [MASK] #1 (token 6) = "
                                     f"{expected['score']:.4f}")
    assert expected["score"] != pytest.approx(report(target="rug")["score"])
    assert_strips_are(at, expected)
    at.text_input(key="why.contrast").input("rug").run()
    assert "Target word and the Contrast word are the same token" in at.error[0].value


def test_several_masks_get_a_picker_and_no_mask_says_how_to_write_one():
    at = page(why__text_a=TWO)
    picker = at.selectbox(key="why.mask")
    assert picker.options == ["[MASK] #1 (token 2)", "[MASK] #2 (token 6)"]
    picker.set_value(1).run()
    assert not at.exception and "at [MASK] #2 (token 6)" in score_line(at)
    assert_strips_are(at, report(TWO, mask=1))
    at.text_area(key="why.text_a").input("the cat sat on the mat .").run()
    assert not at.exception and "has no [MASK]" in shown(at.info[0].value)


def test_a_costly_causal_check_waits_for_its_button(monkeypatch):
    ui_why.CHECKED.clear()  # a check another test ran on this sentence is kept for the class, and shows at once
    monkeypatch.setattr(ui_why, "AUTO_SECONDS", 0.0)
    at = page(why__text_a="the dog sat on the [MASK] .")
    assert not at.exception and not any("AOPC" in d.value.columns for d in at.dataframe)
    assert at.button(key="why.run").label == "Run the causal check"
    at.button(key="why.run").click().run()
    assert not at.exception and any("AOPC" in d.value.columns for d in at.dataframe)


def test_an_integrated_gradients_delta_too_large_is_flagged(monkeypatch):
    monkeypatch.setattr(methods, "DELTA_WARN", 0.0)  # any delta at all is now too large
    at = page()
    assert "did not converge" in at.warning[0].value


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("roberta")
    build("roberta", folder)
    return folder


@pytest.fixture(scope="module")
def discriminator(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("electra-discriminator")
    build("electra-discriminator", folder)
    return folder


def test_roberta_explains_its_own_mask_token(roberta):
    at = page(roberta, why__text_a=CAT)
    ckpt = load_checkpoint(roberta)
    expected = report(CAT, roberta)
    assert_strips_are(at, expected)
    assert "<mask>" in expected["tokens"] and "at <mask> #1" in score_line(at)
    said = " ".join(shown(m.value) for m in [*at.markdown, *at.info, *at.caption])
    assert "where the <mask> looked" in said  # every other word the page says of the mask names it so:
    assert said.count("[MASK]") == said.count("A typed [MASK] is read as its mask token, `<mask>`")
    assert ckpt.tokenizer.mask_token == "<mask>"


def test_the_electra_discriminator_explains_its_replaced_token_logit(discriminator):
    text = "the cat sat on the mat ."
    at = page(discriminator, why__text_a=text)
    picker = at.selectbox(key="why.token")
    assert picker.value == 1
    picker.set_value(3).run()
    expected = report(text, discriminator, position=3)
    assert not at.exception and score_line(at).startswith(
        f"**F = the replaced-token logit** at token 3 (sat) = {expected['score']:.4f}")
    assert_strips_are(at, expected)
    assert not at.text_input  # no target, no contrast: it guesses no words
    assert titled(at, "p(replaced) after each removal")


def test_a_model_without_mlm_or_replaced_token_head_says_so(headless_checkpoint):
    at = page(headless_checkpoint)
    assert "no masked-language-model (MLM) head" in at.error[0].value and not at.get("plotly_chart")


def test_an_example_where_attention_and_occlusion_disagree_opens_with_its_numbers():
    """Picking a built-in example writes it into the sentence box, explains its top guess, and its note is the
    search's; the strips are then that sentence's."""
    from bertviz_lab.ui.shell.text import plain
    from bertviz_lab.views.why.examples import examples

    at = page()
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    found = examples(ckpt.tokenizer, ckpt.config.family)
    picker = next(s for s in at.selectbox if s.label.startswith("Examples where attention and occlusion"))
    assert picker.value is None and [str(o) for o in picker.options] == [e.text for e in found]
    pronoun = next(e for e in found if e.kind == "pronoun")
    picker.set_value(pronoun).run()
    assert not at.exception
    assert at.text_area[0].value == pronoun.text
    assert any(c.value == plain(pronoun.note) for c in at.caption)
    assert_strips_are(at, report(pronoun.text))
    assert f"logit({pronoun.target})" in score_line(at)


def test_the_words_are_the_numbers_of_this_sentence():
    """The lead counts the methods that read F; the attention sentence is the deletion test's verdict here, not a
    fixed claim; the agreement title gives the number of tokens; a tie with the best random order is called one."""
    from bertviz_lab.explain import checks
    from bertviz_lab.explain.report import METHODS

    at = page()
    expected = report()
    assert at.caption[0].value == ui_why.lead() and "same for any target or contrast" in ui_why.lead()
    said = " ".join(shown(m.value) for m in [*at.markdown, *at.info, *at.caption])
    assert "not why the model guessed" not in said and "really does" not in said and "a clue to test" in said
    n = len(vw.why(*_shipped(), inputs.encode(_shipped()[1], _shipped()[0], CAT)).explanation.movable)
    assert titled(at, "Do the methods rank")["layout"]["title"]["text"].endswith(f"Spearman ρ over {n} tokens")
    verdict, aopc = expected["deletion"]["verdict"], expected["deletion"]["aopc"]
    sentence = next(shown(m.value) for m in at.markdown if "Of the rows read from attention" in m.value)
    for key in (k for k, m in METHODS.items() if m.kind == "attention"):
        name = f"{vw.TITLES[key]} ({aopc[key]:.3f}"
        clause = {"beats": "faster than all", "ties": "tied the best random order", "below": "did not beat them"}
        after = sentence.split(name)[1]  # the first verdict named after the method is its own
        assert min(clause, key=lambda v: after.find(clause[v]) % (len(after) + 1)) == verdict[key], key
    table = next(d.value for d in at.dataframe if "AOPC" in d.value.columns)
    assert table["against random"].tolist() == [ui_why.VERDICTS[v] for v in verdict.values()]
    assert checks.AOPC_TIE < 1e-9  # a tie is equality of the same removals' numbers, not closeness


def test_a_contrasts_causal_check_follows_sigmoid_f():
    at = page(why__target="rug", why__contrast="mat")
    expected = report(target="rug", contrast="mat")
    assert expected["deletion"]["follows"] == "sigmoid(F)"
    curves = titled(at, "p(rug | rug or mat) after each removal")["data"]
    occlusion = next(t for t in curves if t.get("name") == "occlusion")
    np.testing.assert_allclose(array(occlusion["y"]), expected["deletion"]["curves"]["occlusion"], atol=1e-9)
    assert array(occlusion["y"])[0] == pytest.approx(1 / (1 + np.exp(-expected["score"])), abs=1e-6)
    assert any("sigmoid(F), the probability of the target against the contrast" in shown(c.value) for c in at.caption)


def _shipped():
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    return ckpt.model, ckpt.tokenizer


# --- Issue 52: typed words stay text, long work shows progress, the causal check waits past its estimate ----------
PAYLOADS = ["[Click](https://evil.example/phish)", "![x](https://evil.example/track.png)",
            "<img src=https://evil.example/x.png>", "https://evil.example/bare"]


def assert_no_live_markup(at: AppTest) -> None:
    """No error, warning, info, caption or Markdown body draws a payload's link, image or HTML when rendered as
    Markdown, nor holds a bare address GFM would link ("https://" unbroken)."""
    from markdown_it import MarkdownIt

    render = MarkdownIt("commonmark").render  # raw HTML passes through it, as links and images do
    for element in [*at.error, *at.warning, *at.info, *at.caption, *at.markdown]:
        html = render(element.value)
        assert "<a " not in html and "<img" not in html and "https://evil" not in element.value, element.value


@pytest.mark.parametrize("field", ["why__target", "why__contrast"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_typed_word_in_an_error_is_shown_as_plain_text(field, payload):
    from bertviz_lab.ui.shell.text import plain

    at = page(**{field: payload})
    (error,) = at.error
    assert plain(f"'{payload}'") in error.value and "\\[" in plain(payload) + error.value
    assert_no_live_markup(at)


def test_a_sentence_of_payloads_is_explained_with_every_message_plain(monkeypatch):
    monkeypatch.setattr(ui_why, "AUTO_SECONDS", 0.0, raising=False)  # the causal check waits: not what is tested here
    at = page(why__text_a=f"{PAYLOADS[0]} the [MASK] . {PAYLOADS[2]}")  # the shipped model reads its first 64 tokens
    assert_no_live_markup(at)
    assert "8 (" in titled(at, "Each method's answer")["data"][0]["x"]  # explained: the link's own pieces
    at.text_input(key="why.target").input(PAYLOADS[0]).run()
    assert at.error and "evil" in at.error[0].value
    assert_no_live_markup(at)


def test_target_equal_to_contrast_is_said_before_any_work(monkeypatch):
    ui_why.EXPLAINED.clear()
    calls = []
    real = vw.why
    monkeypatch.setattr(vw, "why", lambda *a, **k: calls.append(k) or real(*a, **k))
    at = page(why__target="mat", why__contrast="mat")
    (error,) = at.error
    assert "Target word" in error.value and "Contrast word" in error.value and not calls
    at = page(why__contrast="mat")  # empty target: the top guess, which is mat here
    (error,) = at.error
    assert "Contrast word" in error.value and "top guess" in error.value and not calls


def test_progress_is_drawn_before_the_explanation_ends_whatever_the_models_size(monkeypatch):
    import streamlit

    ui_why.EXPLAINED.clear()
    drawn, real = [], streamlit.progress
    monkeypatch.setattr(streamlit, "progress", lambda value, text=None: drawn.append((value, text))
                        or real(value, text=text))
    page()
    assert drawn and drawn[0][0] < 1 and any("Running" in (text or "") for _, text in drawn)


def test_the_causal_check_waits_for_its_button_past_its_estimate_and_then_the_button_goes(monkeypatch):
    ui_why.EXPLAINED.clear()
    ui_why.CHECKED.clear()
    checked = []
    real = vw.deletion_for
    monkeypatch.setattr(vw, "deletion_for", lambda *a, **k: checked.append(1) or real(*a, **k))
    monkeypatch.setattr(ui_why, "AUTO_SECONDS", 0.0)  # any estimate is now past the threshold
    first, second = page(), page()  # two sessions of the class
    for at in (first, second):
        assert not any("AOPC" in d.value.columns for d in at.dataframe) and not checked
        assert at.button(key="why.run").label == "Run the causal check"
        offer = next(c.value for c in at.caption if "on this machine" in c.value)
        assert re.search(r"about [\d.,]+ (s|seconds|minutes?)", offer) and "runs" not in offer
    first.button(key="why.run").click().run()
    assert not first.exception and any("AOPC" in d.value.columns for d in first.dataframe) and len(checked) == 1
    second.button(key="why.run").click().run()
    for at in (first, second):
        assert any("AOPC" in d.value.columns for d in at.dataframe)
        assert "why.run" not in [b.key for b in at.button]
        assert not any("on this machine" in c.value for c in at.caption)
    assert len(checked) == 1  # the second session read the first one's check


def test_value_zeroing_is_the_ninth_row_read_from_the_layers_mixing():
    """Its strip is explain/patch_grids.py's value zeroing rolled out to the [MASK], it is listed apart from the rows
    read from attention and from F, it has its row in the 9 x 9 agreement matrix, and its deletion curve is dashed."""
    import torch

    from bertviz_lab.explain import patch_grids

    at = page()
    model, tokenizer = _shipped()
    encoding = inputs.encode(tokenizer, model, CAT)
    mixing = patch_grids.value_zeroing(model, torch.tensor([encoding.ids]), torch.tensor([encoding.segment_ids]))
    expected = patch_grids.value_zeroing_rollout(mixing, encoding.tokens.index("[MASK]"))
    np.testing.assert_allclose(strips(at)["value zeroing"], expected, rtol=1e-6, atol=1e-9)
    listed = next(shown(m.value) for m in at.markdown if "Read from how the layers mix the tokens" in m.value)
    assert "**value zeroing**" in listed and "**occlusion**" not in listed and "**rollout**" not in listed
    assert np.asarray(array(titled(at, "Do the methods rank")["data"][0]["z"])).shape == (9, 9)
    curves = {t.get("name"): t for t in titled(at, "p(mat) after each removal")["data"]}
    assert curves["value zeroing"]["line"]["dash"] == "dash" and curves["occlusion"]["line"]["dash"] == "solid"
