"""The Representations page in AppTest: each tab shows the shipped model's own numbers (computed here from the
model run directly, tests/helpers/model_numbers.py), only the open tab computes, and every bad input is a message."""

import html
import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bertviz_lab.corpus.senses import examples
from bertviz_lab.ui.representations.vectors import set_lines
from bertviz_lab.ui.shell.text import plain
from bertviz_lab.views.representations import neighbours as nv
from bertviz_lab.views.representations.vectors import embedding_layer
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import app_test
from tests.helpers.model_numbers import (contextual_nearest, cosine_matrix, hidden, lens, nearest_rows, pair_means,
                           principal_components, word_vectors)
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "representations.py")
CONTEXTS, NEIGHBOURS, LENS, GEOMETRY, SHAPES = ("Same word, different contexts", "Nearest neighbours", "Logit lens",
                                                "Embedding geometry", "Shapes and padding")


def page(tab: str | None = None) -> AppTest:
    at = app_test(PAGE, 120)
    if tab:
        at.session_state["repr.tab"] = tab
    return at.run()


def shown_numbers(markdown: str) -> list[float]:
    """The bold numbers of a sentence: **0.412** -> 0.412."""
    return [float(n) for n in re.findall(r"\*\*(-?[\d.]+)\*\*", markdown)]


def points_by_sentence(scatter: dict) -> np.ndarray:
    """(S, 2): the scatter's points put back in sentence order (each point is labelled with its number)."""
    numbered = {int(n): (x, y) for trace in scatter["data"]
                for n, x, y in zip(trace["text"], array(trace["x"]), array(trace["y"]))}
    return np.array([numbered[n] for n in sorted(numbered)])


def test_the_first_tab_draws_the_bank_sentences_at_the_last_layer(shipped):
    at = page()
    assert not at.exception and [t.label for t in at.tabs] == [CONTEXTS, NEIGHBOURS, LENS, GEOMETRY, SHAPES]
    heatmap, lines, scatter = figures(at)
    sentences, senses = zip(*examples("bank"))
    vectors = word_vectors(shipped, "bank", sentences)  # (L + 1, S, d)
    last = shipped.config.num_hidden_layers
    assert heatmap["layout"]["title"]["text"].endswith(f"· layer {last}")  # the last layer first
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), cosine_matrix(vectors[last]), atol=1e-5)
    same, cross = np.array([pair_means(cosine_matrix(v), senses) for v in vectors]).T  # (L + 1,) each
    assert [t["name"] for t in lines["data"]] == ["same sense", "different senses"]
    np.testing.assert_allclose(array(lines["data"][0]["y"]), same, atol=1e-5)
    np.testing.assert_allclose(array(lines["data"][1]["y"]), cross, atol=1e-5)
    assert [t["name"] for t in scatter["data"]] == ["money", "river"]
    assert [t["text"] for t in scatter["data"]] == [["1", "2", "3", "4"], ["5", "6", "7", "8"]]
    scores, shares = principal_components(vectors[last])
    drawn = points_by_sentence(scatter)
    for c in range(2):  # a component's sign is arbitrary: the page may draw it either way round
        flip = np.sign(drawn[:, c] @ scores[:, c])
        np.testing.assert_allclose(drawn[:, c], flip * scores[:, c], atol=1e-4 * np.abs(scores).max())
    assert scatter["layout"]["xaxis"]["title"]["text"] == f"PC1 ({shares[0]:.0%} of the variance)"
    verdict = next(m.value for m in at.markdown if "two sentences with the same sense" in m.value)
    assert shown_numbers(verdict) == pytest.approx([same[last], cross[last]], abs=6e-4)
    assert ("same-sense vectors are closer than the rest" in verdict) == (same[last] > cross[last]), verdict
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
    vectors = word_vectors(shipped, "bark", [s for s, _ in examples("bark")])
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), cosine_matrix(vectors[0]), atol=1e-5)


