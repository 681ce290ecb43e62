"""The "probing" entry of a syntax.jsonl record (views/timelapse/probing.py): what it keeps of probe_corpus's and
amnesic's records, read back exactly as written, and refused, never raised on, when it does not add up."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertviz_lab.probing.records import Amnesic, LayerFits, Mix, Probing, TaskProbes
from bertviz_lab.views.timelapse.probing import Probes, as_entry, entry_of, parse

LAYERS = 2  # hidden states 0..2


def task_probes(task: str, accuracy, control, expected: float | None, centre: float) -> TaskProbes:
    mix = Mix(np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.7, 0.75]), expected, centre)
    return TaskProbes(task, ("a", "b"), 100, 40, 0.55, LayerFits("linear", np.array(accuracy), np.array(control)),
                      None, None, mix, None)


def amnesic_record(masked: int = 120) -> Amnesic:
    return Amnesic("number", 1, 6, 6, 0.6, 0.95, 0.61, 0.93, masked, 2.5, 2.75, np.array([2.5, 2.6]), 0.4, 0.35,
                   np.array([0.4, 0.38]), {0: 1.0, 1: 0.75, 2: 0.5, 3: None}, {0: 0.5, 1: 0.5, 2: 0.25, 3: None},
                   {0: 1.0, 1: 0.625, 2: 0.5, 3: None}, {0: 4, 1: 8, 2: 4, 3: 0}, 2, 0)


def probing_record() -> Probing:
    tasks = {"pos": task_probes("pos", [0.5, 0.9, 0.8], [0.4, 0.3, 0.5], 1.25, 1.3),
             "dep": task_probes("dep", [0.6, 0.7, 0.95], [0.5, 0.6, 0.65], None, 0.4)}
    return Probing("the story world (seed 0)", 60, 45, LAYERS + 1, tasks,
                   {"number": "noun number: 30 training and 8 test examples; a probe needs at least 40 and 20"})


def test_an_entry_keeps_the_best_layer_the_mix_and_the_pooled_agreement():
    entry = entry_of(probing_record(), amnesic_record(), 3.456)
    assert entry["seconds"] == 3.46 and entry["note"] == ""
    assert entry["tasks"]["pos"] == {"expected_layer": 1.25, "centre": 1.3, "layer": 1, "accuracy": 0.9,
                                     "control": 0.3, "majority": 0.55, "train": 100, "test": 40}
    assert entry["tasks"]["dep"]["layer"] == 2 and entry["tasks"]["dep"]["expected_layer"] is None
    assert entry["missing"] == {"number": probing_record().missing["number"]}
    assert entry["amnesic"]["loss_random"] == 2.55 and entry["amnesic"]["pairs"] == {"0": 4, "1": 8, "2": 4, "3": 0}
    at = parse(json.loads(json.dumps(entry)), LAYERS)  # through the file's JSON
    assert as_entry(at) == entry  # rewritten exactly as it was written
    assert at.tasks["pos"].selectivity == 0.9 - 0.3
    removed = at.amnesic
    assert removed.pooled("before") == (4 * 1.0 + 8 * 0.75 + 4 * 0.5) / 16  # weighted by pairs; 3: no pair
    assert removed.pooled("after") == (4 * 0.5 + 8 * 0.5 + 4 * 0.25) / 16
    assert removed.pooled("random") == (4 * 1.0 + 8 * 0.625 + 4 * 0.5) / 16 and removed.pairs_scored == 16


def test_a_model_without_a_masked_lm_head_keeps_its_probes_and_says_why():
    result = amnesic_record(masked=0)
    bare = Amnesic(*[getattr(result, f) for f in result.__dataclass_fields__][:15], None, None, None, None, 2, 0,
                   "this model has no masked-language-model head")
    entry = entry_of(probing_record(), bare, 1.0, bare.note)
    at = parse(entry, LAYERS)
    assert at.amnesic.loss_before is None and at.amnesic.pooled("before") is None and at.amnesic.pairs_scored == 0
    assert at.note == "this model has no masked-language-model head" and set(at.tasks) == {"pos", "dep"}
    assert parse(entry_of(probing_record(), None, 1.0, "too few nouns"), LAYERS).amnesic is None


@pytest.mark.parametrize("damage", [
    lambda e: e["tasks"]["pos"].update(layer=3),  # a hidden state a 2-layer model lacks
    lambda e: e["tasks"]["pos"].update(accuracy=1.5),
    lambda e: e["tasks"]["pos"].update(expected_layer=float("nan")),
    lambda e: e["tasks"]["pos"].pop("control"),
    lambda e: e["tasks"].update(syntax={}),  # no such task
    lambda e: e["missing"].update(dep=["not", "a", "sentence"]),
    lambda e: e["amnesic"].update(rank=-1),
    lambda e: e["amnesic"]["before"].update({"0": 2.0}),
    lambda e: e["amnesic"]["pairs"].update({"x": 1}),
    lambda e: e.update(seconds="soon"),
    lambda e: e.update(amnesic=[1, 2]),
])
def test_an_entry_that_does_not_add_up_is_refused_not_raised(damage):
    entry = json.loads(json.dumps(entry_of(probing_record(), amnesic_record(), 1.0)))
    assert parse(entry, LAYERS) is not None
    damage(entry)
    assert parse(entry, LAYERS) is None
    assert parse("probing", LAYERS) is None and parse({}, LAYERS) is None


def test_probing_settings_are_read_back_or_refused():
    probes = Probes(("pos", "number"), 2, 5, 100)
    assert Probes.of(json.loads(json.dumps(probes.as_json()))) == probes
    assert Probes().tasks == ("pos", "dep", "number")  # coreference: too few test pairs in 400 sentences
    good = {"tasks": ["pos"], "draws": 2, "amnesic_pairs": 5, "sentences": 100}
    for bad in ({"tasks": ["pos", "pos"]}, {"tasks": ["syntax"]}, {"tasks": []}, {"draws": 0}, {"draws": True},
                {"sentences": 4}, {"sentences": None}):
        assert Probes.of({**good, **bad}) is None
    assert Probes.of(None) is None and Probes.of(good) == Probes(("pos",), 2, 5, 100)
