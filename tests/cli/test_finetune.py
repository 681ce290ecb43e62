"""`finetune` and `classify`: short real runs whose checkpoints transformers reads with the same logits,
flags that round-trip FinetuneConfig.cli_args (what the app launches), one line and exit 2 on every
bad input, resume of a finished run, and `runs list` telling the two kinds of run apart."""

import json
import re
import signal
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint, save_checkpoint
from bertviz_lab.bert.classifier import SEQUENCE, TOKEN, BertClassifier
from bertviz_lab.bert.config import BertConfig
from bertviz_lab.bert.model import BertForPreTraining
from bertviz_lab.cli import build_parser, main
from bertviz_lab.cli.finetune import config_of
from bertviz_lab.files import SHIPPED
from bertviz_lab.finetune.config import FinetuneConfig
from bertviz_lab.finetune.loop import builtin_tokenizer
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import runs
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

SHORT = ["--steps", "4", "--eval-every", "2", "--checkpoint-every", "2", "--batch-size", "8", "--eval-examples", "16",
         "--threads", "1", "--device", "cpu"]


def run_cli(*args):
    env = no_gpu_env(PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bertviz_lab", *map(str, args)], check=False, capture_output=True,
                          text=True, env=env, timeout=300)


def in_process(argv) -> int:
    """main(argv) for a command that trains: the signal handlers and torch threads it sets are put back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    threads = torch.get_num_threads()
    try:
        return main([str(a) for a in argv])
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny random "pretrained" BERT that reads the built-in tasks' vocabulary (64 positions)."""
    tokenizer = builtin_tokenizer()
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
    return save_checkpoint(model.eval(), tokenizer, tmp_path_factory.mktemp("base") / "tiny")


@pytest.fixture(scope="module")
def finished(base, tmp_path_factory):
    """Three finished runs under one runs folder: a sentence task from the checkpoint (a real process, as the
    app starts it), a tagging task from it and a pair task from scratch (in this process, for speed)."""
    root = tmp_path_factory.mktemp("runs")
    done = run_cli("finetune", "--run-dir", root / "acceptability", "--task", "acceptability", "--from", base,
                   *SHORT, "--lr", "0.001")
    assert done.returncode == 0, done.stderr[-3000:]
    assert in_process(["finetune", "--run-dir", root / "entities", "--task", "entities", "--from", base, *SHORT,
                       "--lr", "0.01"]) == 0
    assert in_process(["finetune", "--run-dir", root / "coherence", "--task", "coherence", "--from-scratch", "tiny",
                       "--layers", "1", "--hidden", "32", "--heads", "2", *SHORT]) == 0
    return root


def last_checkpoint(run_dir: Path) -> Path:
    return run_dir / json.loads((run_dir / "checkpoint.json").read_text())["path"]


