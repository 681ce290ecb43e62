"""The Representations page in AppTest: each tab draws from the shipped model's own numbers, only the open
tab computes, and every bad input is a message."""

import json
from pathlib import Path

import numpy as np
import pytest
from figure_data import array
from streamlit.testing.v1 import AppTest

from bertviz_lab.corpus.senses import examples
from bertviz_lab.ui.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.representations import set_lines
from bertviz_lab.views import inputs
from bertviz_lab.views import neighbours as nv
from bertviz_lab.views import representations as rv
from bertviz_lab.views.representations import embedding_layer

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "representations.py")
CONTEXTS, NEIGHBOURS, LENS, GEOMETRY, SHAPES = ("Same word, different contexts", "Nearest neighbours", "Logit lens",
                                                "Embedding geometry", "Shapes and padding")


def page(tab: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    if tab:
        at.session_state["repr.tab"] = tab
    return at.run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


@pytest.fixture(scope="module")
def shipped():
    return cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")


def test_the_first_tab_draws_the_bank_sentences_at_the_last_layer(shipped):
    at = page()
    assert not at.exception and [t.label for t in at.tabs] == [CONTEXTS, NEIGHBOURS, LENS, GEOMETRY, SHAPES]
    heatmap, lines, scatter = figures(at)
    expected = rv.word_in_context(shipped.model, shipped.tokenizer, "bank", [s for s, _ in examples("bank")])
    sims = rv.cosines(expected.vectors)
    assert np.allclose(array(heatmap["data"][0]["z"]), sims[4], atol=1e-6)
    assert "layer 4" in heatmap["layout"]["title"]["text"]
    by_sense = rv.sense_similarity(sims, [sense for _, sense in examples("bank")])
    assert np.allclose(array(lines["data"][0]["y"]), by_sense[rv.SAME]) and lines["data"][0]["name"] == rv.SAME
    assert [trace["name"] for trace in scatter["data"]] == ["money", "river"]
    assert any("same-sense vectors are closer than the rest" in m.value for m in at.markdown)
    help = at.select_slider(key="repr.layer").help  # BERT's layer 0: token + position + segment, LayerNorm
    assert help.startswith("0 is the embedding layer's output: ") and embedding_layer(shipped.config) in help
    assert "plus its segment's vector" in help and "projects" not in help
    assert any("each layer has its own geometry" in c.value for c in at.caption)  # compare within a layer


def test_choosing_a_set_and_a_layer_redraws_it(shipped):
    at = page()
    at.selectbox(key="repr.set").select("bark").run()
    assert at.text_input(key="repr.word").value == "bark" and at.text_area(key="repr.sentences").value == set_lines("bark")
    at.select_slider(key="repr.layer").set_value(0).run()
    heatmap = figures(at)[0]
    assert "layer 0 (embeddings)" in heatmap["layout"]["title"]["text"]
    expected = rv.word_in_context(shipped.model, shipped.tokenizer, "bark", [s for s, _ in examples("bark")])
    assert np.allclose(array(heatmap["data"][0]["z"]), rv.cosines(expected.vectors)[0], atol=1e-6)


def test_own_sentences_without_senses_and_a_split_word():
    at = page()
    at.text_input(key="repr.word").input("zookeeper").run()  # not one vocabulary entry of the shipped model
    at.text_area(key="repr.sentences").input("the zookeeper fed the lions .\nthe zookeeper was tired .").run()
    assert not at.exception and not at.warning
    assert any("splits “zookeeper” into" in i.value for i in at.info)
    assert any("Give at least two sentences one sense" in i.value for i in at.info)  # no senses: no lines


@pytest.mark.parametrize("word, text, message", [
    ("bank", "the cat sat .\nthe dog sat .", "does not contain"),
    ("bank", "i went to the bank .", "at least two sentences"),
    ("", "a\nb", "type a word"),
    ("bank", "\n".join(["the bank ."] * 30), "at most 24"),
])
def test_bad_input_is_a_message(word, text, message):
    at = page()
    at.text_input(key="repr.word").input(word).run()
    at.text_area(key="repr.sentences").input(text).run()
    assert not at.exception
    assert any(message in w.value for w in at.warning), [w.value for w in at.warning]


def test_only_the_open_tab_computes(monkeypatch):
    calls = []
    monkeypatch.setattr(nv, "build_bank", lambda *a, **k: calls.append("bank"))
    at = page(LENS)
    assert not at.exception and calls == []  # the neighbours' bank is not built for the lens
    assert len(figures(at)) == 1


def test_the_lens_tab_matches_the_model(shipped):
    at = page(LENS)
    heatmap = figures(at)[0]
    encoding = inputs.encode(shipped.tokenizer, shipped.model, "i went to the [MASK] to deposit money .")
    lens = rv.logit_lens(shipped.model, encoding, shipped.tokenizer.mask_id)
    ids, probs = rv.lens_grid(lens.masks[0], 5)
    assert np.allclose(array(heatmap["data"][0]["z"]), probs, atol=1e-6)
    assert list(heatmap["data"][0]["x"]) == [shipped.tokenizer.id_to_token(i) for i in ids]
    table = at.dataframe[0].value
    assert table["#1"].iloc[-1].startswith("bank") and len(table) == 5
    at.text_input(key="repr.lens_text").input("the cat sat on the mat .").run()
    assert any("[MASK]" in w.value for w in at.warning) and not at.exception
    at.text_input(key="repr.lens_text").input("the [MASK] sat on the [MASK] .").run()
    at.segmented_control(key="repr.lens_mask").set_value(1).run()
    assert "token 6" in figures(at)[0]["layout"]["title"]["text"]


def test_the_neighbours_tab_builds_the_bank_once_and_retrieves(shipped, monkeypatch):
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)
    at = page(NEIGHBOURS)
    assert not at.exception, at.exception
    static, contextual = at.dataframe[0].value, at.dataframe[1].value
    assert len(static) == 8 and "bank" not in set(static[nv.TOKEN])
    assert list(contextual[nv.TOKEN])[:3] == ["bank"] * 3 and set(contextual[nv.SENSE]) <= {"money", "river", "—"}
    assert "money" in set(contextual[nv.SENSE])  # "bank" by deposit money finds money sentences
    precision = figures(at)[0]
    assert "precision@3" in precision["layout"]["title"]["text"]
    at.text_input(key="repr.nn_text").input("").run()
    assert not at.exception and at.warning


