"""The sentences the Syntax page, the CLI and the Time-lapse write from the numbers say only what the numbers hold:
agreement above, at or below chance (and following the attractor), no probe finding where the probe did not fit
or no layer beats LINEAR, subtypes shown or their merge said, and why the Time-lapse's UUAS is lower."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bertviz_lab.corpus.agreement import agreement_pairs
from bertviz_lab.corpus.tree import Tree
from bertviz_lab.figures import timelapse_syntax as fts
from bertviz_lab.figures.syntax import CHANCE
from bertviz_lab.syntax.agreement import Agreement, PairScore, standing, verdict
from bertviz_lab.syntax.encode import SentenceReading
from bertviz_lab.syntax.probe import LayerScore, ProbeReport
from bertviz_lab.syntax.probe_fit import Fit
from bertviz_lab.syntax.relations import MIN_COUNT, relations_by_head
from bertviz_lab.syntax.report import SyntaxReport
from bertviz_lab.views.syntax import analysis as vs
from bertviz_lab.views.timelapse import syntax as vts


def agreement(right: dict[int, int], n: int = 100, nearest: float = 0.1) -> Agreement:
    """`right[k]` of `n` pairs with k attractors agreed on; with attractors, a share `nearest` of the pairs has a
    noun of the subject's number nearest the verb."""
    scores = []
    for k, r in right.items():
        for i in range(n):
            agrees = i < r
            scores.append(PairScore("t", "m", "were", "was", k, 0.7 if agrees else 0.3, 0.3 if agrees else 0.7,
                                    k == 0 or i < nearest * n))
    return Agreement(scores, 0)


def test_the_shipped_models_agreement_is_said_to_follow_the_attractor():
    said = verdict(agreement({0: 94, 1: 38, 2: 32, 3: 35}))
    assert "with no attractor 94%, above chance" in said
    assert "with 1, 2 or 3 attractors 38%, 32%, 35%, below chance: the model follows the attractor" in said
    assert "copied the number of the noun nearest the verb would score 100% with no attractor and 10% with attractors" in said
    assert "does not make the verb agree with its subject" in said
    assert "40-60% is still chance" in said  # 100 pairs: 1.96 standard errors of a coin is 9.8 points


def test_a_model_that_agrees_everywhere_is_not_said_to_fail_and_one_at_chance_is_said_to_be():
    good = verdict(agreement({0: 99, 1: 90, 2: 85, 3: 80}))
    assert "above chance" in good and "below" not in good and "does not make" not in good
    coin = verdict(agreement({0: 97, 1: 52, 2: 47, 3: 55}))
    assert "with 1, 2 or 3 attractors 52%, 47%, 55%, at chance" in coin and "does not make the verb agree" in coin
    assert [standing(a, 12) for a in (0.75, 0.5, 0.2)] == ["at", "at", "below"]  # 12 pairs: 22-78% is chance
    assert [standing(a, 1000) for a in (0.54, 0.5, 0.46)] == ["above", "at", "below"]


def test_the_pairs_know_which_noun_is_nearest_the_verb():
    pairs = agreement_pairs(40, seed=0)
    assert all(p.nearest_agrees for p in pairs if p.attractors == 0)
    with_attractors = [p for p in pairs if p.attractors]
    assert 0 < sum(p.nearest_agrees for p in with_attractors) < len(with_attractors) / 2
    for p in with_attractors:  # the last noun before the verb: same number as the subject exactly when it agrees
        nouns = [i for i in range(p.verb) if p.tree.upos[i] in ("NOUN", "PROPN")]
        assert p.tree.words[nouns[-1]] != p.tree.words[p.tree.heads.index(-1)]


def fit(best: float, baseline: float = 1.0, kept: int = 50, last: float | None = None, dev: bool = True) -> Fit:
    losses = (9.0, best + 0.2, best, last if last is not None else best) if dev else ()
    return Fit(losses, kept, 100, baseline)


def probe(uuas: list[float], linear: float, fits: list[Fit] | None = None) -> ProbeReport:
    fits = fits or [fit(0.3)] * len(uuas)
    layers = [LayerScore(i, u, 0.8, 0.9, f, fit(0.2)) for i, (u, f) in enumerate(zip(uuas, fits))]
    return ProbeReport(layers, linear, [], [], 100, 10, 25, 64, 100)


def report(p: ProbeReport, control: ProbeReport | None = None):
    out = SimpleNamespace(probe=p, control=control)
    out.best_uuas = lambda: SyntaxReport.best_uuas(out)
    return out


def test_a_probe_that_fitted_and_beats_linear_names_its_best_layer():
    said = vs.probe_sentence(report(probe([0.8, 0.95, 0.9], 0.5)))
    assert "the probe reading layer 1 finds 95% of the gold trees' edges (UUAS), the most of any layer" in said
    assert "did not fit" not in said