def cli_json(capsys, *args):
    capsys.readouterr()
    assert main([*map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def hf_logits(folder: Path, level: str, text: str, text_b: str | None = None) -> torch.Tensor:
    """transformers' logits for the folder, on the ids our tokenizer gives."""
    hf_class = transformers.BertForSequenceClassification if level == SEQUENCE else \
        transformers.BertForTokenClassification
    hf, info = hf_class.from_pretrained(folder, output_loading_info=True, attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"]
    encoding = load_checkpoint(folder).tokenizer.encode(text, text_b)
    with torch.no_grad():
        return hf.eval()(input_ids=torch.tensor([encoding.ids]),
                         token_type_ids=torch.tensor([encoding.segment_ids])).logits[0]


# --- Real runs --------------------------------------------------------------------------------------
@pytest.mark.parametrize("task, level, labels", [("acceptability", SEQUENCE, ["ok", "broken"]),
                                                  ("entities", TOKEN, ["O", "PERSON", "ANIMAL", "FOOD", "PLACE",
                                                                       "TIME", "ORG"]),
                                                  ("coherence", SEQUENCE, ["follows", "unrelated"])])
def test_a_short_run_finishes_with_metrics_and_a_classifier_checkpoint(finished, task, level, labels):
    run_dir = finished / task
    info = runs.read(run_dir)
    assert (info.status, info.step, info.total_steps, info.kind) == ("finished", 4, 4, "finetune"), info.message
    metrics = runs.read_metrics(run_dir)
    assert [r["step"] for r in metrics if r["kind"] == TRAIN] == [1, 2, 3, 4]
    assert [r["step"] for r in metrics if r["kind"] == EVAL] == [0, 2, 4]
    assert all(0 <= r["acc"] <= 1 and r["loss"] > 0 for r in metrics if r["kind"] == EVAL)
    assert json.loads((run_dir / "run.json").read_text())["command"][0] == "finetune"
    ckpt = load_checkpoint(last_checkpoint(run_dir))
    assert isinstance(ckpt.model, BertClassifier) and ckpt.model.level == level and list(ckpt.model.labels) == labels
    assert ckpt.card["steps"] == 4 and ckpt.card["fine_tuned_on"] == task
    assert ckpt.config.num_hidden_layers == (1 if task == "coherence" else 2)


def test_classify_json_of_a_sentence_task_matches_transformers(finished, capsys):
    folder, text = last_checkpoint(finished / "acceptability"), "laura tasted some popcorn ."
    out = cli_json(capsys, "classify", "--checkpoint", folder, "--device", "cpu", text)
    assert set(out) == {"labels", "predicted", "probs", "logits"} and out["labels"] == ["ok", "broken"]
    expected = hf_logits(folder, SEQUENCE, text)
    torch.testing.assert_close(torch.tensor(out["logits"]), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.tensor(out["probs"]), expected.softmax(-1), atol=1e-5, rtol=0)
    assert out["predicted"] == out["labels"][int(expected.argmax())]


def test_classify_json_of_a_tagging_task_has_a_row_per_token_matching_transformers(finished, capsys):
    folder, text = last_checkpoint(finished / "entities"), "laura fed the cats in paris ."
    out = cli_json(capsys, "classify", "--checkpoint", folder, "--device", "cpu", text)
    tokens = load_checkpoint(folder).tokenizer.encode(text).tokens
    assert [row["token"] for row in out["tokens"]] == tokens[1:-1]  # every token but [CLS] and [SEP]
    expected = hf_logits(folder, TOKEN, text)[1:-1]
    torch.testing.assert_close(torch.tensor([row["logits"] for row in out["tokens"]]), expected, atol=1e-5, rtol=0)
    assert [row["predicted"] for row in out["tokens"]] == [out["labels"][i] for i in expected.argmax(-1)]
    assert all(abs(sum(row["probs"]) - 1) < 1e-5 and len(row["probs"]) == 7 for row in out["tokens"])


def test_classify_reads_a_pair_with_its_segments(finished, capsys):
    folder, a, b = last_checkpoint(finished / "coherence"), "the dog sat on the rug .", "it was tired ."
    pair = cli_json(capsys, "classify", "--checkpoint", folder, "--device", "cpu", a, b)
    torch.testing.assert_close(torch.tensor(pair["logits"]), hf_logits(folder, SEQUENCE, a, b), atol=1e-5, rtol=0)
    alone = cli_json(capsys, "classify", "--checkpoint", folder, "--device", "cpu", a)
    assert pair["logits"] != alone["logits"]  # sentence B counts
    assert cli_json(capsys, "classify", "--checkpoint", folder, "--device", "cpu", a, " ") == alone  # a blank B is no B


def test_classify_prints_a_table_of_labels_or_a_line_per_token(finished, capsys):
    capsys.readouterr()
    assert main(["classify", "--checkpoint", str(last_checkpoint(finished / "acceptability")), "--device", "cpu",
                 "the cat sat ."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["label", "prob"] and [line.split()[0] for line in lines[1:3]] == ["ok", "broken"]
    probs = [float(line.split()[1]) for line in lines[1:3]]
    assert abs(sum(probs) - 1) < 1e-3 and lines[3] == f"predicted: {['ok', 'broken'][probs.index(max(probs))]}"
    assert main(["classify", "--checkpoint", str(last_checkpoint(finished / "entities")), "--device", "cpu",
                 "laura fed the cats ."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["token", "tag", "prob"] and [line.split()[0] for line in lines[1:]] == \
        ["laura", "fed", "the", "cats", "."]


def test_runs_list_shows_each_runs_kind(finished, monkeypatch, capsys):
    pretraining = finished / "pretraining"
    pretraining.mkdir(exist_ok=True)
    (pretraining / "status.json").write_text(json.dumps({"status": "stopped", "step": 2, "total_steps": 9}))
    monkeypatch.setenv("BERTVIZ_RUNS", str(finished))
    listed = {row["name"]: row["kind"] for row in cli_json(capsys, "runs", "list")}
    assert listed == {"acceptability": "finetune", "entities": "finetune", "coherence": "finetune",
                      "pretraining": "pretrain"}
    assert main(["runs", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["run", "status", "steps", "kind"]
    assert {line.split()[0]: line.split()[5] for line in table[1:]} == listed


def test_resuming_a_finished_run_changes_nothing_as_for_pretraining(finished, monkeypatch, capsys):
    """`train --resume` of a finished run has no steps left: it exits 0 and leaves the run as it was (the same
    curves and checkpoints); the app's `runs resume` refuses it. `finetune` does the same."""
    run_dir = finished / "entities"
    files = [run_dir / "checkpoint.json", *sorted((run_dir / "checkpoints").rglob("*.safetensors"))]

    def state():
        curves = [runs.read_metrics(run_dir, kind) for kind in (TRAIN, EVAL)]
        return {p: p.read_bytes() for p in files}, curves

    before = state()
    assert in_process(["finetune", "--run-dir", run_dir, "--resume"]) == 0
    assert state() == before
    assert runs.read(run_dir).status == "finished" and runs.read(run_dir).step == 4
    monkeypatch.setenv("BERTVIZ_RUNS", str(finished))
    capsys.readouterr()
    assert main(["runs", "resume", "entities"]) == 2
    assert capsys.readouterr().err == ("error: run 'entities' has finished all its steps; start a new run to train "
                                       "longer\n")


# --- The flags are FinetuneConfig's -----------------------------------------------------------------
EVERYTHING = FinetuneConfig(data="my tasks/data.csv", scratch="mini", layers=3, heads=4, hidden=64,
                            freeze_encoder=True, steps=77, batch_size=5, seq_len=48, lr=3e-5, warmup=0,
                            weight_decay=0.0, eval_every=7, eval_examples=33, checkpoint_every=11, seed=12345,
                            device="cpu", threads=1)


@pytest.mark.parametrize("cfg", [FinetuneConfig(task="coherence", checkpoint=str(SHIPPED / "bertviz-mini")),
                                 FinetuneConfig(task="entities", scratch="tiny", lr=0.002), EVERYTHING])
def test_the_flags_round_trip_the_config_the_app_launches(cfg):
    args = build_parser().parse_args(["finetune", "--run-dir", "runs/x", *cfg.cli_args()])
    assert config_of(args) == cfg and not args.resume and args.run_dir == "runs/x"


def test_a_relative_path_is_recorded_whole_so_the_run_resumes_from_any_folder(tmp_path, monkeypatch):
    (tmp_path / "my.csv").write_text("text,label\n")
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["finetune", "--run-dir", "r", "--data", "my.csv", "--from", "bertviz-mini"])
    cfg = config_of(args)
    assert cfg.data == str(tmp_path / "my.csv") and cfg.checkpoint == str(SHIPPED / "bertviz-mini")  # a shipped model by name
    args = build_parser().parse_args(["finetune", "--run-dir", "r", "--task", "coherence", "--from", "bert-base-x"])
    assert config_of(args).checkpoint == "bert-base-x"  # names nothing here: a Hub id, as typed


def test_every_setting_has_a_flag():
    changed = {f.name for f in fields(FinetuneConfig) if getattr(EVERYTHING, f.name) != f.default}
    assert changed == {f.name for f in fields(FinetuneConfig)} - {"task", "checkpoint"}
    assert len(EVERYTHING.cli_args()) == 2 * len(changed) - 1  # a value after each flag but --freeze-encoder


# --- One line and exit 2 on every mistake -----------------------------------------------------------
CSV = {
    "missing label": ("text,label\n" + "a cat sat,ok\nthe dog ran,broken\n" * 10 + "a bird flew,\n",
                      r"row 22: the label column is empty"),
    "one class": ("text,label\n" + "a cat sat,ok\n" * 20,
                  r"every training row has the label 'ok': a classifier needs at least two classes"),
    "unknown dev label": ("text,label,split\n" + "a cat sat,ok,train\nthe dog ran,broken,train\n" * 5
                          + "a bird,ok,dev\na fish,maybe,dev\n",
                          r"the dev rows use the label 'maybe', which no training row has"),
    "empty": ("", r"data.csv is empty"),
    "no header": ("a cat sat,ok\n" * 20, r"data.csv needs a header row naming its columns: text,label"),
    "tags per word": ("tokens,tags\nlaura fed the cat,PERSON O O ANIMAL\nthe dog ran,O ANIMAL\n",
                      r"row 3: 3 words but 2 tags; give one tag per word"),
}


def fails(capsys, *args) -> str:
    """Run the command in process; it must exit 2 with one `error:` line, which is returned."""
    capsys.readouterr()
    assert main([str(a) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("case", list(CSV))
def test_a_bad_csv_is_one_line_naming_the_problem(tmp_path, capsys, case):
    text, message = CSV[case]
    (tmp_path / "data.csv").write_text(text)
    err = fails(capsys, "finetune", "--run-dir", tmp_path / "run", "--data", tmp_path / "data.csv",
                "--from-scratch", "tiny")
    assert re.search(message, err), err
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


def test_a_csv_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    with open(tmp_path / "big.csv", "wb") as f:
        f.truncate(100 << 20)  # 100 MB of nothing: sparse, so the test writes no data
    err = fails(capsys, "finetune", "--run-dir", tmp_path / "run", "--data", tmp_path / "big.csv",
                "--from-scratch", "tiny")
    assert re.fullmatch(r"error: CSV file big.csv is 104.9 MB; the limit is \d+ MB\n", err), err


def test_bad_settings_are_one_line(base, tmp_path, capsys):
    run = ["finetune", "--run-dir", tmp_path / "run"]
    for flags, message in [
        (["--task", "acceptability"],
         "start either from a pretrained checkpoint or from scratch (a random model), not neither"),
        (["--from", base], "give either a built-in task or a CSV file of your own (data), not neither"),
        (["--task", "sentiment", "--from", base], "task must be one of"),
        (["--task", "acceptability", "--from", base, "--steps", "0"], "steps"),
        (["--task", "acceptability", "--from", base, "--lr", "nan"], "lr must be a finite number in (0, 1]"),
        (["--task", "acceptability", "--from", base, "--layers", "3"],
         "layers, heads and hidden shape a model from scratch; a checkpoint has its own"),
        (["--task", "acceptability", "--from", tmp_path / "nowhere"], f"no model folder at {tmp_path / 'nowhere'}"),
        (["--task", "acceptability", "--from", base, "--seq-len", "128"],
         "seq_len (128) is longer than the model's 64 positions; lower it"),
        (["--task", "acceptability", "--from-scratch", "huge"], "scratch must be one of"),
        *([(["--task", "acceptability", "--from", base, "--device", "cuda"], "no CUDA GPU is available")]
          if not torch.cuda.is_available() else []),
    ]:
        err = fails(capsys, *run, *flags)
        assert message in err, (flags, err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flags, message", [
    (["--task", "acceptability", "--data", "x.csv", "--from-scratch", "tiny"],
     "argument --data: not allowed with argument --task"),
    (["--task", "acceptability", "--from", "x", "--from-scratch", "tiny"],
     "argument --from-scratch: not allowed with argument --from"),
    (["--task", "acceptability", "--from-scratch", "tiny", "--steps", "many"],
     "argument --steps: invalid int value: 'many'"),
])
def test_flags_argparse_refuses_exit_2(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exited:
        main(["finetune", "--run-dir", str(tmp_path / "run"), *flags])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_resume_needs_a_run_folder_and_no_other_settings(finished, tmp_path, capsys):
    tmp_path.joinpath("empty").mkdir()
    for folder in (tmp_path / "nowhere", tmp_path / "empty"):
        assert fails(capsys, "finetune", "--run-dir", folder, "--resume") == \
            f"error: {folder} is not a run folder that can be resumed\n"
    assert list((tmp_path / "empty").iterdir()) == []  # nothing written into a folder that is not a run
    pretraining = tmp_path / "pretraining"
    pretraining.mkdir()
    (pretraining / "run.json").write_text(json.dumps({"kind": "pretrain", "config": {}}))
    assert fails(capsys, "finetune", "--run-dir", pretraining, "--resume") == \
        f"error: {pretraining} is not a finetune run; resume it with `runs resume`\n"
    assert fails(capsys, "finetune", "--run-dir", finished / "entities", "--resume", "--steps", "8") == \
        "error: --resume continues the run with the settings it recorded; drop --steps\n"
    assert fails(capsys, "finetune", "--run-dir", finished / "entities", "--task", "entities", "--from-scratch",
                 "tiny") == (f"error: {finished / 'entities'} already holds a run; resume it with --resume, or "
                             "pick a new folder\n")


def test_classify_refuses_what_it_cannot_classify(finished, base, capsys):
    tagger, sentence = last_checkpoint(finished / "entities"), last_checkpoint(finished / "acceptability")
    for folder, texts, message in [
        (base, ["the cat sat ."], "this checkpoint is a BertForPreTraining, not a fine-tuned classifier"),
        (sentence, [""], "the text is empty"),
        (sentence, ["  \n"], "the text is empty"),
        (sentence, ["the cat sat . " * 30], "this model reads at most 64"),
        (tagger, ["the cat sat .", "it was tired ."], "this model tags the words of one sentence; give one text"),
        (base.parent / "nowhere", ["the cat sat ."], "no model folder at"),
    ]:
        assert message in fails(capsys, "classify", "--checkpoint", folder, "--device", "cpu", *texts)


def test_publish_refuses_a_fine_tuning_run(finished, capsys):
    err = fails(capsys, "publish", "--run-dir", finished / "acceptability", "--to", finished.parent / "shipped")
    assert err.startswith(f"error: {finished / 'acceptability'} is a fine-tuning run; publish ships pretrained models")
    assert not (finished.parent / "shipped").exists()


def test_mistakes_in_a_real_process_are_one_line_without_a_traceback(tmp_path):
    done = run_cli("finetune", "--run-dir", tmp_path / "run", "--task", "entities", "--from", tmp_path / "nowhere")
    assert done.returncode == 2 and done.stderr == f"error: no model folder at {tmp_path / 'nowhere'}\n"
    done = run_cli("finetune", "--run-dir", tmp_path / "run", "--task", "entities", "--data", "x.csv")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].endswith("error: argument --data: not allowed with argument --task")
    assert not (tmp_path / "run").exists()
