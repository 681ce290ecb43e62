"""Inside the feed-forward layer in AppTest, on the shipped model: each section draws the numbers the views give for the
same ask (the activations, the top neurons, the factors; a neuron's top contexts and its switch-off; the attribution
and the causal test; the outlying dimensions and, on its button, the loss test), a change of layer or neuron changes
them, a neuron the layer lacks and an empty sentence say one sentence each, a link restores the view; a model without
an MLM head and ELECTRA's discriminator open every section with a sentence where a section needs a guess."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.shell.state_neurons import DEFAULT_TEXT, SECTIONS
from bertviz_lab.views.neurons import corpus as vne_corpus
from bertviz_lab.views.neurons import outliers as vne_outliers
from bertviz_lab.views.neurons import reading as vne_read
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.ui.neurons import guess as ui_neurons_guess
from bertviz_lab.views.neurons.behind import behind_view, niu_view
from bertviz_lab.views.neurons.neuron import neuron_view
from bertviz_lab.views.neurons.sentence import sentence_view
from tests.helpers.family_models import build
from tests.helpers.figure_data import array, figures, shown
from tests.helpers.lab import app_test, open_page
from tests.helpers.paths import ROOT

PAGE = str(ROOT / "pages" / "neurons.py")
ONE, NEURON, BEHIND, OUTLIERS = SECTIONS


def shipped():
    return cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")


def charts(at: AppTest) -> dict[str, dict]:
    """Each chart's first trace, by its title."""
    return {f["layout"]["title"]["text"]: f["data"][0] for f in figures(at)}


def text(at: AppTest) -> str:
    return shown("\n".join(m.value for m in at.markdown))


def test_one_sentence_draws_the_views_activations_top_neurons_and_factors():
    at = open_page(PAGE)
    assert not at.error and [t.label for t in at.tabs] == list(SECTIONS)
    view = sentence_view(shipped(), NeuronAsk(DEFAULT_TEXT, layer=3, token=6))
    assert (at.session_state["neurons.layer"], at.session_state["neurons.token"]) == (3, 6)  # last layer, the [MASK]
    drawn = charts(at)
    heat = next(v for k, v in drawn.items() if k.startswith("Layer 3: activations"))
    columns = [int(x.split()[1]) for x in heat["x"]]
    np.testing.assert_allclose(array(heat["z"]).reshape(len(view.tokens), -1), view.activations[3][:, columns],
                               rtol=1e-6, atol=1e-7)
    bar = drawn["The most active neurons of layer 3 at '[MASK]'"]
    np.testing.assert_allclose(array(bar["x"]), [t.activation for t in view.top], rtol=1e-6)
    assert [int(y.split()[1]) for y in bar["y"]] == [t.neuron for t in view.top]
    strips = drawn["Layer 3's activations as 4 factors"]
    np.testing.assert_allclose(array(strips["customdata"]), view.factors.strengths.T, rtol=1e-6)
    for sentence in vne_read.sentence_sentences(view):
        assert sentence in text(at)
    assert f"The guess at the [MASK]: **{view.guess}**" in text(at)


def test_another_layer_token_and_factor_count_change_the_numbers():
    at = open_page(PAGE)
    at.segmented_control(key="neurons.layer").set_value(1).run()
    at.selectbox(key="neurons.token").set_value(2).run()
    at.slider(key="neurons.factors").set_value(2).run()
    assert not at.exception and not at.error
    view = sentence_view(shipped(), NeuronAsk(DEFAULT_TEXT, layer=1, token=2, factors=2))
    drawn = charts(at)
    bar = drawn[f"The most active neurons of layer 1 at '{view.tokens[2]}'"]
    np.testing.assert_allclose(array(bar["x"]), [t.activation for t in view.top], rtol=1e-6)
    assert array(drawn["Layer 1's activations as 2 factors"]["customdata"]).shape == (2, len(view.tokens))


def contexts(at: AppTest) -> list[str]:
    return [line for m in at.markdown for line in m.value.splitlines() if "orange-background" in line]


def test_one_neuron_draws_its_contexts_value_and_switch_off_and_follows_the_pickers():
    at = open_page(PAGE, neurons__section=NEURON)
    assert not at.error, [e.value for e in at.error]
    ckpt = shipped()
    found = vne_corpus.index(ckpt, vne_corpus.story())
    view = neuron_view(ckpt, found, NeuronAsk(DEFAULT_TEXT, layer=3, token=6))
    assert f"Layer 3, neuron {view.neuron}" in text(at)
    assert len(contexts(at)) == len(view.contexts)
    assert all(f"`{c.value:.3f}`" in line and f"**{c.token}**" in shown(line)
               for c, line in zip(view.contexts, contexts(at)))
    assert [m.value for m in at.metric] == [f"{view.switch.f:.4f}", f"{view.switch.f_zero:.4f}",
                                            f"{view.switch.f_mean:.4f}"]
    assert at.dataframe[0].value["token"].tolist() == [t for t, _ in view.promoted]
    assert vne_read.switch_sentence(view) in text(at)
    at.number_input(key="neurons.neuron").set_value(17).run()
    other = neuron_view(ckpt, found, NeuronAsk(DEFAULT_TEXT, layer=3, neuron=17, token=6))
    assert "Layer 3, neuron 17" in text(at) and at.metric[1].value == f"{other.switch.f_zero:.4f}"
    assert at.metric[1].value != f"{view.switch.f_zero:.4f}"


def test_a_neuron_the_layer_lacks_and_an_empty_sentence_say_one_sentence_each():
    at = open_page(PAGE, neurons__section=NEURON, neurons__neuron=5000)
    assert len(at.error) == 1 and "Neuron 5000 does not exist" in shown(at.error[0].value), at.error
    assert not contexts(at) and not at.metric
    at = open_page(PAGE, neurons__text="   ")
    assert len(at.error) == 1 and "empty" in shown(at.error[0].value) and not at.get("plotly_chart")


