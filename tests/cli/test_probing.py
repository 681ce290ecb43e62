"""`python -m bertviz_lab probe` (issue 56): the JSON is probing.report's as_json shaped by the model (one entry per
hidden state, the tasks without enough examples under "missing"), the tables show the same numbers, --treebank reads
a CoNLL-U file (which has no coreference, and says so), --amnesic adds the removal's results, and every mistake is
one line on stderr and exit status 2."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import torch

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.cli import main
from bertviz_lab.probing.records import TASKS
from bertviz_lab.syntax.report import story_corpus
from bertviz_lab.syntax.treebank import write_treebank
from tests.helpers.lab import WORDS

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

SHIPPED_STATES = 5  # bertviz-mini: 4 layers, and the embeddings' output
LAYERS = 2
SENTENCES = 40  # the story world's first 40: enough for part of speech and dependency label, too few for the rest
NUMBER_SENTENCES = 80  # enough nouns for noun number's 40 training and 20 test examples


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A random 2-layer model whose vocabulary holds a few story words (the rest read as [UNK], which is enough to
    run every stage quickly)."""
    words = list(SPECIAL_TOKENS) + [w for w in WORDS + ["were", "is", "are", "children"] if w not in SPECIAL_TOKENS]
    vocab = words + [f"tok{i}" for i in range(100 - len(words))]
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    return save_checkpoint(BertForPreTraining(config).eval(), WordPieceTokenizer.from_vocab(vocab),
                           tmp_path_factory.mktemp("probe") / "tiny")


def run(folder, *args) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the command run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["probe", "--checkpoint", str(folder), "--device", "cpu", *map(str, args)])
    return status, out.getvalue(), err.getvalue()


def refused(folder, *args) -> str:
    """The one line a mistake prints; nothing on stdout, no traceback."""
    status, out, err = run(folder, *args)
    assert status == 2 and out == "" and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def shipped_json() -> dict:
    status, out, _ = run("bertviz-mini", "--json", "--sentences", SENTENCES, "--task", "pos")
    assert status == 0
    return json.loads(out)


def test_json_holds_every_measure_at_every_hidden_state(shipped_json):
    got = shipped_json
    assert got["corpus"] == "the story world (seed 0)" and got["sentences"] == SENTENCES
    assert got["train_sentences"] == 30 and got["hidden_states"] == SHIPPED_STATES and got["amnesic"] is None
    assert list(got["tasks"]) == ["pos"] and got["missing"] == {}
    for task in got["tasks"].values():
        for kind in ("linear", "mlp"):
            fits = task[kind]
            assert all(len(fits[k]) == SHIPPED_STATES for k in ("accuracy", "control", "selectivity"))
            assert all(abs(s - (a - c)) < 2e-6 for a, c, s in zip(fits["accuracy"], fits["control"],
                                                                  fits["selectivity"]))
        assert len(task["random_weights"]) == SHIPPED_STATES and len(task["mix"]["weights"]) == SHIPPED_STATES
        assert abs(sum(task["mix"]["weights"]) - 1) < 1e-5
        code = task["codelength"]
        assert len(code["online"]) == len(code["control"]) == len(code["random_weights"]) == SHIPPED_STATES
        assert max(task["linear"]["accuracy"]) > task["majority"]  # the shipped model's vectors hold the labels
    assert got["seconds"]["reading"] > 0 and "pos: mlp" in got["seconds"]


def test_tasks_with_too_few_examples_are_left_out_with_their_reason(tiny):
    status, out, _ = run(tiny, "--json", "--sentences", SENTENCES, "--no-mlp", "--no-codelength",
                         "--no-random-weights")
    assert status == 0
    got = json.loads(out)
    assert list(got["tasks"]) == ["pos", "dep"] and list(got["missing"]) == ["coref", "number"]
    assert "a probe needs at least 40 and 20" in got["missing"]["number"]
    task = got["tasks"]["dep"]
    assert "mlp" not in task and task["random_weights"] is None and task["codelength"] is None
    assert len(task["linear"]["accuracy"]) == LAYERS + 1