def test_own_sentences_without_senses_and_a_split_word(shipped):
    at = page()
    sentences = ["the zookeeper fed the lions .", "the zookeeper was tired ."]
    at.text_input(key="repr.word").input("zookeeper").run()  # not one vocabulary entry of the shipped model
    at.text_area(key="repr.sentences").input("\n".join(sentences)).run()
    assert not at.exception and not at.warning
    pieces = shipped.tokenizer.encode("zookeeper").tokens[1:-1]  # between [CLS] and [SEP]
    assert len(pieces) > 1 and any(f"splits “zookeeper” into {' '.join(pieces)}:" in shown(i.value) for i in at.info)
    assert any("Give at least two sentences one sense" in i.value for i in at.info)  # no senses: no lines
    means = []  # the word's vector in a sentence is the mean of its pieces' (here right after "[CLS] the")
    for sentence in sentences:
        tokens, h = hidden(shipped, sentence)
        assert tokens[2:2 + len(pieces)] == pieces
        means.append(h[-1, 2:2 + len(pieces)].mean(axis=0))
    np.testing.assert_allclose(array(figures(at)[0]["data"][0]["z"]), cosine_matrix(np.array(means)), atol=1e-5)


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
    _, (probs,), (own,) = lens(shipped, "i went to the [MASK] to deposit money .")
    np.testing.assert_allclose(probs[-1], own, atol=1e-6)  # the head on the last layer is the model's own output
    top = [[int(i) for i in np.argsort(-row)[:5]] for row in probs]  # every layer's top-5, most likely first
    others = sorted(set().union(*top[:-1]) - set(top[-1]), key=lambda i: -probs[:, i].max())
    columns = [shipped.tokenizer.token_to_id(html.unescape(t)) for t in heatmap["data"][0]["x"]]
    assert columns == top[-1] + others  # the last layer's top-5, then what earlier layers rank there
    np.testing.assert_allclose(array(heatmap["data"][0]["z"]), probs[:, columns], atol=1e-5)
    table = at.dataframe[0].value
    answer = top[-1][0]
    name = shipped.tokenizer.id_to_token(answer)
    assert len(table) == 5 and name == "bank"
    for layer, row in enumerate(table.to_dict("records")):
        token, p = row["#1"].rsplit("  ", 1)  # "bank  0.912"
        assert (shipped.tokenizer.token_to_id(token), float(p)) == (top[layer][0], pytest.approx(probs[layer].max(),
                                                                                                   abs=6e-4))
        assert row[f"p({name})"] == pytest.approx(probs[layer, answer], abs=1e-5)
        assert row[f"rank of {name}"] == (probs[layer] > probs[layer, answer]).sum() + 1
    at.text_input(key="repr.lens_text").input("the cat sat on the mat .").run()
    assert any(plain("[MASK]") in w.value for w in at.warning) and not at.exception  # as plain text
    at.text_input(key="repr.lens_text").input("the [MASK] sat on the [MASK] .").run()
    at.segmented_control(key="repr.lens_mask").set_value(1).run()
    heatmap = figures(at)[0]
    masks, _, own = lens(shipped, "the [MASK] sat on the [MASK] .")
    assert f"[MASK] at token {masks[1]}:" in heatmap["layout"]["title"]["text"] and masks[1] == 6
    columns = [shipped.tokenizer.token_to_id(html.unescape(t)) for t in heatmap["data"][0]["x"]]
    np.testing.assert_allclose(array(heatmap["data"][0]["z"])[-1], own[1][columns], atol=1e-5)  # the second mask's


@pytest.fixture
def small_bank(monkeypatch):
    """A sentence bank of 200 general sentences beside the sense sets' own: quick to encode, as good to read."""
    monkeypatch.setattr(nv, "BANK_SENTENCES", 200)


@pytest.mark.usefixtures("small_bank")
def test_the_neighbours_tab_builds_the_bank_once_and_retrieves(shipped):
    at = page(NEIGHBOURS)
    assert not at.exception, at.exception
    static, contextual = at.dataframe[0].value, at.dataframe[1].value
    assert any(m.value == "**Static: the embedding matrix row of “bank”**" for m in at.markdown)
    tokens, cosines = nearest_rows(shipped, "bank", 8)
    assert static[nv.TOKEN].tolist() == tokens
    np.testing.assert_allclose(static[nv.COSINE], cosines, atol=1e-5)
    query = at.text_input(key="repr.nn_text").value
    expected = contextual_nearest(shipped, query, "bank", nv.bank_sentences(shipped.model), 4, 8)
    np.testing.assert_allclose(contextual[nv.COSINE], expected, atol=2e-3)  # the bank keeps float16 vectors
    assert list(contextual[nv.TOKEN])[:3] == ["bank"] * 3 and set(contextual[nv.SENSE]) <= {"money", "river", "—"}
    assert "money" in set(contextual[nv.SENSE])  # "bank" by deposit money finds money sentences
    precision = figures(at)[0]
    assert "precision@3" in precision["layout"]["title"]["text"]
    at.text_input(key="repr.nn_text").input("").run()
    assert not at.exception and at.warning