def test_no_layer_above_linear_is_said_and_no_layer_is_said_to_find_the_most():
    said = vs.probe_sentence(report(probe([0.34, 0.37, 0.3], 0.5)))  # bert-base at 100 sentences, from the issue
    assert "no layer's probe finds more of the gold trees' edges than linking each word to the next" in said
    assert "the best, layer 1, finds 37%" in said and "the most of any layer" not in said


def test_a_probe_that_did_not_fit_states_no_finding_from_its_own_dev_loss():
    overfit = fit(0.5, kept=30, last=0.7)  # the shipped model at 100 sentences: lowest at step 30, then +40%
    said = vs.probe_sentence(report(probe([0.34, 0.6, 0.62], 0.5, [fit(1.6), fit(0.9), overfit])))
    assert "the probe did not fit at layer 2, where it scores best (UUAS 62%" in said
    assert "its dev loss rose from 0.500 at step 30 to 0.700 at step 100" in said
    assert "the most of any layer" not in said
    assert "Nor did it fit at layer 0 (embeddings)." in said
    fitted_best = vs.probe_sentence(report(probe([0.34, 0.6, 0.8], 0.5, [fit(1.6), fit(0.9), fit(0.3)])))
    assert "the most of any layer" in fitted_best and ("The probe did not fit at layer 0 (embeddings) (at layer 0 "
                                                       "(embeddings), for the distance probe, its dev loss (1.600) is "
                                                       "no lower than a prediction that reads no vector (1.000))") \
        in fitted_best
    assert fit(0.3, dev=False).problem().startswith("too few training sentences")
    assert fit(0.3, kept=60, last=0.5).problem() == ""  # kept late: a rise then is noise, not overfitting
    assert fit(0.3, kept=30, last=0.33).problem() == ""  # 10% up: within the dev loss's noise


def test_a_probe_on_random_vectors_says_it_did_not_fit_and_one_on_a_hidden_tree_does_not():
    from tests.helpers.probe_corpus import corpus

    from bertviz_lab.syntax.probe import probe_layers
    hidden = probe_layers(corpus(0, 150, layers=1), corpus(1, 30, layers=1), rank=16, seed=3, steps=60)
    assert hidden.unfitted() == {}
    noise = probe_layers(corpus(0, 30, hidden=False), corpus(1, 10, hidden=False), rank=16, seed=3, steps=60)
    assert 0 in noise.unfitted() and "dev loss" in noise.unfitted()[0]


def test_a_common_subtype_is_a_row_of_its_own_and_a_rare_one_is_merged_and_said():
    tmod = Tree(("we", "ran", "today", "."), (1, -1, 1, 1), ("nsubj", "root", "obl:tmod", "punct"),
                ("PRON", "VERB", "NOUN", "PUNCT"))
    relcl = Tree(("dogs", "we", "saw", "ran", "."), (3, 2, 0, -1, 3), ("nsubj", "nsubj", "acl:relcl", "root", "punct"),
                 ("NOUN", "PRON", "VERB", "VERB", "PUNCT"))
    trees = [tmod] * MIN_COUNT + [relcl] * 3
    readings = [SentenceReading(t.words, t.words, tuple((i,) for i in range(len(t))),
                                np.full((1, 1, len(t), len(t)), 1 / len(t)), None) for t in trees]
    rel = relations_by_head(readings, trees)
    assert "obl:tmod" in rel.relations and "obl" not in rel.relations
    assert "acl" in rel.relations and "acl:relcl" not in rel.relations and rel.merged == {"acl:relcl": 3}
    assert "acl:relcl (3) under acl" in vs.merged_note(SimpleNamespace(relations=rel))


def test_the_time_lapse_says_why_its_uuas_is_below_the_syntax_pages_and_keeps_chance_off_the_lines():
    history = SimpleNamespace(records=[SimpleNamespace(train_sentences=300, test_sentences=100, sentences=400)])
    note = vts.syntax_page_note(history)
    assert "trains on 300 sentences, there on 900 by default (1,200 read" in note
    assert vts.syntax_page_note(SimpleNamespace(records=[SimpleNamespace(train_sentences=900, test_sentences=300,
                                                                         sentences=1200)])) == ""
    fig = fts.agreement_lines([0, 100], np.full((2, 4), 0.5), "t")
    assert not fig.layout.annotations and not fig.layout.shapes  # no label drawn over the lines
    assert [t.name for t in fig.data][-1] == CHANCE and fig.data[-1].showlegend is not False


@pytest.mark.parametrize("layers", [4, 12])
def test_the_estimate_holds_for_the_shipped_shape_and_bert_base(layers):
    assert vs.seconds_needed(layers, 256 if layers == 4 else 768, 1_200) > 0