def test_text_shows_the_jsons_numbers_in_a_table_and_the_order(shipped_json):
    status, out, _ = run("bertviz-mini", "--sentences", SENTENCES, "--task", "pos", "--no-mlp", "--no-codelength",
                         "--no-random-weights")
    assert status == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:4] == ["state", "linear", "control", "select."])
    assert lines[header].split() == ["state", "linear", "control", "select."]  # no MLP, twin or codelength column
    rows = [line.split() for line in lines[header + 1:header + 1 + SHIPPED_STATES]]
    assert [r[0] for r in rows] == [str(n) for n in range(SHIPPED_STATES)]
    assert [r[1] for r in rows] == [f"{a:.1%}" for a in shipped_json["tasks"]["pos"]["linear"]["accuracy"]]
    assert any(line.startswith("scalar mix: expected layer") for line in lines)
    expected = shipped_json["tasks"]["pos"]["mix"]["expected_layer"]  # the mix is the same with or without the MLP
    assert ("order by expected layer: " + ("none gains accuracy past hidden state 0" if expected is None else
                                            f"pos {expected:.2f}")) in lines
    assert "left out" not in out  # one task asked for, and it was probed


def test_amnesic_adds_the_removal_and_agreement_for_number(tiny):
    status, out, _ = run(tiny, "--sentences", NUMBER_SENTENCES, "--task", "number", "--amnesic", "1", "--draws", 2,
                         "--no-mlp", "--no-codelength", "--no-random-weights", "--json")
    assert status == 0
    got = json.loads(out)
    assert list(got["tasks"]) == ["number"] and got["hidden_states"] == LAYERS + 1
    removed = got["amnesic"]["number"]
    assert removed["layer"] == 1 and removed["draws"] == 2 and len(removed["loss_random"]) == 2
    assert removed["agreement_pairs"] is not None  # number asks about agreement too
    status, text, _ = run(tiny, "--sentences", NUMBER_SENTENCES, "--task", "number", "--amnesic", "--draws", 2,
                          "--no-mlp", "--no-codelength", "--no-random-weights")
    assert status == 0 and "amnesic probing of number at hidden state 1:" in text  # no value: the middle state
    assert re.search(r"a fresh linear probe: [\d.]+% before, [\d.]+% after", text)


def test_a_treebank_has_no_coreference_and_says_so(tiny, tmp_path):
    path = write_treebank(story_corpus(NUMBER_SENTENCES).trees, tmp_path / "story.conllu")
    status, out, _ = run(tiny, "--treebank", path, "--no-mlp", "--no-codelength", "--no-random-weights", "--json")
    assert status == 0
    got = json.loads(out)
    assert got["corpus"] == "story.conllu" and set(got["tasks"]) == {"pos", "dep", "number"}
    assert "CoNLL-U" in got["missing"]["coref"]
    assert "coreference" in refused(tiny, "--treebank", path, "--task", "coref")


def test_a_treebank_without_parts_of_speech_is_refused_for_them(tiny, tmp_path):
    trees = story_corpus(SENTENCES).trees
    text = "".join(f"# sent_id = {n}\n" + re.sub(r"^(\d+\t[^\t]+\t_\t)[A-Z]+\t", r"\1_\t", t.to_conllu(), flags=re.M)
                   for n, t in enumerate(trees, 1))
    path = tmp_path / "bare.conllu"
    path.write_text(text)
    assert "part of speech" in refused(tiny, "--treebank", path, "--task", "pos")


@pytest.mark.parametrize(("args", "said"), [
    (["--task", "verbs"], "no probing task 'verbs'"),
    (["--treebank", "/no/such/file.conllu"], "file.conllu"),
    (["--sentences", 5000], "--sentences must be from"),
    (["--sentences", 3], "--sentences must be from"),
    (["--sentences", 100, "--treebank", "x.conllu"], "with --treebank every sentence"),
    (["--seed", -1], "--seed must be from"),
    (["--draws", 3], "add --amnesic"),
    (["--amnesic", 1, "--draws", 0], "--draws must be from"),
    (["--amnesic", "deep"], "--amnesic takes a hidden state"),
    (["--amnesic", 3, "--sentences", SENTENCES], "hidden states 0 (the embeddings' output) to 2"),
])
def test_every_mistake_is_one_line_and_exit_2(tiny, args, said):
    assert said in refused(tiny, *args)


def test_every_task_is_named_in_the_help():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["probe", "--help"])
    assert all(task in out.getvalue() for task in TASKS)
