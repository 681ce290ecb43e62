"""`python -m bertviz_lab patch`: the JSON holds views.patching's grids to float32 rounding, the text shows the same numbers
aligned with the sentences and checks, --what and --direction pick the grids they name (a head counted from 1), and
every mistake is one line on stderr and exit 2 (issue 54, point 8)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.cli import build_parser, main
from bertviz_lab.views.patching import reading as vpa_read
from bertviz_lab.views.patching import runs as vpa
from bertviz_lab.views.patching.ask import PatchAsk
from tests.helpers.lab import no_gpu_env
from tests.helpers.patch_grids import F_ATOL, assert_same_grid
from tests.helpers.paths import ROOT

SHIPPED = ROOT / "checkpoints" / "bertviz-mini"
CLEAN = "the children in the park [MASK] happy ."
CORRUPT = "the child in the park [MASK] happy ."
PAIR = ["--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "were", "--foil", "was"]


def patch(capsys, *args) -> str:
    assert main(["patch", "--checkpoint", str(SHIPPED), "--device", "cpu", *map(str, args)]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def patching():
    ckpt = load_checkpoint(SHIPPED)
    return vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(CLEAN, CORRUPT, answer="were", foil="was"))


@pytest.fixture(scope="module")
def resid_json():
    """The default run's JSON (--what resid, --direction both), read once."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["patch", "--checkpoint", str(SHIPPED), "--device", "cpu", "--json", *PAIR]) == 0
    return json.loads(out.getvalue())


def test_json_holds_the_views_resid_grids_both_ways_and_passes_its_checks(patching, resid_json):
    got = resid_json
    assert got["tokens"] == patching.tokens and got["tokens"][got["position"]] == "[MASK]"
    assert (got["answer"], got["foil"], got["metric"]) == ("were", "was", "logit(were) - logit(was)")
    assert got["runs"]["clean"]["F"] == pytest.approx(patching.f_clean, abs=F_ATOL)
    assert got["runs"]["corrupted"]["F"] == pytest.approx(patching.f_corrupt, abs=F_ATOL)
    assert got["runs"]["clean"]["p_answer"] == pytest.approx(patching.traced.p_clean, abs=1e-5)
    assert [g["direction"] for g in got["grids"]] == ["denoise", "noise"]
    for g in got["grids"]:
        expected = vpa.grid(patching, "resid", g["direction"])
        assert g["kind"] == "resid" and g["rows"] == expected.rows and g["columns"] == patching.tokens
        seen = assert_same_grid(patching, expected, g["values"], g["F"])
        assert g["sentences"] == vpa_read.sentences(patching, seen)
        assert [c["name"] for c in g["checks"]] == [c.name for c in vpa_read.checks(patching, expected)]
        assert len(g["checks"]) == 4 and all(c["passed"] for c in g["checks"])
    assert got["limits"] == vpa_read.LIMITS and got["noised"] == [] and got["draws"] is None


def test_the_text_shows_runs_aligned_table_sentences_and_checks(patching, capsys):
    out = patch(capsys, *PAIR, "--direction", "denoise")
    grid = vpa.grid(patching, "resid", "denoise")
    assert "logit(were) - logit(was)" in out and f"clean: F = {patching.f_clean:.4f}" in out
    assert f"corrupted: F = {patching.f_corrupt:.4f}" in out and "(noising)" not in out
    lines = out.splitlines()
    header = next(line for line in lines if "6 [MASK]" in line)
    at = header.index("6 [MASK]") + len("6 [MASK]")  # columns are right-aligned under their names
    for name, row in zip(grid.rows, grid.values):
        line = next(line for line in lines if line.startswith(name + " "))
        assert line[:at].split()[-1] == f"{round(row[6], 2) + 0.0:.2f}"
        assert len(line) == len(header)
    assert out.count("PASS  ") == 4 and "FAIL" not in out
    assert "The answer moves from" in out and "What patching does not show" in out


