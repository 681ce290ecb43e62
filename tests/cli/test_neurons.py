"""`python -m bertviz_lab neurons`: the JSON holds views.neurons' numbers (the sentence's top neurons and factors,
every layer's most active neurons, the neurons behind a guess with the causal test, one neuron's contexts over a
corpus file), the text shows the same numbers aligned with the sentences written from them, and every mistake (a
layer, neuron or token that does not exist, an empty, missing or huge corpus file) is one line on stderr and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.cli import build_parser, main
from bertviz_lab.views.neurons.ask import NeuronAsk
from bertviz_lab.views.neurons.behind import behind_view
from bertviz_lab.views.neurons.corpus import MAX_FILE_BYTES, Sentences
from bertviz_lab.views.neurons.corpus import index as corpus_index
from bertviz_lab.views.neurons.neuron import neuron_view
from bertviz_lab.views.neurons.reading import LIMITS, sentence_sentences
from bertviz_lab.views.neurons.sentence import sentence_view
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
TEXT = "the children in the park [MASK] happy ."
PLAIN = "on monday the children were busy ."
CORPUS = ["on monday the cat sat on the mat .", "the dog ran to the park on friday .", "she ate the bread .",
          "on sunday the children played in the garden .", "the keys to the cabinet were on the table ."]


def run(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["neurons", "--checkpoint", str(SHIPPED), "--device", "cpu", *map(str, args)])
    return code, out.getvalue(), err.getvalue()


def as_json(*args) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(SHIPPED)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "mine.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


def test_json_of_a_sentence_holds_the_views_top_neurons_factors_and_every_layers_most_active(ckpt):
    got = as_json("--layer", 2, "--token", 1, "--factors", 3, PLAIN)
    view = sentence_view(ckpt, NeuronAsk(PLAIN, layer=2, token=1, factors=3))
    assert got["tokens"] == view.tokens and (got["layer"], got["token"]) == (2, 1)
    assert [t["neuron"] for t in got["top_neurons"]] == [t.neuron for t in view.top]
    np.testing.assert_allclose([t["activation"] for t in got["top_neurons"]], [t.activation for t in view.top],
                               atol=1e-5)
    np.testing.assert_allclose(got["factors"]["strengths"], view.factors.strengths, atol=1e-4)
    assert got["reading"] == sentence_sentences(view) and "behind" not in got and "neuron_view" not in got
    assert len(got["by_layer"]) == 4
    for row in got["by_layer"]:
        at = view.activations[row["layer"], 1]  # (N,) at token 1
        assert row["neurons"][0] == int(np.argmax(at)) and row["activations"] == sorted(row["activations"])[::-1]
        np.testing.assert_allclose(row["activations"], at[row["neurons"]], atol=1e-5)


def test_json_of_a_mask_holds_the_views_neurons_behind_the_guess_and_the_causal_test(ckpt):
    got = as_json("--answer", "were", "--foil", "was", "--k", 5, "--draws", 6, "--seed", 3, TEXT)
    view = behind_view(ckpt, NeuronAsk(TEXT, answer="were", foil="was", k=5, draws=6, seed=3))
    behind = got["behind"]
    assert behind["metric"] == "logit(were) - logit(was)" and behind["method"] == "ig"
    assert [(r["layer"], r["neuron"]) for r in behind["top"]] == [(r.layer, r.neuron) for r in view.top]
    assert behind["f"] == pytest.approx(view.test.f, abs=1e-4)
    assert behind["f_top"] == pytest.approx(view.test.f_top, abs=1e-4)
    np.testing.assert_allclose(behind["f_random"], view.test.f_random, atol=1e-4)
    assert len(behind["f_random"]) == 6 and behind["beats_random"] == view.test.beats_random


def test_json_of_one_neuron_holds_its_contexts_over_the_corpus_file_and_its_switch_off(ckpt, corpus_file):
    got = as_json("--layer", 1, "--neuron", 537, "--corpus", corpus_file, TEXT)["neuron_view"]
    ask = NeuronAsk(TEXT, layer=1, neuron=537)
    index = corpus_index(ckpt, Sentences("mine.txt", tuple(CORPUS)))
    view = neuron_view(ckpt, index, ask, "mine.txt")
    assert (got["layer"], got["neuron"]) == (1, 537) and len(got["contexts"]) == len(view.contexts)
    np.testing.assert_allclose([c["activation"] for c in got["contexts"]], [c.value for c in view.contexts],
                               atol=1e-5)
    assert [c["token"] for c in got["contexts"]] == view.firing
    assert got["mean"] == pytest.approx(view.mean, abs=1e-6)
    assert [w for w, _ in got["promotes"]] == [w for w, _ in view.promoted]
    assert got["switch_off"]["f_zero"] == pytest.approx(view.switch.f_zero, abs=1e-4)


def test_the_text_shows_each_part_with_its_numbers_and_the_limits(ckpt, corpus_file):
    code, out, _ = run("--layer", 1, "--neuron", 537, "--corpus", corpus_file, TEXT)
    assert code == 0
    index = corpus_index(ckpt, Sentences("mine.txt", tuple(CORPUS)))
    first = index.contexts(1, 537)[0]
    assert f"Neuron 537 of layer 1: its top {len(index.contexts(1, 537))} contexts over mine.txt" in out
    assert f"{first.value:>8.4f}" in out and f"[{first.tokens[first.position]}]" in out
    assert "Promotes: " in out and "Switched off at every position: F = logit(" in out
    assert " ".join(out.split()).endswith(LIMITS) and "Tokens: 0 [CLS]" in out  # wrapped at 116 columns
    code, out, _ = run("--k", 4, "--draws", 3, TEXT)
    assert code == 0 and "Neurons behind the guess at token 6" in out and "Causal test: the top 4" in out
    lines = out.splitlines()
    header = lines.index("  layer  neuron     score  activation  promotes")
    assert all(re.fullmatch(r"\s+\d+\s+\d+\s+-?\d+\.\d{4}\s+-?\d+\.\d{4}\s+\S+", line) for line in lines[header + 1:
                                                                                                     header + 5])


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    (folder / "empty.txt").write_text("", encoding="utf-8")
    (folder / "huge.txt").write_bytes(b"the cat sat .\n" * (MAX_FILE_BYTES // 14 + 2))
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02 the cat")
    return folder


BAD = {
    "a layer that does not exist": (["--layer", 4], "layer 4 does not exist: this model's layers are 0 to 3"),
    "a neuron that does not exist": (["--layer", 0, "--neuron", 1024], "neuron 1024 does not exist"),
    "a negative neuron": (["--neuron", -1], "neuron must be a whole number from 0"),
    "a token past the text": (["--token", 40], "token 40 does not exist"),
    "an empty corpus file": (["--neuron", 3, "--corpus", "{bad}/empty.txt"], "the file is empty"),
    "a huge corpus file": (["--neuron", 3, "--corpus", "{bad}/huge.txt"], "the limit is"),
    "a binary corpus file": (["--neuron", 3, "--corpus", "{bad}/binary.txt"], "looks binary"),
    "a missing corpus file": (["--neuron", 3, "--corpus", "{bad}/nowhere.txt"], "there is no file"),
    "a folder as corpus": (["--neuron", 3, "--corpus", "{bad}"], "it is a folder"),
    "a corpus without a neuron": (["--corpus", "{bad}/empty.txt"], "add --neuron"),
    "an answer that is not a token": (["--answer", "xyzzyq"], "xyzzyq"),
    "too many top neurons": (["--k", 1000], "number of top neurons must be"),
    "an unknown method": (["--method", "shap"], "no attribution method called 'shap'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_mistake_is_one_line_and_exit_2(bad_files, case):
    args, message = BAD[case]
    code, out, err = run(*[str(a).format(bad=bad_files) for a in args], TEXT)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_an_empty_text_is_one_line_too():
    code, out, err = run("   ")
    assert code == 2 and out == "" and "the text is empty" in err and err.count("\n") == 1


def test_a_real_process_lists_the_options_and_fails_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "neurons", "--checkpoint", str(SHIPPED),
                           "--layer", "9", TEXT], capture_output=True, text=True, env=no_gpu_env(PYTHONPATH=str(ROOT)),
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    text = build_parser()._subparsers._group_actions[0].choices["neurons"].format_help()
    for option in ("--checkpoint", "--layer", "--neuron", "--token", "--corpus", "--answer", "--foil", "--k",
                   "--draws", "--seed", "--factors", "--method", "--json", "--device"):
        assert option in text
