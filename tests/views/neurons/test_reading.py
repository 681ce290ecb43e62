"""reading.py: every sentence is written from the numbers (change a number, the sentence changes; turn the result
around, the verdict turns around); the JSON report is plain data; the discriminator's sentences need no vocabulary."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from bertviz_lab.views.neurons import corpus as vne_corpus
from bertviz_lab.views.neurons import reading as vne_read
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.behind import PAIRS, NiuView, behind_view
from bertviz_lab.views.neurons.neuron import neuron_view
from bertviz_lab.views.neurons.outliers import held_out, outliers_view
from bertviz_lab.views.neurons.sentence import sentence_view

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "the shark eats [MASK] ."


@pytest.fixture(scope="module")
def views(shipped, tmp_path_factory):
    index = vne_corpus.index(shipped, vne_corpus.story_sentences(80), folder=tmp_path_factory.mktemp("index"))
    ask = NeuronAsk(TEXT, k=5, draws=6, method="grad")
    grammar = behind_view(shipped, NeuronAsk(PAIRS[0].text, answer="were", foil="was", k=5, draws=6, method="grad"))
    return dict(sentence=sentence_view(shipped, ask), neuron=neuron_view(shipped, index, ask, "the story world"),
                behind=behind_view(shipped, ask), grammar=grammar,
                outliers=outliers_view(shipped, held_out(10), draws=3))


def test_the_causal_sentence_says_the_numbers_and_turns_around(views):
    view = views["behind"]
    t = view.test
    said = vne_read.causal_sentence(view)
    assert f"from {t.f:.2f} to {t.f_top:.2f} (by {abs(t.drop_top):.2f})" in said
    largest = float(t.drops.max())
    assert "6 sets of 5 random neurons" in said
    assert f"the largest drop {largest:.2f}" in said if abs(largest) >= 0.1 else f"the largest drop {largest:.3g}" in said
    assert said.endswith("the top neurons matter more than random ones.") == t.beats_random
    weak = replace(view, test=replace(t, f_top=t.f - 0.001))  # the top 5 now move F by 0.001
    turned = vne_read.causal_sentence(weak)
    assert turned != said and "(by 0.001)" in turned and not turned.endswith("matter more than random ones.")
    assert turned.endswith("matter no more than random ones here.") or "does not single them out" in turned


def test_the_niu_sentence_follows_both_verdicts(views):
    niu = NiuView((views["grammar"], views["behind"]), PAIRS)
    said = vne_read.niu_sentence(niu)
    for view in niu.views:
        assert f"{view.test.drop_top:.2f}" in said and view.metric in said
    beaten = replace(views["behind"], test=replace(views["behind"].test, f_top=views["behind"].test.f))
    one = vne_read.niu_sentence(NiuView((views["grammar"], beaten), PAIRS))
    assert one != said and "no more than the random sets" in one
    if views["grammar"].test.beats_random:
        assert "Only on the number agreement guess" in one


def test_the_switch_off_sentence_tells_the_two_values_apart(views):
    view = views["neuron"]
    s = view.switch
    said = vne_read.switch_sentence(view)
    assert f"({view.mean:.2f})" in said or f"({view.mean:.3g})" in said
    assert "raises" in said or "lowers" in said or "leaves" in said
    moved = replace(view, switch=replace(s, f_zero=s.f - 2.5), guess_zero="seeds")
    changed = vne_read.switch_sentence(moved)
    assert "lowers logit(fish)" in changed and "(by 2.50)" in changed and "becomes 'seeds'" in changed


def test_the_neuron_and_sentence_sentences_read_their_views(views):
    n = views["neuron"]
    said = " ".join(vne_read.neuron_sentences(n))
    assert f"Neuron {n.neuron} of layer {n.layer}" in said and f"'{n.contexts[0].token}'" in said
    assert f"'{n.promoted[0][0]}'" in said and "not a test" in said
    s = views["sentence"]
    said = " ".join(vne_read.sentence_sentences(s))
    assert f"neuron {s.top[0].neuron} at {s.top[0].activation:.2f}" in said and "'fish'" in said
    fewer = replace(s, factors=replace(s.factors, error=0.123))
    assert "all but 12%" in " ".join(vne_read.sentence_sentences(fewer))


def test_the_outlier_sentences_follow_the_test(views):
    view = views["outliers"]
    t = view.test
    said = " ".join(vne_read.outlier_sentences(view))
    assert f"from {t.loss:.3f} to {t.loss_off:.3f}" in said and f"Dimensions {view.dims[0]} and {view.dims[1]}" in said
    assert ("matter more than random ones" in said) == t.beats_random
    wrecked = replace(view, test=replace(t, loss_off=t.loss + 5.0))
    turned = " ".join(vne_read.outlier_sentences(wrecked))
    assert "(by +5.000" in turned and "matter more than random ones" in turned


def test_the_json_report_is_plain_data(views):
    report = vne_read.json_report(views["sentence"], views["neuron"], views["behind"])
    again = json.loads(json.dumps(report))
    assert again["behind"]["top"][0]["neuron"] == views["behind"].top[0].neuron
    assert len(again["neuron_view"]["contexts"]) == len(views["neuron"].contexts)
    assert np.array(again["factors"]["strengths"]).shape == views["sentence"].factors.strengths.shape


def test_the_discriminators_sentences_need_no_vocabulary(family, tmp_path):
    ckpt = family("electra-discriminator")
    ask = NeuronAsk("the cat sat on the mat .", token=2, k=3, draws=4, method="grad", layer=1)
    behind = behind_view(ckpt, ask)
    said = vne_read.attribution_sentence(behind) + vne_read.causal_sentence(behind)
    assert "the replaced-token logit at" in said and "promotes" not in said
    index = vne_corpus.index(ckpt, ["the cat sat on the mat ."], folder=tmp_path)
    said = " ".join(vne_read.neuron_sentences(neuron_view(ckpt, index, ask)))
    assert "no masked-language-model head" in said
    out = " ".join(vne_read.outlier_sentences(outliers_view(ckpt)))
    assert "no masked-LM loss to measure" in out


def test_the_limits_name_the_papers_point():
    assert "Niu et al. 2024" in vne_read.LIMITS and "not a test" in vne_read.VALUE_READING
