"""What the "Probing, carefully" tab says (views/syntax/probing.py), on hand-made records: each sentence turns around
when its numbers do (the order of the tasks, an expected layer that places a task nowhere, the more selective probe, a
probe that learns by heart, a code shorter or not than its control's), and every missing task is said once."""

from __future__ import annotations

import numpy as np
import pytest

from bertviz_lab.probing.records import Codelength, LayerFits, Mix, Probing, TaskProbes
from bertviz_lab.views.syntax.probing import (codelength_sentence, codelength_table, control_table, depths,
                                              layer_table, missing_sentences, mix_weights, order_sentence,
                                              selectivity_sentences, task_sentence)

STATES = 5  # hidden states 0..4: the shipped model's


def task_probes(task: str, *, accuracy=(0.5, 0.7, 0.9, 0.85, 0.8), control=(0.4, 0.45, 0.5, 0.5, 0.5),
                mlp=(0.6, 0.8, 0.95, 0.9, 0.9), mlp_control=(0.55, 0.7, 0.8, 0.8, 0.8), majority=0.3,
                expected: float | None = 1.5, centre: float = 1.25, online=(900.0, 600.0, 300.0, 350.0, 400.0),
                code_control=(1200.0, 1100.0, 1000.0, 1000.0, 1000.0), code_random=(1000.0, 950.0, 900.0, 900.0, 900.0),
                uniform: float = 2000.0, random_weights=(0.4, 0.45, 0.5, 0.5, 0.5)) -> TaskProbes:
    """One task's probes on a 4-layer model, every number chosen by the test."""
    weights = np.array([0.1, 0.2, 0.4, 0.2, 0.1])
    return TaskProbes(
        task, ("a", "b", "c"), 500, 200, majority, LayerFits("linear", np.array(accuracy), np.array(control)),
        None if mlp is None else LayerFits("mlp", np.array(mlp), np.array(mlp_control)), np.array(random_weights),
        Mix(weights, np.array(accuracy), expected, centre),
        Codelength(np.array(online), np.array(code_control), np.array(code_random), uniform, 500, (8, 16, 500)))


def probing(tasks: dict[str, TaskProbes], missing: dict[str, str] | None = None) -> Probing:
    return Probing("the story world (seed 0)", 100, 75, STATES, tasks, missing or {})


# --- 1 Layer by layer ---------------------------------------------------------------------------------------------
def test_the_order_of_the_tasks_follows_their_expected_layers():
    tenney = probing({"pos": task_probes("pos", expected=0.8), "dep": task_probes("dep", expected=1.9),
                      "coref": task_probes("coref", expected=2.6)})
    said = order_sentence(tenney)
    assert "part of speech (0.80), dependency label (1.90), pronoun and referent (2.60)" in said
    assert "this model holds them in the same order" in said
    swapped = probing({"pos": task_probes("pos", expected=2.2), "dep": task_probes("dep", expected=1.9),
                       "coref": task_probes("coref", expected=2.6)})
    said = order_sentence(swapped)
    assert "dependency label (1.90), part of speech (2.20)" in said
    assert "dependency label comes before part of speech" in said and "same order" not in said


def test_close_expected_layers_are_not_ordered_and_a_task_without_one_is_said():
    level = probing({"pos": task_probes("pos", expected=1.50), "dep": task_probes("dep", expected=1.55),
                     "number": task_probes("number", expected=None, centre=3.0)})
    said = order_sentence(level)
    assert "part of speech and dependency label are less than 0.1 of a layer apart" in said
    assert "Noun number has no expected layer" in said
    # the centres of gravity in order, noun number's included
    assert "By centre of gravity (where the full mix puts its weight): dependency label (1.25), part of speech (1.25), " \
        "noun number (3.00)." in said
    names, expected, centre = depths(level)
    assert names == ["part of speech", "dependency label", "noun number"] and expected[2] is None
    assert centre.tolist() == [1.25, 1.25, 3.0]


def test_an_expected_layer_outside_the_hidden_states_places_the_task_nowhere():
    p = probing({"pos": task_probes("pos", expected=-0.5), "dep": task_probes("dep", expected=1.9),
                 "number": task_probes("number", expected=4.5)})
    said = order_sentence(p)
    assert "the one task placed is dependency label (1.90)" in said
    assert "The expected layer of part of speech works out at -0.50, outside hidden states 0 to 4" in said
    assert "The expected layer of noun number works out at 4.50" in said and "Tenney" not in said
    assert depths(p)[1] == [None, 1.9, None]  # drawn without a diamond


def test_a_task_no_layer_reads_above_its_majority_is_said_to_be_unplaced():
    read = task_sentence("pos", task_probes("pos"))
    assert "best at hidden state 2, 90% right, against 30%" in read and "cannot be read" not in read
    flat = task_sentence("pos", task_probes("pos", accuracy=(0.30, 0.31, 0.30, 0.30, 0.29)))
    assert "best at hidden state 1" in flat and "where this task sits cannot be read here" in flat
    assert "random weights" not in read  # the random-weights model reads 50% at best against 90%