def test_your_sentences_as_the_corpus():
    at = open_page(PAGE, neurons__section=NEURON, neurons__corpus="own",
                   neurons__own="the cat sat on the mat .\nthe dogs were happy .")
    assert not at.error, [e.value for e in at.error]
    lines = contexts(at)  # the tokens where it fires (above 0) among its top 12 in 13 tokens
    assert "top contexts over your text" in text(at) and 1 <= len(lines) < 12
    assert all(("mat" in shown(c)) != ("dogs" in shown(c)) for c in lines)
    assert any(f"{12 - len(lines)} of its top 12 contexts are at or below 0" in c.value for c in at.caption)


def test_behind_the_guess_draws_the_attribution_and_the_causal_test():
    at = open_page(PAGE, neurons__section=BEHIND, neurons__foil="were")
    assert not at.error, [e.value for e in at.error]
    view = behind_view(shipped(), NeuronAsk(DEFAULT_TEXT, foil="were"))
    drawn = charts(at)
    bar = drawn[f"The {len(view.top)} neurons the guess rests on most"]
    np.testing.assert_allclose(array(bar["x"]), [r.score for r in view.top], rtol=1e-9)
    causal = [t for t in figures(at) if t["layout"]["title"]["text"].startswith("Switching off the top 10")]
    assert len(causal) == 1
    assert f"F = {view.metric}** at '[MASK]' (token 6) = {view.f:.4f}" in text(at)
    assert vne_read.causal_sentence(view) in text(at) and "logit(was) - logit(were)" in view.metric
    assert at.get("download_button")  # the top neurons' CSV


def test_grammar_vs_word_knowledge_runs_the_causal_test_on_both_built_in_guesses():
    at = open_page(PAGE, neurons__section=BEHIND, neurons__niu=True)
    view = niu_view(shipped())
    drawn = charts(at)
    for guess, one in zip(view.guesses, view.views):
        title = f"{guess.title[0].upper() + guess.title[1:]}: top 10 vs random"
        assert array(drawn[title]["y"]).tolist() == [one.test.drop_top]  # the first trace: the top 10's drop
    assert vne_read.niu_sentence(view) in text(at)


@pytest.fixture
def short_loss_test(monkeypatch):
    """The loss test on 12 held-out sentences (the page asks for the default number), forgotten afterwards."""
    held = vne_outliers.held_out(12)
    monkeypatch.setattr(vne_outliers, "held_out", lambda n=12: held)
    ui_neurons_guess.OUTLIERS.clear()
    yield held
    ui_neurons_guess.OUTLIERS.clear()


def test_outlier_dimensions_at_once_and_the_loss_test_on_its_button(short_loss_test):
    held = short_loss_test
    at = open_page(PAGE, neurons__section=OUTLIERS)
    view = vne_outliers.outliers_view(shipped(), held)
    table = at.dataframe[0].value
    assert table["gain dims"].tolist() == [" ".join(map(str, d)) for d in view.outliers.weight_dims]
    assert not at.get("plotly_chart")
    at.button(key="neurons.loss").click().run()
    assert not at.exception and not at.error
    assert len(at.dataframe) == 1  # the table of dimensions once, not again under the button
    loss = next(v for k, v in charts(at).items() if k.startswith("Held-out loss"))
    np.testing.assert_allclose(array(loss["y"]), [view.test.loss], rtol=1e-9)  # the first trace: nothing zeroed
    for sentence in vne_read.outlier_sentences(view):
        assert sentence in text(at)


def test_a_link_restores_the_view_and_the_view_writes_it_back():
    query = {"text": "the dogs in the garden [MASK] tired .", "section": NEURON, "layer": "2", "neuron": "17"}
    at = app_test(ROOT / "app.py", 180)
    at.run()
    at.switch_page("pages/neurons.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert (at.session_state["neurons.text"], at.session_state["neurons.section"]) == (query["text"], NEURON)
    assert (at.session_state["neurons.layer"], at.session_state["neurons.neuron"]) == (2, 17)
    assert "Layer 2, neuron 17" in text(at)
    assert {name: at.query_params[name] for name in query} == query


@pytest.mark.parametrize("section", SECTIONS)
def test_a_model_without_an_mlm_head_opens_every_section(headless_checkpoint, section):
    at = open_page(PAGE, headless_checkpoint, neurons__section=section, neurons__text="the cat sat on the mat .")
    assert not at.error, [e.value for e in at.error]
    if section == BEHIND:
        assert any("no masked-language-model (MLM) head" in shown(i.value) for i in at.info)
    if section == ONE:
        assert any(t.startswith("Layer 1: activations") for t in charts(at))
    if section == NEURON:  # its contexts, and why nothing is switched off
        assert contexts(at) and not at.metric and any("no guess for its neurons to move" in shown(c.value)
                                                      for c in at.caption)


@pytest.mark.parametrize("section", SECTIONS)
def test_electras_discriminator_reads_its_replaced_token_logit(tmp_path, section):
    build("electra-discriminator", tmp_path / "electra")
    at = open_page(PAGE, tmp_path / "electra", neurons__section=section, neurons__text="the cat sat on the mat .")
    assert not at.error, [e.value for e in at.error]
    assert any("This is a discriminator" in i.value for i in at.info)
    if section == ONE:
        assert "The discriminator at 'the': p(replaced) = " in text(at)  # the first word, with no [MASK]
    if section == BEHIND:
        assert "replaced" in text(at) and not [box for box in at.text_input if box.key == "neurons.answer"]
