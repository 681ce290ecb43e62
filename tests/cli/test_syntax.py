"""`python -m bertviz_lab syntax`: the JSON is syntax.report's (the same numbers as `as_json(analyse(...))` run here),
shaped by the model (L + 1 probe layers, heads that exist), the tables show the same numbers, --treebank reads
the file's sentences instead of the story world's, a model without a masked-LM head gets no agreement and a note,
and every mistake is one line on stderr and exit 2 (issue 36)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.bert.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from bertviz_lab.cli import build_parser, main
from bertviz_lab.corpus.agreement import MAX_ATTRACTORS
from bertviz_lab.syntax.report import Corpus, analyse, as_json, story_corpus
from bertviz_lab.syntax.treebank import read_treebank
from tests.helpers.family_models import build
from tests.helpers.lab import WORDS, no_gpu_env
from tests.helpers.paths import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny models run on one torch thread

PROGRESS = re.compile(r"syntax: +\d+% (.+) \(\d+ s\)")  # one line of progress on stderr: how far, the stage, the time
SENTENCES = 40
# The tiny vocabulary, with both forms of "be" in either tense and the example's words as whole tokens.
EXTRA = "were is are children park happy in".split()
LAYERS, HEADS = 2, 4
# Ten sentences in CoNLL-U (1-based heads, 0 = root) with relations the story world never writes (xcomp, expl).
PARSES = [("the cat was tired .", "2 4 4 0 4", "det nsubj cop root punct"),
          ("it was the cat .", "4 4 4 0 4", "expl cop det root punct"),
          ("the dog went to play .", "2 3 0 5 3 3", "det nsubj root mark xcomp punct"),
          ("i love food .", "2 0 2 2", "nsubj root obj punct"),
          ("the cats sat on the rug .", "2 3 0 6 6 3 3", "det nsubj root case det obl punct"),
          ("she went to the bank .", "2 0 5 5 2 2", "nsubj root case det obl punct"),
          ("they love the river .", "2 0 4 2 2", "nsubj root det obj punct"),
          ("he was happy .", "3 3 0 3", "nsubj cop root punct"),
          ("a dog sat .", "2 3 0 3", "det nsubj root punct"),
          ("the children went to play .", "2 3 0 5 3 3", "det nsubj root mark xcomp punct")]


def conllu(parses) -> str:
    blocks = []
    for text, heads, relations in parses:
        rows = [f"{i}\t{w}\t_\tX\t_\t_\t{h}\t{r}\t_\t_"
                for i, (w, h, r) in enumerate(zip(text.split(), heads.split(), relations.split()), 1)]
        blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks) + "\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    words = list(SPECIAL_TOKENS) + [w for w in WORDS + EXTRA if w not in SPECIAL_TOKENS]
    vocab = words + [f"tok{i}" for i in range(100 - len(words))]
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    return save_checkpoint(BertForPreTraining(config).eval(), WordPieceTokenizer.from_vocab(vocab),
                           tmp_path_factory.mktemp("syntax") / "tiny")


@pytest.fixture(scope="module")
def ckpt(folder):
    return load_checkpoint(folder)


def run_both(capsys, folder, *args) -> tuple[str, list[str]]:
    """(stdout, stderr's lines): progress lines only on stderr (not a terminal here: no bar, plain lines)."""
    assert main(["syntax", "--checkpoint", str(folder), "--device", "cpu", *map(str, args)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines and all(PROGRESS.fullmatch(line) for line in lines), lines
    return captured.out, lines


def run(capsys, folder, *args) -> str:
    return run_both(capsys, folder, *args)[0]


def report(capsys, folder, *args) -> dict:
    return json.loads(run(capsys, folder, "--json", *args))


def expected(ckpt, corpus=None, **options) -> dict:
    """The backend's own JSON, computed here, through JSON as the command prints it."""
    corpus = corpus or story_corpus(SENTENCES)
    return json.loads(json.dumps(as_json(analyse(ckpt.model, ckpt.tokenizer, corpus, **options))))


@pytest.fixture(scope="module")
def without_control(folder, ckpt) -> tuple[dict, dict]:
    """(the command's JSON, the backend's) for the story world's first 40 sentences, no control; shared by the
    tests that read it (capsys is per test, so stdout goes to a buffer of our own)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["syntax", "--checkpoint", str(folder), "--device", "cpu", "--json", "--sentences", str(SENTENCES),
                     "--no-control"]) == 0
    return json.loads(buffer.getvalue()), expected(ckpt, control=False)


def test_json_is_the_reports_and_shaped_by_the_model(without_control):
    got, want = without_control
    for key, value in want.items():
        assert got[key] == value, key  # every number as analyse() computes it, the agreement pairs included
    assert got["sentences"] == SENTENCES and got["corpus"] == "the story world (seed 0)"  # the count is said once, beside it
    layers = got["probe"]["layers"]
    assert [s["layer"] for s in layers] == list(range(LAYERS + 1))  # 0: the embeddings' output, then each layer
    assert "random_weights" not in got["probe"] and got["probe"]["train_sentences"] == 30
    relations = got["relations"]
    assert next(iter(relations)) == "all"
    assert relations["all"]["count"] == sum(r["count"] for name, r in relations.items() if name != "all")
    for entry in relations.values():
        for key in ("dependent_to_head", "head_to_dependent"):
            layer, head = entry[key]["head"]
            assert 0 <= layer < LAYERS and 0 <= head < HEADS and 0 <= entry[key]["accuracy"] <= 1
        assert entry["baseline"]["offset"] != 0 and 0 < entry["baseline"]["accuracy"] <= 1
    for score in layers:
        assert all(0 <= score[k] <= 1 for k in ("uuas", "root_accuracy")) and -1 <= score["spearman"] <= 1
    assert set(got["agreement"]) == set(got["agreement_pairs"]) == {str(k) for k in range(MAX_ATTRACTORS + 1)}
    assert all(n > 0 for n in got["agreement_pairs"].values()) and "note" not in got
    pair = got["agreement_example"]
    assert (pair["text"], pair["right"], pair["wrong"]) == ("the children in the park [MASK] happy .", "were", "was")
    assert 0 < pair["p_right"] < 1 and 0 < pair["p_wrong"] < 1


def test_the_control_adds_the_probe_on_random_weights(capsys, folder, ckpt, without_control):
    out, progress = run_both(capsys, folder, "--json", "--sentences", SENTENCES)
    got, want = json.loads(out), expected(ckpt, control=True)
    assert {k: got[k] for k in want} == want
    control = got["probe"]["random_weights"]
    assert [s["layer"] for s in control] == list(range(LAYERS + 1))
    assert got["probe"]["layers"] == without_control[0]["probe"]["layers"]  # the control changes nothing else


def test_progress_says_each_stage_on_stderr_as_it_starts_and_stdout_stays_json(capsys, folder):
    """Issue 52: a 22.7M-parameter model ran 17.5 minutes printing nothing. Every stage is said as it starts, in
    order, with how far it is; stdout holds the JSON alone."""
    out, lines = run_both(capsys, folder, "--json", "--sentences", SENTENCES)
    assert json.loads(out)["sentences"] == SENTENCES
    stages = [PROGRESS.fullmatch(line).group(1) for line in lines]
    control = "the control (random weights): "
    want = ["reading the sentences: 0 of 40", *(f"training the structural probe: layer {n} ({n} of {LAYERS + 1} "
                                               "layers done" for n in range(LAYERS + 1)),
            "scoring every head on every relation", f"{control}reading the sentences: 0 of 40",
            f"{control}training the structural probe: layer 0 (0 of 3", "scoring the agreement pairs", "done"]
    found = [next(i for i, stage in enumerate(stages) if stage.startswith(start)) for start in want]
    assert found == sorted(found) and found[0] == 0 and found[-1] == len(stages) - 1, stages
    assert lines[-1].startswith("syntax: 100% done")
    assert any(re.fullmatch(r"scoring the agreement pairs: \d+ of \d+", stage) for stage in stages)


def test_the_tables_show_the_jsons_numbers(capsys, folder, without_control):
    got = without_control[0]
    out = run(capsys, folder, "--sentences", SENTENCES, "--no-control")
    lines = out.splitlines()
    assert lines[0].startswith("the story world (seed 0): 40 sentences; the probe trained on 30")
    for name, entry in got["relations"].items():
        row = next(line for line in lines if line.split()[:1] == [name])
        few = entry["count"] < 10  # the best of L x H heads on so few is mostly luck: said on the row
        assert row.endswith("  (too few to tell)") == few
        row = row.removesuffix("  (too few to tell)")
        (l1, h1), (l2, h2) = entry["dependent_to_head"]["head"], entry["head_to_dependent"]["head"]
        assert row.split() == [name, f"{entry['count']:,}", f"L{l1}", f"H{h1}",
                               f"{entry['dependent_to_head']['accuracy']:.1%}", f"L{l2}", f"H{h2}",
                               f"{entry['head_to_dependent']['accuracy']:.1%}", f"{entry['baseline']['offset']:+d}",
                               f"{entry['baseline']['accuracy']:.1%}"]
    header = lines.index(next(line for line in lines if line.split()[:2] == ["layer", "UUAS"]))
    for score, line in zip(got["probe"]["layers"], lines[header + 1:header + 1 + LAYERS + 1]):
        assert line.split() == [str(score["layer"]), f"{score['uuas']:.3f}", f"{score['spearman']:.3f}",
                                f"{score['root_accuracy']:.1%}"]
    assert f"linear baseline (each word linked to the next) {got['probe']['linear_baseline_uuas']:.3f}" in out
    for k, accuracy in got["agreement"].items():
        assert f"{k:>10} {accuracy:>9.1%} {got['agreement_pairs'][k]:>7,}" in lines
    pair = got["agreement_example"]
    assert f"p(were) = {pair['p_right']:.4f}, p(was) = {pair['p_wrong']:.4f}" in out
    assert re.search(r"^took \d+\.\d s \(reading and probe .*agreement", lines[-1])


def test_the_control_has_its_column(capsys, folder):
    out = run(capsys, folder, "--sentences", SENTENCES)
    assert "random weights UUAS" in out and "; random weights at best " in out


def test_a_treebank_is_read_instead_of_the_story_world(capsys, folder, ckpt, tmp_path):
    path = tmp_path / "mine.conllu"
    path.write_text(conllu(PARSES), encoding="utf-8")
    got = report(capsys, folder, "--treebank", path, "--no-control")
    assert (got["corpus"], got["sentences"]) == ("mine.conllu", len(PARSES))
    relations = {r for _, _, rels in PARSES for r in rels.split()} - {"root"}
    assert set(got["relations"]) == {"all", *relations} and {"xcomp", "expl"} <= set(got["relations"])
    assert got["relations"]["all"]["count"] == sum(len(text.split()) - 1 for text, _, _ in PARSES)
    assert got["probe"]["test_sentences"] == 2 and len(got["probe"]["layers"]) == LAYERS + 1  # round(2.5)
    assert got["agreement_pairs"]["0"] > 0  # agreement: the built-in pairs, whatever the corpus
    want = expected(ckpt, Corpus(read_treebank(path).trees, "mine.conllu"), control=False)
    assert {k: got[k] for k in want} == want


def test_a_treebanks_broken_sentence_is_left_out_with_a_note(capsys, folder, tmp_path):
    path = tmp_path / "some.conllu"
    path.write_text(conllu([*PARSES, ("two roots .", "0 0 1", "root root punct")]), encoding="utf-8")
    got = report(capsys, folder, "--treebank", path, "--no-control")
    assert got["sentences"] == len(PARSES)
    assert got["note"].startswith("1 left out, the first because sentence 11, line ") and "one root" in got["note"]
    assert "note: 1 left out" in run(capsys, folder, "--treebank", path, "--no-control")


def test_a_model_without_a_masked_lm_head_gets_no_agreement_and_a_note(capsys, headless_checkpoint):
    got = report(capsys, headless_checkpoint, "--sentences", SENTENCES, "--no-control")
    assert got["agreement"] is None and "agreement_example" not in got and "agreement_pairs" not in got
    assert "no masked-LM head" in got["note"] and len(got["probe"]["layers"]) == LAYERS + 1
    out = run(capsys, headless_checkpoint, "--sentences", SENTENCES, "--no-control")
    assert "agreement: left out" in out and "note: no agreement scores:" in out


def test_a_vocabulary_without_the_forms_keeps_its_relations_and_probe(capsys, tmp_path):
    """RoBERTa's little test vocabulary splits was/were into pieces: no pair can be scored, the rest stands."""
    torch.manual_seed(0)
    build("roberta", tmp_path / "roberta")
    capsys.readouterr()  # transformers' "Writing model shards" bar
    got = report(capsys, tmp_path / "roberta", "--sentences", SENTENCES, "--no-control")
    assert got["agreement"] is None and "was/were" in got["note"] and got["relations"]["all"]["count"] > 0


def test_the_command_is_listed_and_documented():
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "--help"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0 and "syntax" in done.stdout
    text = build_parser()._subparsers._group_actions[0].choices["syntax"].format_help()
    for option in ("--checkpoint", "--treebank", "--sentences", "--seed", "--no-control", "--json"):
        assert option in text


def broken(tmp_path, folder, name: str, data: bytes) -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(folder, copy)
    (copy / name).write_bytes(data)
    return copy


BAD = {  # case -> (arguments after --checkpoint FOLDER, or a function of (tmp_path, folder) giving them; message)
    "missing folder": (lambda tmp, folder: ["--checkpoint", tmp / "nowhere"], "no model folder"),
    "broken config": (lambda tmp, folder: ["--checkpoint", broken(tmp, folder, "config.json", b"{")],
                      "config.json is not valid JSON"),
    "broken weights": (lambda tmp, folder: ["--checkpoint", broken(tmp, folder, "model.safetensors", b"junk")],
                       "truncated or corrupt"),
    "no treebank": (lambda tmp, folder: ["--treebank", tmp / "none.conllu"], "none.conllu"),
    "not conllu": (lambda tmp, folder: ["--treebank", written(tmp, "x.conllu", "hello world\n")],
                   "x.conllu is not a CoNLL-U file"),
    "an empty treebank": (lambda tmp, folder: ["--treebank", written(tmp, "e.conllu", "")], "e.conllu is empty"),
    "too few sentences": (lambda tmp, folder: ["--treebank", written(tmp, "s.conllu", conllu(PARSES[:3]))],
                          "need at least 8"),
    "sentences 0": (["--sentences", "0"], "--sentences must be from 8 to 2,000"),
    "sentences huge": (["--sentences", "1000000"], "--sentences must be from 8 to 2,000"),
    "sentences not a number": (["--sentences", "many"], "argument --sentences: invalid int value: 'many'"),
    "sentences with a treebank": (["--sentences", "50", "--treebank", "x.conllu"], "every sentence of the file"),
    "negative seed": (["--seed", "-1"], "--seed must be from 0"),
    "unknown option": (["--layers", "3"], "unrecognized arguments: --layers 3"),
}


ARGPARSE = re.compile(r"invalid int value|unrecognized arguments")  # refused by argparse, as every command's are


def written(tmp_path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(BAD))
def test_each_mistake_is_one_line_and_exit_2(capsys, folder, tmp_path, case):
    args, message = BAD[case]
    args = args(tmp_path, folder) if callable(args) else args
    argv = ["syntax", "--device", "cpu", *(["--checkpoint", str(folder)] if "--checkpoint" not in args else []),
            *map(str, args)]
    try:
        status = main(argv)
    except SystemExit as exited:  # argparse's refusals
        status = exited.code
    captured = capsys.readouterr()
    assert status == 2 and captured.out == "" and "Traceback" not in captured.err
    if ARGPARSE.search(message):  # argparse's own refusal: its usage line, then one line with the reason
        assert captured.err.startswith("usage: ") and captured.err.splitlines()[-1].endswith(message)
    else:
        assert captured.err.startswith("error: ") and captured.err.count("\n") == 1 and message in captured.err


def test_mistakes_from_a_real_process_have_no_traceback(tmp_path, folder):
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    for args, message in ((["--checkpoint", tmp_path / "nowhere"], "no model folder"),
                          (["--checkpoint", folder, "--bogus"], "unrecognized arguments: --bogus")):
        done = subprocess.run([sys.executable, "-m", "bertviz_lab", "syntax", *map(str, args)],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.splitlines()[-1].endswith(message) if ARGPARSE.search(message) else (
            done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and message in done.stderr)