@pytest.mark.usefixtures("small_bank")
def test_the_default_query_never_finds_its_own_sentence(shipped):
    """The default sentence is in the bank: its own "bank" would top the list at cosine 1 (issue 31, point 8)."""
    at = page(NEIGHBOURS)
    tokens = shipped.tokenizer.encode(at.text_input(key="repr.nn_text").value).tokens
    bank = [shipped.tokenizer.encode(s).tokens for s in nv.bank_sentences(shipped.model)]
    assert tokens in bank  # the model reads one of the bank's sentences exactly as the query
    shown = at.dataframe[1].value[nv.SENTENCE].str.replace("[«»]", "", regex=True)
    assert len(shown) == 8 and all(shipped.tokenizer.encode(s).tokens != tokens for s in shown)


@pytest.mark.usefixtures("small_bank")
def test_the_geometry_tab(shipped):
    at = page(GEOMETRY)
    assert not at.exception, at.exception
    positions, anisotropy = figures(at)
    rows = shipped.model.bert.embeddings.position_embeddings.weight.detach().double().numpy()
    np.testing.assert_allclose(array(positions["data"][0]["z"]), cosine_matrix(rows[:64]), atol=1e-5)
    tokens, cosines = nearest_rows(shipped, "bank", 10)
    assert at.dataframe[0].value[nv.TOKEN].tolist() == tokens
    np.testing.assert_allclose(at.dataframe[0].value[nv.COSINE], cosines, atol=1e-5)
    assert array(anisotropy["data"][0]["x"]).tolist() == list(range(5))  # the embeddings, then layers 1 to 4
    row = next(c.value for c in at.caption if c.value.startswith("The row of"))
    assert row == "The row of “bank”: WordPiece writes the word alike wherever it stands."  # no space to speak of
    at.text_input(key="repr.geo_word").input("unbelievablezz").run()
    assert any("one word of the vocabulary" in w.value for w in at.warning) and not at.exception


def printout(B: int, T: int, d: int, L: int, H: int) -> str:
    """What the shapes tab prints for B sentences of at most T tokens, hidden size d, L layers of H heads."""
    return "\n".join([f"input_ids shape: torch.Size([{B}, {T}])", f"attention_mask shape: torch.Size([{B}, {T}])",
                      f"last_hidden_state shape: torch.Size([{B}, {T}, {d}])", f"pooler_output shape : torch.Size([{B}, {d}])",
                      f"hidden_states: {L + 1} tensors (the embeddings, then {L} layers), each torch.Size([{B}, {T}, {d}])",
                      f"attentions: {L} tensors (one per layer), each torch.Size([{B}, {H}, {T}, {T}])"])


@torch.no_grad()
def test_the_shapes_tab_prints_the_shapes_and_draws_the_models_attention(shipped):
    at = page(SHAPES)
    assert not at.exception, at.exception
    lines = at.text_area(key="shapes.text").value.splitlines()
    tokens = [shipped.tokenizer.encode(line).tokens for line in lines]
    T = max(map(len, tokens))
    assert at.code[0].value == printout(3, T, 32, 2, 4)  # the random BERT: the BERT tutorial's sizes (seed text 002)
    padded = [t + ["[PAD]"] * (T - len(t)) for t in tokens]
    assert at.dataframe[0].value.values.tolist() == padded
    assert at.dataframe[1].value.values.tolist() == [[shipped.tokenizer.token_to_id(t) for t in row] for row in padded]
    assert at.dataframe[2].value.values.tolist() == [[int(t != "[PAD]") for t in row] for row in padded]
    assert any(m.value.startswith("The largest weight any query puts on any \\[PAD\\] key") and "**exactly 0**" in m.value
               for m in at.markdown)
    at.button_group(key="shapes.model").set_value("active").run()  # the shipped BERT has a pooler
    assert not at.exception and at.code[0].value == printout(3, T, 256, 4, 4)
    assert any("pooler_output is one vector per sentence: tanh(W · h\\[CLS\\] + b)" in c.value for c in at.caption)
    n = len(tokens[0])  # sentence 1, layer 0, head 0: drawn padded; here run alone, unpadded
    alone = shipped.model(torch.tensor([shipped.tokenizer.encode(lines[0]).ids]), trace=True).trace[0].weights[0, 0]
    (heatmap,) = figures(at)
    weights = array(heatmap["data"][0]["z"])
    assert weights.shape == (T, T) and n < T
    np.testing.assert_allclose(weights[:n, :n], alone.double().numpy(), atol=1e-5)
    assert np.all(weights[:, n:] == 0.0)  # no query reads a [PAD] key


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