def test_what_picks_blocks_heads_and_one_head_counted_from_1(patching, capsys):
    blocks = json.loads(patch(capsys, *PAIR, "--what", "blocks", "--direction", "noise", "--json"))
    assert [(g["kind"], g["direction"]) for g in blocks["grids"]] == [("attn", "noise"), ("mlp", "noise")]
    assert_same_grid(patching, vpa.grid(patching, "mlp", "noise"), blocks["grids"][1]["values"])
    assert all(g["checks"] == [] for g in blocks["grids"])
    heads = json.loads(patch(capsys, *PAIR, "--what", "heads", "--direction", "denoise", "--json"))["grids"][0]
    assert heads["columns"] == ["head 1", "head 2", "head 3", "head 4"] and len(heads["rows"]) == 4
    one = json.loads(patch(capsys, *PAIR, "--what", "head", "2.3", "--direction", "denoise", "--json"))["grids"][0]
    expected = vpa.grid(patching, "qkv", "denoise", head=(1, 2))
    assert one["head"] == "2.3" and one["rows"] == ["query", "key", "value"]
    assert_same_grid(patching, expected, one["values"])
    text = patch(capsys, *PAIR, "--what", "head", "2.3", "--direction", "denoise")
    assert "head 2.3: one head's query, key and value" in text and "Head 2.3:" in text


def test_noise_corrupts_the_tokens_named_and_csv_has_every_cell(capsys, tmp_path):
    path = tmp_path / "grid.csv"
    got = json.loads(patch(capsys, "--clean", CLEAN, "--noise", "--noised", "2", "--draws", "3", "--seed", "7",
                           "--answer", "were", "--foil", "was", "--direction", "denoise", "--json", "--csv", path))
    assert got["corrupt"] is None and got["noised"] == [2] and (got["draws"], got["seed"]) == (3, 7)
    ckpt = load_checkpoint(SHIPPED)
    expected = vpa.prepare(ckpt.model, ckpt.tokenizer, PatchAsk(CLEAN, answer="were", foil="was", noise=True,
                                                                noised=(2,), draws=3, seed=7))
    assert got["runs"]["corrupted"]["F"] == pytest.approx(expected.f_corrupt, abs=F_ATOL)
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    values = np.asarray(got["grids"][0]["values"])
    assert len(rows) == values.size and rows[0]["grid"] == "resid" and rows[0]["direction"] == "denoise"
    assert float(rows[-1]["score"]) == pytest.approx(values[-1, -1], abs=1e-9)


CLEAN_ARG = ["--clean", CLEAN]
BAD = {
    "different lengths": ([*CLEAN_ARG, "--corrupt", "the children in the big park [MASK] happy ."], "same length"),
    "no mask": (["--clean", "the children are happy .", "--corrupt", "the child are happy ."], r"no \[MASK\]"),
    "the same sentence twice": ([*CLEAN_ARG, "--corrupt", CLEAN], "the two sentences are the same"),
    "answer not a token": ([*CLEAN_ARG, "--corrupt", CORRUPT, "--answer", "xyzzyq"], "not a single token"),
    "head that does not exist": ([*PAIR, "--what", "head", "5.1"], "there is no head 5.1: this model has 4 layers"),
    "head counted from 0": ([*PAIR, "--what", "head", "0.1"], "counted from 1"),
    "head without L.H": ([*PAIR, "--what", "head"], "--what takes"),
    "bad what": ([*PAIR, "--what", "neurons"], "--what takes resid, blocks, heads or head L.H"),
    "bad direction": ([*PAIR, "--direction", "sideways"], "--direction takes"),
    "no corrupt without noise": ([*CLEAN_ARG, "--answer", "were"], "--corrupt"),
    "noised without noise": ([*PAIR, "--noised", "2"], "are for --noise"),
    "noise on the mask": ([*CLEAN_ARG, "--noise", "--noised", "6"], "token 6 is not a word"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_mistake_is_one_line_and_exit_2(capsys, case):
    args, message = BAD[case]
    assert main(["patch", "--checkpoint", str(SHIPPED), "--device", "cpu", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert re.search(message, captured.err), captured.err


def test_a_real_process_lists_the_command_and_fails_without_a_traceback():
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "patch", "--checkpoint", str(SHIPPED),
                           *PAIR[:2], "--corrupt", CLEAN], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    text = build_parser()._subparsers._group_actions[0].choices["patch"].format_help()
    for option in ("--clean", "--corrupt", "--answer", "--foil", "--what", "--direction", "--noise", "--noised",
                   "--draws", "--seed", "--json", "--csv", "--device"):
        assert option in text
