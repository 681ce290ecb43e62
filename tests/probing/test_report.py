"""Careful probing in one call (probing/report.py) over 120 story-world sentences, by a tiny random BERT with the
shipped model's word pieces (the real code path in a second or two): records of the shapes every floor above reads, a
task with too few examples named with its sentence, progress that only rises, JSON that survives json.dumps, and a
rerun equal bit for bit. Then the shipped model's own vectors, which carry part of speech better than its control
task and its random twin."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer_json import from_dir
from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import TASKS, Amnesic
from bertviz_lab.probing.report import amnesic_json, as_json, probe_corpus, seconds_needed
from bertviz_lab.syntax.report import story_corpus
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

SENTENCES = 120  # 90 train, 30 test: coreference has too few pronoun pairs, the other tasks enough


@pytest.fixture(scope="module")
def tiny():
    tokenizer = from_dir(ROOT / "checkpoints" / "bertviz-mini")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    return BertForPreTraining(config).eval(), tokenizer


@pytest.fixture(scope="module")
def probed(tiny):
    heard = []
    probing = probe_corpus(*tiny, story_corpus(SENTENCES),
                           progress=lambda fraction, message: heard.append((fraction, message)))
    return probing, heard


def test_every_task_with_enough_examples_has_every_measure_at_every_hidden_state(probed, tiny):
    probing, _ = probed
    states = tiny[0].config.num_hidden_layers + 1
    assert probing.hidden_states == states and probing.sentences == SENTENCES
    assert set(probing.tasks) | set(probing.missing) == set(TASKS) and not set(probing.tasks) & set(probing.missing)
    assert {"pos", "dep", "number"} <= set(probing.tasks)
    for task, p in probing.tasks.items():
        assert p.task == task and p.train > 0 and p.test > 0 and 0 < p.majority < 1
        for fits in (p.linear, p.mlp):
            assert fits.accuracy.shape == fits.control.shape == (states,)
            assert ((fits.accuracy >= 0) & (fits.accuracy <= 1)).all()
        assert p.random_weights.shape == (states,)
        assert p.mix.weights.shape == p.mix.cumulative.shape == (states,)
        assert abs(p.mix.weights.sum() - 1) < 1e-6 and 0 <= p.mix.centre <= states - 1
        code = p.codelength
        assert code.online.shape == code.control.shape == code.random_weights.shape == (states,)
        assert code.examples == p.train == code.blocks[-1]
        assert code.uniform == pytest.approx(p.train * np.log2(len(p.classes)))


def test_a_task_with_too_few_examples_is_one_sentence(probed):
    missing = probed[0].missing
    assert "coref" in missing and "training" in missing["coref"] and "\n" not in missing["coref"]


def test_progress_rises_from_the_first_reading_to_done(probed):
    _, heard = probed
    fractions = [f for f, _ in heard]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and heard[-1] == (1.0, "done")
    assert any("random-weights twin" in m for _, m in heard) and any(m.startswith("dependency label: ") for _, m in heard)
    assert max(np.diff(fractions)) < 0.2  # no stage jumps the bar


def test_the_json_is_plain_and_counts_layers_from_0(probed):
    probing, _ = probed
    out = json.loads(json.dumps(as_json(probing)))
    pos = out["tasks"]["pos"]
    assert len(pos["linear"]["accuracy"]) == probing.hidden_states == out["hidden_states"]
    assert pos["linear"]["accuracy"][0] == round(float(probing.tasks["pos"].linear.accuracy[0]), 6)
    assert out["missing"]["coref"] == probing.missing["coref"]
    assert set(out["seconds"]) == set(probing.seconds)


def test_a_rerun_is_bit_for_bit_the_same(probed, tiny):
    again = as_json(probe_corpus(*tiny, story_corpus(SENTENCES)))
    before = as_json(probed[0])
    before.pop("seconds"), again.pop("seconds")
    assert json.dumps(before) == json.dumps(again)


def test_the_shipped_model_beats_its_control_task_and_its_random_twin_on_part_of_speech(shipped):
    probing = probe_corpus(shipped.model, shipped.tokenizer, story_corpus(SENTENCES), tasks=("pos",),
                           kinds=("linear",), mix=False, codelength=False)
    pos = probing.tasks["pos"]
    assert pos.mlp is None and pos.mix is None and pos.codelength is None
    assert (pos.linear.selectivity > 0.1).all()
    assert pos.linear.accuracy.min() > pos.random_weights.max()


def test_unknown_tasks_and_probes_are_one_sentence_before_any_work(tiny):
    with pytest.raises(InputError, match="no probing task 'syntax'"):
        probe_corpus(*tiny, story_corpus(SENTENCES), tasks=("syntax",))
    with pytest.raises(InputError, match="no probe 'forest'"):
        probe_corpus(*tiny, story_corpus(SENTENCES), kinds=("forest",))


def test_the_time_needed_grows_with_the_model_and_the_corpus_and_shrinks_with_the_stages_left_out():
    base = seconds_needed(4, 256, 1200)
    assert seconds_needed(12, 768, 1200) > 5 * base and seconds_needed(4, 256, 2400) > base
    assert seconds_needed(4, 256, 1200, kinds=("linear",), mix=False, codelength=False, random_weights=False) < base / 2


def test_the_amnesic_json_is_plain():
    result = Amnesic(task="number", layer=2, rank=3, iterations=3, majority=0.5, probe_before=0.9, probe_after=0.5,
                     probe_random=0.88, masked=40, loss_before=2.0, loss_after=2.5, loss_random=np.array([2.1, 2.2]),
                     accuracy_before=0.4, accuracy_after=0.3, accuracy_random=np.array([0.39, 0.38]),
                     agreement_before={0: 0.9, 1: None}, agreement_after={0: 0.6, 1: None},
                     agreement_random={0: 0.85, 1: None}, agreement_pairs={0: 50, 1: 0}, draws=2, seed=0)
    out = json.loads(json.dumps(amnesic_json(result)))
    assert out["layer"] == 2 and out["loss_random"] == [2.1, 2.2] and out["accuracy_random"] == [0.39, 0.38]
    assert out["agreement_after"] == {"0": 0.6, "1": None} and out["agreement_pairs"] == {"0": 50, "1": 0}
    assert "note" not in out


def test_the_callers_thread_count_changes_no_bit(shipped):
    """The page runs on the class's thread count, the command on its own: the fits and their whitening run on
    PROBE_THREADS whatever the caller's, so both give the same numbers (the dependency label's expected layer moved
    from 1.67 to 1.48 on 2 threads when the whitening ran outside)."""
    def run(count: int) -> dict:
        before = torch.get_num_threads()
        torch.set_num_threads(count)
        try:
            out = as_json(probe_corpus(shipped.model, shipped.tokenizer, story_corpus(300), tasks=("dep",),
                                       kinds=("linear",), codelength=False, random_weights=False))
        finally:
            torch.set_num_threads(before)
        out.pop("seconds")
        return out
    assert json.dumps(run(1)) == json.dumps(run(2))