def test_the_default_query_never_finds_its_own_sentence(shipped, monkeypatch):
    """The default sentence is in the bank: its own "bank" would top the list at cosine 1 (issue 31, point 8)."""
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)
    at = page(NEIGHBOURS)
    tokens = shipped.tokenizer.encode(at.text_input(key="repr.nn_text").value).tokens
    bank = [shipped.tokenizer.encode(s).tokens for s in nv.bank_sentences(shipped.model)]
    assert tokens in bank  # the model reads one of the bank's sentences exactly as the query
    shown = at.dataframe[1].value[nv.SENTENCE].str.replace("[«»]", "", regex=True)
    assert len(shown) == 8 and all(shipped.tokenizer.encode(s).tokens != tokens for s in shown)


def test_the_geometry_tab(shipped, monkeypatch):
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)
    at = page(GEOMETRY)
    assert not at.exception, at.exception
    positions, anisotropy = figures(at)
    assert array(positions["data"][0]["z"]).shape == (64, 64)
    assert len(array(anisotropy["data"][0]["y"])) == 5
    row = next(c.value for c in at.caption if c.value.startswith("The row of"))
    assert row == "The row of “bank”: WordPiece writes the word alike wherever it stands."  # no space to speak of
    at.text_input(key="repr.geo_word").input("unbelievablezz").run()
    assert any("one word of the vocabulary" in w.value for w in at.warning) and not at.exception


def test_the_shapes_tab_draws():
    at = page(SHAPES)
    assert not at.exception, at.exception
    assert any("torch.Size" in (getattr(e, "value", "") or "") for e in at.get("code") + list(at.markdown)
               + list(at.text) + list(at.caption))
    at.button_group(key="shapes.model").set_value("active").run()  # the shipped BERT has a pooler
    assert not at.exception and "pooler_output shape : torch.Size([3, 256])" in at.code[0].value
    assert any("pooler_output is one vector per sentence: tanh(W · h\\[CLS\\] + b)" in c.value for c in at.caption)


def test_edits_outlive_a_look_at_another_tab():
    """Streamlit drops the value of a widget a run does not draw; the page keeps every tab's inputs."""
    at = page()
    at.text_input(key="repr.word").input("the").run()
    at.text_area(key="repr.sentences").input("the cat sat .\nthe dog ran .").run()
    at.session_state["repr.tab"] = LENS
    at.run()
    at.text_input(key="repr.lens_text").input("the [MASK] ran .").run()
    at.session_state["repr.tab"] = SHAPES
    at.run()
    at.text_area(key="shapes.text").input("the cat .\nthe dog ran .").run()
    at.session_state["repr.tab"] = CONTEXTS
    at.run().run()
    assert at.text_input(key="repr.word").value == "the"
    assert at.text_area(key="repr.sentences").value == "the cat sat .\nthe dog ran ."
    at.session_state["repr.tab"] = LENS
    at.run()
    assert at.text_input(key="repr.lens_text").value == "the [MASK] ran ."
    at.session_state["repr.tab"] = SHAPES
    at.run()
    assert at.text_area(key="shapes.text").value == "the cat .\nthe dog ran ."
    assert not at.exception