def test_a_task_random_weights_read_as_well_is_said_to_give_itself_away():
    surface = task_sentence("coref", task_probes("coref", accuracy=(1.0,) * 5, random_weights=(0.99,) * 5))
    assert "with random weights is read as well (99%)" in surface and "no evidence" in surface
    trained = task_sentence("coref", task_probes("coref", accuracy=(1.0,) * 5, random_weights=(0.97,) * 5))
    assert "random weights" not in trained


def test_the_layer_table_holds_every_number_drawn():
    p = probing({"pos": task_probes("pos"), "number": task_probes("number", mlp=None)})
    table = layer_table(p)
    assert len(table) == 2 * STATES
    pos = table[table["task"] == "part of speech"]
    assert pos["linear accuracy"].tolist() == [0.5, 0.7, 0.9, 0.85, 0.8]
    assert pos["codelength (kbits)"].tolist() == [0.9, 0.6, 0.3, 0.35, 0.4]
    assert pos["compression"].tolist() == pytest.approx([2000 / 900, 2000 / 600, 2000 / 300, 2000 / 350, 5.0])
    assert table[table["task"] == "noun number"]["MLP accuracy"].isna().all()  # no MLP probe fitted for it
    names, weights = mix_weights(p)
    assert names == ["part of speech", "noun number"] and weights.shape == (2, STATES)


def test_each_missing_task_is_said_once_as_a_sentence():
    p = probing({"pos": task_probes("pos")},
                {"coref": "pronoun and referent: 24 training and 7 test examples; a probe needs at least 40 and 20",
                 "number": "noun number: no examples, because none of these nouns is in the story world's lexicon"})
    assert missing_sentences(p) == [
        "Not probed: pronoun and referent: 24 training and 7 test examples; a probe needs at least 40 and 20.",
        "Not probed: noun number: no examples, because none of these nouns is in the story world's lexicon."]


# --- 2 Control tasks ----------------------------------------------------------------------------------------------
def test_the_more_selective_probe_is_named_from_the_numbers():
    linear_ahead = selectivity_sentences("pos", task_probes("pos"))[0]  # linear 10..40 points, MLP 5..15
    assert "the linear probe is the more selective, at 5 of 5 hidden states" in linear_ahead
    assert "widest gap is 25 points at hidden state 2 (linear 40 points, MLP 15 points)" in linear_ahead
    assert "there the MLP probe owes more" in linear_ahead
    mlp_ahead = selectivity_sentences("pos", task_probes("pos", mlp_control=(0.1, 0.1, 0.1, 0.1, 0.1)))[0]
    assert "the MLP probe is the more selective, at 5 of 5" in mlp_ahead and "there the linear probe" in mlp_ahead
    even = selectivity_sentences("pos", task_probes("pos", accuracy=(0.5, 0.5, 0.5, 0.5, 0.5),
                                                    control=(0.4, 0.4, 0.4, 0.4, 0.4), mlp=(0.5, 0.5, 0.5, 0.5, 0.5),
                                                    mlp_control=(0.3, 0.3, 0.5, 0.5, 0.4)))[0]
    assert "neither probe is the more selective: the linear one is ahead at 2 hidden states and the MLP at 2" in even
    only = selectivity_sentences("pos", task_probes("pos", mlp=None))
    assert only == ["Only the linear probe was fitted: its selectivity on part of speech peaks at 40 points at "
                    "hidden state 2."]


def test_a_probe_that_scores_on_the_control_task_is_said_to_learn_by_heart():
    heart = selectivity_sentences("pos", task_probes("pos"))[1]  # the MLP: 80% on random labels, majority 30%
    assert heart.startswith("The MLP probe at hidden state 2 is right 95% of the time on the task and 80% on the "
                            "control task")
    assert "learns by heart" in heart and "That is what a high accuracy with a low selectivity means" in heart
    little = selectivity_sentences("pos", task_probes("pos", control=(0.3,) * 5, mlp_control=(0.35,) * 5))[1]
    assert "learn little by heart here" in little and "learns by heart" not in little
    table = control_table(task_probes("pos"))
    assert table["MLP selectivity"].tolist() == pytest.approx([0.05, 0.1, 0.15, 0.1, 0.1])


# --- 3 Description length ----------------------------------------------------------------------------------------
def test_the_codelength_sentence_turns_around_with_its_baselines():
    short = codelength_sentence("pos", task_probes("pos"))
    assert "takes 0.30 kbits at hidden state 2, the shortest of any: 6.7 times shorter than with no vector" in short
    assert "Its control task needs 1.00 kbits there, 3.3 times as many" in short
    assert "random-weights model's vectors need 0.90 kbits (3.0 times as many)" in short
    assert "right 90% there on this model and 50% on random weights" in short
    hard = codelength_sentence("pos", task_probes("pos", code_control=(250.0,) * 5, code_random=(200.0,) * 5))
    assert "no easier to read than labels fixed per word type" in hard
    assert "(no more: training made the labels no easier to read here)" in hard
    table = codelength_table(task_probes("pos"))
    assert table["control compression"].tolist() == pytest.approx([2000 / 1200, 2000 / 1100, 2.0, 2.0, 2.0])
