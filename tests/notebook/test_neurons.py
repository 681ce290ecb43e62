"""`nb.neurons`: the record holds views.neurons' numbers (the sentence's activations, top neurons and factors; the
neurons behind a [MASK] guess and the causal test; one neuron's contexts over a list of sentences or a file), its
figures have the shapes of those numbers, a corpus is indexed once per Lab, and a mistake is one InputError."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from bertviz_lab import notebook as nb
from bertviz_lab.errors import InputError
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.behind import behind_view
from bertviz_lab.views.neurons.reading import LIMITS, sentence_sentences
from bertviz_lab.views.neurons.sentence import sentence_view

TEXT = "the children in the park [MASK] happy ."
PLAIN = "on monday the children were busy ."
CORPUS = ["on monday the cat sat on the mat .", "the dog ran to the park on friday .", "she ate the bread .",
          "on sunday the children played in the garden ."]


@pytest.fixture(scope="module")
def lab():
    return nb.load("bertviz-mini", device="cpu")


def test_a_sentence_without_a_mask_has_the_views_activations_top_and_factors(lab):
    got = nb.neurons(lab, PLAIN, layer=1, token=1)
    view = sentence_view(lab.checkpoint, NeuronAsk(PLAIN, layer=1, token=1))
    assert got.behind is None and got.neuron is None and got.tokens == view.tokens
    np.testing.assert_allclose(got.activations, view.activations, atol=1e-5)
    assert [n for n, _ in got.top] == [t.neuron for t in view.top]
    assert got.said == [*sentence_sentences(view), LIMITS]
    heatmap, strips = got.figures()
    assert np.asarray(heatmap.data[0].z).shape == (len(view.tokens), 40)  # the 40 most active of 1,024 neurons
    assert np.asarray(strips.data[0].z).shape == (4, len(view.tokens))
    assert "Layer 1" in heatmap.layout.title.text and "neurons" in repr(got)


def test_a_mask_adds_the_neurons_behind_the_guess_and_the_causal_test(lab):
    got = nb.neurons(lab, TEXT, answer="were", foil="was", k=4, draws=5, seed=2)
    view = behind_view(lab.checkpoint, NeuronAsk(TEXT, answer="were", foil="was", k=4, draws=5, seed=2))
    assert [(r.layer, r.neuron) for r in got.behind.top] == [(r.layer, r.neuron) for r in view.top]
    assert got.behind.test.f_top == pytest.approx(view.test.f_top, abs=1e-4)
    figs = got.figures()
    assert len(figs) == 4 and all(isinstance(f, go.Figure) for f in figs)
    assert list(figs[2].data[0].y) == [f"L{r.layer} n {r.neuron}" for r in view.top]
    assert len(figs[3].data[1].y) == 5  # one dot per draw
    shown = got._repr_html_()
    assert "plotly" in shown.lower() and "logit(were) - logit(was)" in shown
    again = nb.neurons(lab, TEXT, answer="were", foil="was", k=4, draws=5, seed=2)
    assert again.behind is got.behind  # computed once per Lab


def test_one_neuron_over_a_list_or_a_file_is_indexed_once(lab, tmp_path):
    got = nb.neurons(lab, TEXT, layer=1, neuron=537, corpus=CORPUS)
    assert got.behind is None and (got.neuron.layer, got.neuron.neuron) == (1, 537)
    assert lab.kept(("neuron index", tuple(CORPUS)))
    assert len(got.neuron.contexts) == 12 and got.neuron.corpus == "your 4 sentences"
    values = [c.value for c in got.neuron.contexts]
    assert values == sorted(values, reverse=True)
    assert all(c.sentence < len(CORPUS) for c in got.neuron.contexts)
    path = tmp_path / "mine.txt"
    path.write_text("\n".join(CORPUS), encoding="utf-8")
    from_file = nb.neurons(lab, TEXT, layer=1, neuron=537, corpus=path)
    assert from_file.neuron.corpus == "mine.txt"
    np.testing.assert_allclose([c.value for c in from_file.neuron.contexts], values, atol=1e-5)
    shown = from_file._repr_html_()
    top = from_file.neuron.contexts[0]
    assert f"<b>{top.tokens[top.position]}</b>" in shown and "Promotes:" in shown
    assert "n 537" in list(from_file.figures()[0].data[0].x)  # the neuron asked about is among the columns


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(layer=4), "layer 4 does not exist"),
    (dict(layer=0, neuron=1024), "neuron 1024 does not exist"),
    (dict(token=50), "token 50 does not exist"),
    (dict(neuron=3, corpus=[]), "the corpus has no sentences"),
    (dict(neuron=3, corpus="no/such/file.txt"), "is not a file"),
    (dict(corpus=CORPUS), "give neuron="),
    (dict(k=0), "number of top neurons"),
    (dict(method="shap"), "no attribution method"),
    (dict(answer="xyzzyq"), "xyzzyq"),
])
def test_each_mistake_is_one_input_error(lab, kwargs, message):
    with pytest.raises(InputError, match=message):
        nb.neurons(lab, TEXT, **kwargs)


def test_an_empty_or_huge_file_is_one_input_error(lab, tmp_path):
    from bertviz_lab.views.neurons.corpus import MAX_FILE_BYTES

    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="the file is empty"):
        nb.neurons(lab, TEXT, neuron=3, corpus=tmp_path / "empty.txt")
    (tmp_path / "huge.txt").write_bytes(b"a cat .\n" * (MAX_FILE_BYTES // 8 + 1))
    with pytest.raises(InputError, match="the limit is"):
        nb.neurons(lab, TEXT, neuron=3, corpus=tmp_path / "huge.txt")
