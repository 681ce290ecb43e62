"""`nb.probe`: the record holds probing.report's Probing (the same numbers as `probe_corpus` run here), kept on the Lab
so asking again runs nothing; `table` is one task's numbers by hidden state; an amnesic layer adds amnesic probing per
task; the figures are the page's builders'; and every mistake is one InputError sentence."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from bertviz_lab import notebook as nb
from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.errors import InputError
from bertviz_lab.probing.records import Amnesic, Probing
from bertviz_lab.probing.report import probe_corpus
from bertviz_lab.syntax.report import story_corpus
from tests.helpers.lab import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")

SENTENCES = 40
LINEAR_ONLY = dict(mlp=False, codelength=False, random_weights=False)


@pytest.fixture(scope="module")
def lab():
    return nb.load("bertviz-mini", device="cpu")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 2-layer model: amnesic probing's agreement and masked-LM runs in a moment."""
    words = list(SPECIAL_TOKENS) + [w for w in WORDS + ["were", "is", "are", "children"] if w not in SPECIAL_TOKENS]
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    folder = save_checkpoint(BertForPreTraining(config).eval(), WordPieceTokenizer.from_vocab(
        words + [f"tok{i}" for i in range(100 - len(words))]), tmp_path_factory.mktemp("nb_probe") / "tiny")
    return nb.load(folder, device="cpu")


def test_probe_returns_probe_corpus_records_kept_on_the_lab(lab):
    got = nb.probe(lab, "pos", sentences=SENTENCES, **LINEAR_ONLY)
    want = probe_corpus(lab.model, lab.tokenizer, story_corpus(SENTENCES), ("pos",), kinds=("linear",),
                        codelength=False, random_weights=False)
    assert isinstance(got.probing, Probing) and list(got.tasks) == ["pos"] and got.amnesic == {}
    np.testing.assert_array_equal(got.tasks["pos"].linear.accuracy, want.tasks["pos"].linear.accuracy)
    np.testing.assert_array_equal(got.tasks["pos"].mix.weights, want.tasks["pos"].mix.weights)
    assert nb.probe(lab, "pos", sentences=SENTENCES, **LINEAR_ONLY).probing is got.probing  # kept, not run again
    table = got.table("pos")
    assert list(table.index) == list(range(5)) and "MLP" not in table.columns
    np.testing.assert_array_equal(table["linear selectivity"], want.tasks["pos"].linear.selectivity)
    figs = got.figures()
    assert len(figs) == 5 and all(isinstance(f, go.Figure) for f in figs)  # overview 3, the task's 2
    assert "pos: linear" in repr(got)


def test_an_amnesic_layer_adds_the_removal_per_task(tiny):
    got = nb.probe(tiny, "number", sentences=80, amnesic_layer=1, draws=2, **LINEAR_ONLY)
    removed = got.amnesic["number"]
    assert isinstance(removed, Amnesic) and removed.layer == 1 and len(removed.loss_random) == 2
    assert removed.agreement_pairs is not None
    figs = got.figures("number")
    assert len(figs) >= 3 and all(isinstance(f, go.Figure) for f in figs)
    assert "amnesic number at hidden state 1" in repr(got)
    again = nb.probe(tiny, "number", sentences=80, amnesic_layer=1, draws=2, **LINEAR_ONLY)
    assert again.amnesic["number"] is removed


def test_a_task_left_out_says_why(tiny):
    got = nb.probe(tiny, sentences=SENTENCES, **LINEAR_ONLY)
    assert set(got.missing) == {"coref", "number"}
    with pytest.raises(InputError, match="needs at least 40 and 20"):
        got.table("number")


@pytest.mark.parametrize(("kwargs", "said"), [
    (dict(task="verbs"), "task must be one of"),
    (dict(amnesic_layer=3), "amnesic_layer must be a whole number from 0 to 2"),
    (dict(sentences=5000), "sentences must be a whole number"),
    (dict(treebank="/no/such/file.conllu"), "file.conllu"),
    (dict(treebank="x.conllu", sentences=100), "with a treebank every sentence"),
    (dict(draws=0), "draws must be a whole number"),
    (dict(mlp="no"), "mlp must be True or False"),
])
def test_every_mistake_is_one_sentence(tiny, kwargs, said):
    with pytest.raises(InputError, match=said.replace("(", r"\(")):
        nb.probe(tiny, **kwargs)
