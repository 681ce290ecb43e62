"""The command line: answers on good input; one line on stderr and exit 2 on every bad one."""

import json
import re
import subprocess
import sys

import pytest

from bertviz_lab.cli import main
from tests.helpers.cli import corrupt, run_broken, run_cli
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT


def test_predict_lists_top_k_per_mask(tiny_checkpoint):
    done = run_cli("predict", "--checkpoint", tiny_checkpoint, "--top-k", 3, "the cat sat on the [MASK] .")
    assert done.returncode == 0, done.stderr
    assert "[MASK] #1 at token 6" in done.stdout and done.stdout.count("\n  ") == 3
    assert done.stdout.strip().splitlines()[-1].startswith("filled: the cat sat on the ")


def test_predict_json_has_one_entry_per_mask(tiny_checkpoint, capsys):
    assert main(["predict", "--checkpoint", str(tiny_checkpoint), "--device", "cpu", "--json", "--top-k", "4",
                 "[MASK] cat sat on the [MASK] .", "it was tired"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [m["position"] for m in result["masks"]] == [1, 6]
    for mask in result["masks"]:
        probs = [c["prob"] for c in mask["candidates"]]
        assert len(probs) == 4 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    assert result["tokens"][-4:] == ["it", "was", "tired", "[SEP]"]


def test_info_prints_the_model_card(tiny_checkpoint, capsys):
    assert main(["info", "--checkpoint", str(tiny_checkpoint), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["layers"] == 2 and card["heads"] == 4 and card["hidden_size"] == 32
    assert card["architecture"] == "BertForPreTraining" and card["training"]["steps"] == 0
    assert main(["info", "--checkpoint", str(tiny_checkpoint)]) == 0
    assert "parameters" in capsys.readouterr().out


def mismatch(path):
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 65}))


BAD = {
    "empty text": (None, [""], "empty"),
    "spaces only": (None, ["   "], "empty"),
    "no mask": (None, ["the cat sat on the mat ."], "no \\[MASK\\]"),
    "too long": (None, ["the [MASK] " + "cat " * 80], "at most 64"),
    "bad top-k": (None, ["--top-k", "0", "the [MASK] ."], "top-k"),
    "missing folder": ("rm", ["the [MASK] ."], "no model folder"),
    "corrupt weights": (corrupt, ["the [MASK] ."], "model.safetensors is .*corrupt"),
    "mismatched weights": (mismatch, ["the [MASK] ."], "do not match config.json"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_and_exit_2(tiny_checkpoint, tmp_path, capsys, case):
    breaker, args, message = BAD[case]
    err = run_broken(tiny_checkpoint, tmp_path, capsys, breaker, "predict", args).err
    assert re.search(message, err)


def test_bad_input_from_a_real_process_has_no_traceback(tiny_checkpoint):
    corrupt(tiny_checkpoint)
    for args in (["predict", "--checkpoint", tiny_checkpoint, "the [MASK] ."],
                 ["info", "--checkpoint", tiny_checkpoint]):
        done = run_cli(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.startswith("error: model.safetensors is ") and "corrupt" in done.stderr


def test_train_takes_random_tokens_and_building_the_parser_needs_no_torch():
    from bertviz_lab.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["train", "--run-dir", "x"]).random_tokens == "vocabulary"  # as BERT
    assert parse(["train", "--run-dir", "x", "--random-tokens", "wordpieces"]).random_tokens == "wordpieces"
    script = "import sys; from bertviz_lab.cli import build_parser; build_parser(); sys.exit('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, "building the parser imported torch: --help would no longer be instant"


def test_runs_command_answers_in_one_line_for_every_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    assert main(["runs", "list"]) == 0 and capsys.readouterr().out == f"no runs in {tmp_path}\n"
    assert main(["runs", "list", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []
    done = tmp_path / "done"
    done.mkdir()
    (done / "status.json").write_text(json.dumps({"status": "finished", "step": 4, "total_steps": 4,
                                                  "message": "all \x1b[31mred\x1b[0m\nand two lines"}))
    assert main(["runs", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 and table[1].split()[:4] == ["done", "finished", "4", "/"] and "\x1b" not in table[1]
    assert table[1].endswith("all [31mred [0m and two lines")  # no terminal codes, one line
    (listed,) = (main(["runs", "list", "--json"]), json.loads(capsys.readouterr().out))[1]
    assert (listed["name"], listed["status"], listed["step"], listed["started_by"]) == ("done", "finished", 4, "owner")
    for args, message in [(["stop", "done"], "run 'done' is not training (finished)"),
                          (["resume", "done"], "run 'done' has finished all its steps; start a new run to train longer"),
                          (["stop", "../done"], f"no run named '../done' in {tmp_path}"),
                          (["delete", "nope"], f"no run named 'nope' in {tmp_path}")]:
        assert main(["runs", *args]) == 2
        assert capsys.readouterr().err == f"error: {message}\n"
    assert main(["runs", "delete", "done"]) == 0 and not done.exists()


def test_a_reader_that_stops_early_gets_no_traceback(tiny_checkpoint):
    """`lens ... | head -1`: the pipe closes after one line of ~100 KB of output; the command stops quietly."""
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    text = " ".join(["the [MASK]"] * 30)  # 30 masks x 3 layers x 100 candidates: more than a pipe holds
    script = f"{sys.executable} -m bertviz_lab lens --top-k 100 --checkpoint {tiny_checkpoint} '{text}' | head -1"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.startswith("[MASK] #1") and len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
