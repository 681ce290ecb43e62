"""`python -m bertviz_lab attribute`: the JSON is views.why's, the table shows the same numbers, the options pick
the [MASK], layer and head they name, and every mistake is one line on stderr and exit 2 (issue 35, point 8)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.cli import build_parser, main
from bertviz_lab.explain.report import METHODS
from bertviz_lab.views import inputs
from bertviz_lab.views.why import explanation as vw
from bertviz_lab.views.predict.guesses import predict_masks
from tests.helpers.family_models import build
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
TEXT = "the cat sat on the [MASK] because it was tired ."


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(SHIPPED)


def attribute(capsys, *args) -> str:
    assert main(["attribute", "--checkpoint", str(SHIPPED), "--device", "cpu", *map(str, args)]) == 0
    return capsys.readouterr().out


def report(capsys, *args) -> dict:
    return json.loads(attribute(capsys, "--json", *args))


def logits_at(ckpt, text: str) -> dict[str, float]:
    """Every word's logit at the text's first [MASK], as `predict` reads them."""
    encoding = inputs.encode(ckpt.tokenizer, ckpt.model, text)
    mask = predict_masks(ckpt.model, ckpt.tokenizer, encoding, top_k=ckpt.tokenizer.vocab_size).masks[0]
    return {c.token: c.logit for c in mask.candidates}


def test_json_is_the_views_report_and_explains_the_top_guess(shipped, capsys):
    got = report(capsys, TEXT)
    encoding = inputs.encode(shipped.tokenizer, shipped.model, TEXT)
    expected = json.loads(json.dumps(vw.json_report(vw.why(shipped.model, shipped.tokenizer, encoding))))
    assert got.keys() == expected.keys() and got["tokens"] == encoding.tokens
    assert got["mask_position"] == encoding.tokens.index("[MASK]") == 6
    assert list(got["methods"]) == list(METHODS) and got["contrast"] is None
    assert len(METHODS) == 9 and "value_zeroing" in got["methods"] and "value_zeroing" in got["agreement"]["occlusion"]
    for key, values in got["methods"].items():
        assert len(values) == len(got["tokens"])
        np.testing.assert_allclose(values, expected["methods"][key], rtol=1e-6, atol=1e-9)
    flat = [(got["agreement"][a][b], expected["agreement"][a][b]) for a in METHODS for b in METHODS]
    assert all(x == y or x == pytest.approx(y, rel=1e-6) for x, y in flat)
    assert got["ig"]["steps"] == 50 and got["ig"]["score"] == pytest.approx(got["score"], rel=1e-5)
    assert got["attention"] == {"layer": shipped.config.num_hidden_layers - 1, "head": None}
    logits = logits_at(shipped, TEXT)
    assert got["target"] == max(logits, key=logits.get)  # the default target: the top guess
    assert got["score"] == pytest.approx(logits[got["target"]], rel=1e-5)  # F: its logit, as predict reads it
    rho = got["agreement"]
    for a in METHODS:
        assert rho[a][a] in (None, pytest.approx(1.0))
        for b in METHODS:
            assert rho[a][b] == rho[b][a]


def test_a_contrast_subtracts_the_contrast_words_logit_and_its_attributions(shipped, capsys):
    plain, rug = report(capsys, "--target", "mat", TEXT), report(capsys, "--target", "rug", TEXT)
    contrast = report(capsys, "--target", "mat", "--contrast", "rug", TEXT)
    logits = logits_at(shipped, TEXT)
    assert (plain["target"], contrast["target"], contrast["contrast"]) == ("mat", "mat", "rug")
    assert plain["score"] == pytest.approx(logits["mat"], rel=1e-5)
    assert contrast["score"] == pytest.approx(logits["mat"] - logits["rug"], rel=1e-5)
    assert contrast["probability"] == pytest.approx(plain["probability"])  # p stays p(target)
    for key in ("gradient_x_input", "integrated_gradients", "occlusion"):  # linear in F
        np.testing.assert_allclose(contrast["methods"][key],
                                   np.subtract(plain["methods"][key], rug["methods"][key]), atol=1e-4)
    assert contrast["methods"]["attention"] == plain["methods"]["attention"]  # attention knows no target


def test_mask_layer_and_head_pick_what_they_name(shipped, capsys):
    text = "the [MASK] sat on the [MASK] ."
    got = report(capsys, "--mask", 2, "--layer", 1, "--head", 2, text)
    encoding = inputs.encode(shipped.tokenizer, shipped.model, text)
    assert got["mask_position"] == 6 and got["attention"] == {"layer": 1, "head": 2}
    weights = inputs.run(shipped.model, encoding, trace=True).trace[1].weights[0, 2, 6]  # (T,)
    np.testing.assert_allclose(got["methods"]["attention"], weights.double().numpy(), rtol=1e-6)
    assert report(capsys, "--layer", -3, text)["attention"]["layer"] == shipped.config.num_hidden_layers - 3
    assert report(capsys, text)["mask_position"] == 2  # the first by default


def test_the_table_shows_every_method_for_every_token_aligned(capsys):
    out = attribute(capsys, "--top-k", 3, TEXT)
    got = report(capsys, TEXT)
    lines = out.splitlines()
    header = next(n for n, line in enumerate(lines) if line.split()[:2] == ["#", "token"])
    assert lines[header].split()[2:] == list(METHODS)
    rows = lines[header + 1: header + 1 + len(got["tokens"])]
    assert {len(row) for row in rows} == {len(lines[header])}  # every column ends where its heading does
    for i, row in enumerate(rows):
        cells = row.split()
        assert cells[0].rstrip("*") == str(i) and cells[1] == got["tokens"][i]
        for key, cell in zip(METHODS, cells[2:], strict=True):
            assert cell == f"{got['methods'][key][i]:#.4g}"  # 4 significant digits, trailing zeros kept
    assert rows[got["mask_position"]].split()[0] == f"{got['mask_position']}*"
    assert lines[0].startswith("[MASK] #1 of 1, at token 6; guesses: ") and lines[0].split(": ")[1].count(", ") == 2
    assert f"F = logit({got['target']}) = {got['score']:#.4g}; p({got['target']}) = {got['probability']:#.4g}" in out
    ig = got["ig"]
    assert (f"integrated gradients: 50 steps, F(x) = {ig['score']:#.4g}, F(baseline) = "
            f"{ig['baseline_score']:#.4g}") in out and "delta = " in out
    said = " ".join(out.split())
    assert "Spearman" in said and "Against occlusion" in said and "deletion" not in said


def test_deletion_adds_the_curves_and_the_verdict(capsys):
    whole = report(capsys, "--deletion", TEXT)
    got, tokens = whole["deletion"], whole["tokens"]
    assert got["positions"] == [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]", "[MASK]")]
    assert set(got["curves"]) == set(got["aopc"]) == set(got["beats_random"]) == set(METHODS)
    assert len(got["random_aopc"]) == 20
    for key, curve in got["curves"].items():
        assert len(curve) == len(got["positions"]) + 1
        assert got["aopc"][key] == pytest.approx(np.mean(curve[0] - np.asarray(curve)))
        assert got["beats_random"][key] == (got["aopc"][key] > max(got["random_aopc"]))
    out = attribute(capsys, "--deletion", TEXT)
    assert "deletion: AOPC" in out and f"{got['aopc']['occlusion']:#.4g}" in out
    assert re.search(r"random orders", out.split("deletion: AOPC")[1])


def test_the_command_is_listed_and_documented():
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "--help"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0 and "attribute" in done.stdout
    text = build_parser()._subparsers._group_actions[0].choices["attribute"].format_help()
    for option in ("--target", "--contrast", "--mask", "--position", "--layer", "--head", "--deletion", "--json"):
        assert option in text
    assert "counted from 1" in text


BAD = {
    "no mask": (["the cat sat on the mat ."], r"no \[MASK\]"),
    "empty text": ([""], "empty"),
    "spaces only": (["   "], "empty"),
    "target not a token": (["--target", "xyzzyq", TEXT], "not a single token"),
    "contrast not a token": (["--contrast", "xyzzyq", TEXT], "not a single token"),
    "contrast is the target": (["--target", "mat", "--contrast", "mat", TEXT], "the target itself"),
    "mask 0": (["--mask", "0", TEXT], "from 1"),
    "mask past the last": (["--mask", "2", TEXT], r"no \[MASK\] #2: the text has 1"),
    "layer too high": (["--layer", "4", TEXT], "layer 4 does not exist"),
    "layer too low": (["--layer", "-5", TEXT], "layer -5 does not exist"),
    "head too high": (["--head", "4", TEXT], "head 4 does not exist"),
    "negative head": (["--head", "-1", TEXT], "head -1 does not exist"),
    "position on a word-guessing model": (["--position", "2", TEXT], "--position is for ELECTRA"),
    "bad top-k": (["--top-k", "0", TEXT], "top-k"),
    "too long": (["the [MASK] " + "cat " * 80], "at most 64"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_mistake_is_one_line_and_exit_2(capsys, case):
    args, message = BAD[case]
    assert main(["attribute", "--checkpoint", str(SHIPPED), "--device", "cpu", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert re.search(message, captured.err)


def test_mistakes_from_a_real_process_have_no_traceback(tmp_path):
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    for args, message in ((["--checkpoint", tmp_path / "nowhere", TEXT], "no model folder"),
                          (["--checkpoint", SHIPPED, "--target", "xyzzyq", TEXT], "not a single token")):
        done = subprocess.run([sys.executable, "-m", "bertviz_lab", "attribute", *map(str, args)],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and message in done.stderr


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    for name in ("roberta", "electra"):
        build(name, folder / name)
    return folder


def test_roberta_explains_its_mask_and_a_contrast(family, capsys):
    folder = family / "roberta"
    assert main(["attribute", "--checkpoint", str(folder), "--device", "cpu", "--json", "--target", "the",
                 "--contrast", "on", "the cat sat on the <mask> ."]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["tokens"][got["mask_position"]] == "<mask>" and (got["target"], got["contrast"]) == ("Ġthe", "Ġon")
    logits = logits_at(load_checkpoint(folder), "the cat sat on the <mask> .")
    assert got["score"] == pytest.approx(logits["Ġthe"] - logits["Ġon"], rel=1e-4, abs=1e-5)
    assert all(len(v) == len(got["tokens"]) for v in got["methods"].values())


def test_an_electra_discriminator_explains_its_replaced_token_logit_at_a_position(family, capsys):
    folder = str(family / "electra")
    assert main(["attribute", "--checkpoint", folder, "--device", "cpu", "--json", "--position", "3",
                 "the cat sat on the mat ."]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["mask_position"] == 3 and got["target"] is None and got["contrast"] is None
    assert 0 < got["probability"] < 1 and got["methods"]["occlusion"][3] == 0
    assert main(["attribute", "--checkpoint", folder, "--device", "cpu", "--position", "3",
                 "the cat sat on the mat ."]) == 0
    assert "F = the replaced-token logit at token 3 (sat)" in capsys.readouterr().out
    for args, message in ((["--target", "mat"], "--target is for models that guess words"),
                          (["--position", "0"], "token 0 is not a word")):
        assert main(["attribute", "--checkpoint", folder, "--device", "cpu", *args, "the cat sat on the mat ."]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and message in err


def test_deletion_reports_progress_on_stderr_and_keeps_stdout_json(capsys, monkeypatch):
    """Issue 52: a run past a few seconds says how far it got on stderr, a pipe included (no terminal here), and
    stdout stays one JSON document."""
    from bertviz_lab.cli import explain

    monkeypatch.setattr(explain.Bar, "QUIET_S", 0.0)  # every report is past the quiet start: all are said
    assert main(["attribute", "--checkpoint", str(SHIPPED), "--device", "cpu", "--json", "--deletion", TEXT]) == 0
    out, err = capsys.readouterr()
    assert "deletion" in json.loads(out)
    lines = err.strip().splitlines()
    assert any("deletion curves" in line for line in lines) and any("attention flow" in line for line in lines)
    assert all(re.fullmatch(r"attribute: [a-z -]+ \d+% \(\d+ s\)", line) for line in lines), lines
