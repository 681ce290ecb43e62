"""What probing over training shows (views/timelapse/findings.py): the arrays the charts draw and the sentences, each
turning around with the numbers; and the three figures (figures/timelapse_syntax.py) reading back those arrays."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bertviz_lab.figures import export
from bertviz_lab.figures import timelapse_syntax as fts
from bertviz_lab.views.timelapse.findings import amnesic_sentence, order_sentence, selectivity_sentence, series
from bertviz_lab.views.timelapse.probing import AmnesicAt, ProbingAt, TaskAt
from bertviz_lab.views.timelapse.syntax_file import HeadScore, SyntaxAt, SyntaxHistory

STEPS = [0, 10, 20, 50]


def task(expected: float | None, accuracy: float = 0.9, control: float = 0.5, layer: int = 1) -> TaskAt:
    return TaskAt(expected, 1.0, layer, accuracy, control, 0.3, 200, 80)


def removed(after: float, random: float, before: float = 0.75, pairs: int = 10) -> AmnesicAt:
    return AmnesicAt("number", 2, 5, 3, 100, {0: pairs, 1: pairs}, {0: before, 1: before}, {0: after, 1: after},
                     {0: random, 1: random}, 3.0, 3.25, 3.0625)


def history(pos: list, dep: list, drops: list | None = None, number: list | None = None) -> SyntaxHistory:
    """Steps 0, 10, 20, 50: pos's and dep's expected layers; drops, (after, random) agreement per step."""
    records = []
    for i, step in enumerate(STEPS):
        tasks = {"pos": task(pos[i]), "dep": task(dep[i], 0.8, 0.7 - 0.1 * i, 2)}
        if number is not None:
            tasks["number"] = task(number[i], 0.6, 0.65)
        amnesic = None if drops is None or drops[i] is None else removed(*drops[i])
        probing = ProbingAt(tasks, {}, amnesic, 2.0)
        records.append(SyntaxAt(step, (0.3, 0.5, 0.4), 0.5, {"all": HeadScore(0, 0, 0.2, 1, 0.4, 9)}, {0: 0.5},
                                probing=probing))
    return SyntaxHistory(tuple(records), shape=(2, 2, 32))


@pytest.mark.parametrize(("pos", "dep", "says"), [
    ([1.5, 1.2, 0.9, 0.8], [1.0, 1.3, 1.4, 1.6], "sits below dependency label (the order Tenney et al. found in BERT) "
                                                 "from step **10** on (1.20 against 1.30 at step 10)."),
    ([0.5, 1.2, 0.9, 0.8], [1.0, 1.1, 1.4, 1.6], "from step **20** on"),  # held at 0, lost at 10, held from 20
    ([0.5, 0.6, 0.7, 0.8], [1.0, 1.1, 1.4, 1.6], "at every measured step"),
    ([0.5, 1.2, 1.9, 1.8], [1.0, 1.1, 1.4, 1.6], "At step 50 part of speech is not below dependency label: Tenney et "
                                                 "al.'s order held at step 0 only."),
    ([1.5, 1.2, 1.9, 1.8], [1.0, 1.1, 1.4, 1.6], "has not appeared at any measured step."),
    ([0.5, 0.6, 0.7, 0.8], [1.0, 1.1, 1.4, None], "At step 50 the order of part of speech and dependency label cannot "
                                                  "be read, as dependency label has no expected layer: Tenney et al.'s order "
                                                  "held at steps 0, 10, 20 only."),
])
def test_the_order_sentence_names_the_step_from_which_pos_sits_below_dep(pos, dep, says):
    sentence = order_sentence(history(pos, dep))
    assert says in sentence
    if dep[-1] is None:
        assert sentence.startswith("At step 50 part of speech's expected layer is 0.80; dependency label has none")
    else:
        low, high = sorted([(pos[-1], "part of speech"), (dep[-1], "dependency label")])
        assert sentence.startswith(f"At step 50 the expected layers run {low[1]} {low[0]:.2f} < {high[1]} {high[0]:.2f}.")


def test_without_any_expected_layer_the_sentence_says_so_once():
    sentence = order_sentence(history([None] * 4, [1.0, 1.1, 1.4, None]))
    assert sentence == ("At step 50 no task has an expected layer: no hidden state adds accuracy beyond the embeddings' "
                        "output. At step 50 the order of part of speech and dependency label cannot be read, as part of "
                        "speech and dependency label have no expected layer: Tenney et al.'s order has not appeared at "
                        "any measured step.")


def test_selectivity_is_said_from_the_numbers():
    sentence = selectivity_sentence(history([1, 1, 1, 1], [1, 1, 1, 1], number=[None] * 4))
    # dep's control falls 0.7 -> 0.4 while its accuracy stays 0.8: selectivity 0.1 -> 0.4; pos's stays 0.4
    assert sentence.startswith("At step 50 the linear probe is most selective on dependency label: 0.80 against its "
                               "control task's 0.40 at hidden state 2 (selectivity 0.40).")
    assert "part of speech 0.40 → 0.40, dependency label 0.10 → 0.40, noun number -0.05 → -0.05" in sentence
    assert sentence.endswith("Not selective on noun number: the control task, which only word types can give, scores "
                             "as well or better, so that accuracy says nothing about the vectors.")
    assert "Not selective" not in selectivity_sentence(history([1] * 4, [1] * 4))


@pytest.mark.parametrize(("drops", "verdict"), [
    ([(0.5, 0.7), (0.4, 0.7), (0.3, 0.7), (0.25, 0.7)], "The drop exceeds the random one at every measured step"),
    ([(0.75, 0.7), (0.4, 0.7), (0.7, 0.7), (0.25, 0.7)], "The drop exceeds the random one at steps 10, 50 of the 4 "
                                                         "measured"),
    ([(0.74, 0.7), (0.75, 0.7), (0.7, 0.7), (0.8, 0.7)], "The drop never exceeds the random one: by this measure the "
                                                         "model does not use, for agreement, the number the probe finds"),
])
def test_the_amnesic_sentence_says_whether_the_drop_ever_exceeds_the_random_one(drops, verdict):
    sentence = amnesic_sentence(history([1] * 4, [1] * 4, drops))
    assert verdict + " (20 pairs: one pair is 5.0 points)." in sentence
    after, random = drops[-1]
    move = "lowers agreement by 50.0 points" if after == 0.25 else "raises agreement by 5.0 points"
    assert sentence.startswith(f"At step 50, removing noun number's 5 directions at hidden state 2 {move} (from 75% "
                               f"to {after:.0%}); 5 random directions lower it by 5.0 points (mean of 3).")


def test_steps_without_probing_are_left_out_and_nothing_is_said_without_any():
    some = history([1, 1, 1, 1], [2, 2, 2, 2], [None, (0.5, 0.7), None, (0.5, 0.7)])
    old = SyntaxAt(5, (0.3, 0.5, 0.4), 0.5, {"all": HeadScore(0, 0, 0.2, 1, 0.4, 9)}, {0: 0.5})  # before probing
    mixed = SyntaxHistory(tuple(sorted((*some.records, old), key=lambda r: r.step)), shape=(2, 2, 32))
    data = series(mixed)
    assert data["steps"] == STEPS and data["tasks"] == ["pos", "dep"]
    np.testing.assert_array_equal(data["drop"], [np.nan, 0.25, np.nan, 0.25])
    np.testing.assert_array_equal(data["random_drop"], [np.nan, 0.75 - 0.7, np.nan, 0.75 - 0.7])
    np.testing.assert_array_equal(data["loss_rise"], [np.nan, 0.25, np.nan, 0.25])
    np.testing.assert_array_equal(data["rank"], [-1, 5, -1, 5])
    sentence = amnesic_sentence(mixed)  # over the two steps measured
    assert sentence.startswith("At step 50, removing") and "exceeds the random one at every measured step" in sentence
    empty = SyntaxHistory((old,), shape=(2, 2, 32))
    assert series(empty)["steps"] == [] and order_sentence(empty) == ""
    assert selectivity_sentence(empty) == "" and amnesic_sentence(empty) == ""


# --- The figures ------------------------------------------------------------------------------------------------
def test_the_three_figures_draw_the_series_step_by_step():
    data = series(history([1.5, 1.2, 0.9, None], [1.0, 1.3, 1.4, 1.6], [(0.5, 0.7)] * 3 + [None]))
    names = ["part of speech", "dependency label"]
    table = export.numbers(fts.expected_layer_lines(data["steps"], names, data["expected"], data["centre"], 2, "e"))
    rows = table[table["trace"] == "part of speech"]
    np.testing.assert_array_equal(rows["y"].to_numpy(dtype=float), [1.5, 1.2, 0.9, np.nan])
    assert rows["x label"].tolist() == ["0", "10", "20", "50"]
    table = export.numbers(fts.selectivity_lines(data["steps"], names, data["selectivity"], data["accuracy"],
                                                 data["control"], data["layer"], "s"))
    rows = table[table["trace"] == "dependency label"]
    assert rows["y"].tolist() == (data["accuracy"][:, 1] - data["control"][:, 1]).tolist()
    assert rows["text"].tolist()[0] == "accuracy 0.800, control 0.700" and set(rows["hidden state"]) == {2}
    table = export.numbers(fts.amnesic_lines(data["steps"], data["drop"], data["random_drop"], data["loss_rise"],
                                             data["random_loss_rise"], "noun number", "a"))
    rows = table[table["trace"] == "noun number removed"]
    np.testing.assert_array_equal(rows["y"].to_numpy(dtype=float), [25.0, 25.0, 25.0, np.nan])
    random = table[table["trace"] == "random directions, same rank"]
    np.testing.assert_array_equal(random["y"].to_numpy(dtype=float)[:3], [(0.75 - 0.7) * 100] * 3)
    assert random["masked-LM loss rise"].tolist()[0] == 0.0625


def with_amnesic(data: SyntaxHistory, amnesic: dict, note: str = "") -> SyntaxHistory:
    """`data` with step -> its amnesic result replaced (the others as they were)."""
    return SyntaxHistory(tuple(replace(r, probing=replace(r.probing, amnesic=amnesic.get(r.step, r.probing.amnesic),
                                                          note=note)) for r in data.records), shape=data.shape)


def test_where_nothing_could_be_removed_no_drop_is_drawn_and_the_sentence_says_why():
    data = history([1] * 4, [2] * 4, [(0.5, 0.7)] * 4)
    bare = replace(data.records[0].probing.amnesic, rank=0)  # a probe read number no better than the commonest label
    late = with_amnesic(data, {50: bare})
    np.testing.assert_array_equal(series(late)["drop"], [0.25, 0.25, 0.25, np.nan])
    sentence = amnesic_sentence(late)
    assert sentence.startswith("At step 20, removing noun number's 5 directions")
    assert sentence.endswith(" At step 50 a linear probe read noun number at hidden state 2 no better than the "
                             "commonest label, so there was nothing to remove.")
    assert amnesic_sentence(with_amnesic(data, dict.fromkeys(STEPS, bare))) == (
        "At no measured step could anything be removed: a linear probe read noun number at hidden state 2 no better "
        "than the commonest label, so there was nothing to remove.")
    failed = with_amnesic(data, dict.fromkeys(STEPS), "noun number: 9 training examples")
    assert amnesic_sentence(failed) == "At step 50 noun number was not removed: noun number: 9 training examples."


def test_the_expected_layer_axis_spans_the_hidden_states_and_any_value_outside_them():
    """Tenney et al.'s sum leaves 0..L where a cumulative accuracy falls; a step with none at all draws a gap."""
    steps, names = [0, 10], ["part of speech"]
    for expected, span in (([[np.nan], [np.nan]], [-0.1, 2.1]), ([[3.0], [-0.5]], [-0.6, 3.1])):
        fig = fts.expected_layer_lines(steps, names, np.array(expected), np.ones((2, 1)), 2, "e")
        assert list(fig.layout.yaxis.range) == span
