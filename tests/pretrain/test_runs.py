"""Runs as background processes: the CLI `train` command, stop and resume, torchrun, names, crashes."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers

from bertviz_lab.bert.checkpoint import load_checkpoint
from bertviz_lab.errors import ConfigError
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import runs, threads
from bertviz_lab.pretrain.config import TrainConfig
from tests.helpers.paths import ROOT
from tests.helpers.runs import torchrun, wait

TIMING = ("tokens_per_s", "elapsed")
SMALL = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=40, lr=5e-3,
             warmup=3, eval_every=10, eval_batches=2, checkpoint_every=10, device="cpu", threads=1)


def comparable(run_dir):
    return [{k: v for k, v in r.items() if k not in TIMING}
            for r in runs.read_metrics(run_dir) if r["kind"] in (TRAIN, EVAL)]


def test_background_run_finishes_and_its_checkpoint_loads_in_transformers(tmp_path):
    info = runs.start(TrainConfig(**SMALL), "first", root=tmp_path)
    assert info.path == tmp_path / "first" and info.status in runs.ACTIVE
    done = wait(info.path)
    assert done.status == "finished" and done.step == 40, done.message
    metrics = runs.read_metrics(info.path, kind=TRAIN)
    assert [m["step"] for m in metrics] == list(range(1, 41))
    ckpt = load_checkpoint(done.checkpoint)
    assert ckpt.card["steps"] == 40 and ckpt.card["corpus"].startswith("built-in")
    hf = transformers.BertForPreTraining.from_pretrained(done.checkpoint, attn_implementation="eager").eval()
    enc = ckpt.tokenizer.encode("the cat sat on the [MASK] .", "it was tired .")
    ids, seg = torch.tensor([enc.ids]), torch.tensor([enc.segment_ids])
    with torch.no_grad():
        ours, theirs = ckpt.model(ids, seg), hf(input_ids=ids, token_type_ids=seg)
    torch.testing.assert_close(ours.mlm_logits, theirs.prediction_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.nsp_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=0)
    assert [r.name for r in runs.list_runs(tmp_path)] == ["first"]


def test_sigterm_then_resume_gives_the_same_metrics_as_a_straight_run(tmp_path):
    cfg = TrainConfig(**SMALL)
    straight = runs.start(cfg, "straight", root=tmp_path)
    broken = runs.start(cfg, "broken", root=tmp_path)  # two runs at once do not collide
    wait(broken.path, until=lambda i: i.step >= 15)
    assert runs.stop(broken.path, timeout=60)
    stopped = wait(broken.path)
    assert stopped.status == "stopped" and 15 <= stopped.step < 40, stopped.message
    assert json.loads((broken.path / "checkpoint.json").read_text())["step"] == stopped.step
    runs.resume(broken.path)
    assert wait(broken.path).status == "finished"
    assert wait(straight.path).status == "finished"
    assert comparable(broken.path) == comparable(straight.path)


def test_cli_rejects_invalid_hyperparameters_before_starting(tmp_path):
    for flags, field in [(["--steps", "0"], "steps"), (["--lr", "-1"], "lr"), (["--batch-size", "0"], "batch_size"),
                         (["--mask-rate", "1.5"], "mask_rate"), (["--hidden", "100", "--heads", "3"], "heads")]:
        done = subprocess.run([sys.executable, "-m", "bertviz_lab", "train", "--run-dir", str(tmp_path / "x"),
                               *flags], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 2 and field in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "x").exists()


def test_run_json_records_random_tokens_and_an_old_run_json_resumes_as_wordpieces(tmp_path):
    """A run.json from before the setting has no random_tokens: it resumes the way it trained, "wordpieces"."""
    flags = ["--preset", "tiny", "--hidden", "32", "--heads", "2", "--layers", "2", "--batch-size", "8",
             "--seq-len", "32", "--steps", "4", "--eval-every", "2", "--eval-batches", "1", "--checkpoint-every", "2",
             "--device", "cpu", "--threads", "1"]
    train = lambda *args: subprocess.run([sys.executable, "-m", "bertviz_lab", "train", *args],  # noqa: E731
                                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    done = train("--run-dir", str(tmp_path / "new"), *flags, "--random-tokens", "wordpieces")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "new" / "run.json").read_text())["config"]["random_tokens"] == "wordpieces"

    old = tmp_path / "old"  # the same run as an old version wrote it, stopped at step 2
    shutil.copytree(tmp_path / "new", old)
    run = json.loads((old / "run.json").read_text())
    del run["config"]["random_tokens"]
    (old / "run.json").write_text(json.dumps(run))
    (old / "checkpoint.json").write_text(json.dumps({"step": 2, "path": "checkpoints/step-000002"}))
    done = train("--run-dir", str(old), "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    assert runs.read(old).status == "finished"
    assert comparable(old) == comparable(tmp_path / "new")  # steps 3 and 4 again, with word pieces
    # A resume keeps the history of checkpoints up to where it starts again: 0, 1 and 2 (the 1-2-5 series and
    # every 2nd step), then 4 anew.
    assert [r["step"] for r in runs.read_metrics(old, kind="checkpoint")] == [0, 1, 2, 4]

    again = train("--run-dir", str(tmp_path / "new"), *flags)  # a new run into a used folder would mix two runs
    assert again.returncode == 2 and again.stderr == (f"error: {tmp_path / 'new'} already holds a run; resume it "
                                                      "with --resume, or pick a new folder\n")
    assert comparable(tmp_path / "new") == comparable(old)  # its records are as they were

    bad = train("--run-dir", str(tmp_path / "x"), *flags, "--random-tokens", "special")
    assert bad.returncode == 2 and "--random-tokens: invalid choice" in bad.stderr


def test_corpus_problems_are_refused_before_starting(tmp_path):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café au lait. " .encode("latin-1") * 100)
    with pytest.raises(Exception, match="UTF-8"):
        runs.start(TrainConfig(**{**SMALL, "corpus": str(latin1)}), root=tmp_path / "runs")
    with pytest.raises(Exception, match="not found"):
        runs.start(TrainConfig(**{**SMALL, "corpus": str(tmp_path / "missing.txt")}), root=tmp_path / "runs")
    assert not list((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else True


def test_run_names_are_sanitized_and_unique(tmp_path):
    assert runs.sanitize_name("../../etc/passwd") == "etc-passwd"
    assert runs.sanitize_name("my run: NSP off") == "my-run-NSP-off"
    with pytest.raises(ConfigError):
        runs.sanitize_name("../..")
    info = runs.start(TrainConfig(**{**SMALL, "steps": 2}), "../escape", root=tmp_path / "runs")
    assert info.path.parent == tmp_path / "runs"
    with pytest.raises(ConfigError, match="already exists"):
        runs.start(TrainConfig(**SMALL), "escape", root=tmp_path / "runs")
    wait(info.path)


def test_a_killed_run_reads_as_failed_and_keeps_its_checkpoint(tmp_path):
    info = runs.start(TrainConfig(**{**SMALL, "steps": 400}), "crash", root=tmp_path)
    wait(info.path, until=lambda i: i.checkpoint is not None and i.step >= 12)
    os.kill(runs.read(info.path).pid, signal.SIGKILL)
    dead = wait(info.path)
    assert dead.status == "failed" and "without reporting" in dead.message
    assert load_checkpoint(dead.checkpoint).card["steps"] >= 10


def test_text_file_corpus_trains(tmp_path):
    text = "\n\n".join(" ".join(f"the {a} saw the {b} near the river bank today." for b in ("dog", "cat", "bird"))
                       for a in ("boy", "girl", "man", "woman", "child", "farmer", "teacher", "doctor"))
    (tmp_path / "mine.txt").write_text(text * 3, encoding="utf-8")
    info = runs.start(TrainConfig(**{**SMALL, "steps": 5, "corpus": str(tmp_path / "mine.txt"), "vocab_size": 200}),
                      "mine", root=tmp_path / "runs")
    done = wait(info.path)
    assert done.status == "finished", done.message
    assert load_checkpoint(done.checkpoint).card["corpus"].startswith("mine.txt")


def test_torchrun_two_processes_on_cpu(tmp_path):
    """Two ranks train with DDP, and each one's process group is gone, its threads joined, before the interpreter
    shuts down: a gloo thread still there can abort the rank (SIGABRT) on a busy machine (pretrain/distributed.py)."""
    run_dir = tmp_path / "ddp"
    status, outputs = torchrun(tmp_path, "train", "--run-dir", str(run_dir), "--preset", "tiny", "--hidden", "32",
                               "--heads", "2", "--layers", "2", "--batch-size", "4", "--seq-len", "32", "--steps", "6",
                               "--eval-every", "3", "--eval-batches", "1", "--device", "cpu", "--threads", "1")
    everything = "\n".join(f"----- {name} -----\n{text}" for name, text in outputs.items())
    if status != 0:
        pytest.fail(f"torchrun exited with {status}\n{everything}", pytrace=False)
    if Path("/proc/self/task").is_dir():
        left = [outputs.get(f"rank {rank} stdout", "").splitlines()[-1:] for rank in (0, 1)]
        if left != [["gloo threads left: 0"]] * 2:
            pytest.fail(f"a rank exited with the process group's threads still running: {left}\n{everything}",
                        pytrace=False)
    info = runs.read(run_dir)
    assert info.status == "finished" and info.step == 6
    assert len(runs.read_metrics(run_dir, kind=TRAIN)) == 6  # rank 0 alone writes
    assert load_checkpoint(info.checkpoint).card["steps"] == 6


def test_publish_evaluates_and_writes_a_model_card(tmp_path):
    info = runs.start(TrainConfig(**{**SMALL, "steps": 6}), "pub", root=tmp_path / "runs")
    finished = wait(info.path)
    assert finished.status == "finished"
    # the run trained on the tests' one thread (conftest.py); publishing on every core must not change its card
    everything = {**os.environ, "BERTVIZ_THREADS": str(len(threads.cores()))}
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "publish", "--run-dir", str(info.path),
                           "--to", str(tmp_path / "shipped"), "--eval-batches", "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=everything)
    assert done.returncode == 0, done.stderr
    card = load_checkpoint(tmp_path / "shipped").card
    assert card["cpu_threads"] == "1 thread" == load_checkpoint(finished.checkpoint).card["cpu_threads"]
    assert card["autocast"] == load_checkpoint(finished.checkpoint).card["autocast"] in ("bf16", "off")
    held = card["held_out"]
    assert held["pairs"] == 24 and 0 <= held["mlm_top1"] <= held["mlm_top5"] <= 1 and 0 <= held["nsp_acc"] <= 1
    assert card["steps"] == 6 and "threads" in card["hardware"] and "train" in card["command"]
    assert not (tmp_path / "shipped" / "trainer_state.pt").exists()


@pytest.mark.parametrize("precision, autocast", [("fp32", "off"), ("bf16", "bf16")])
def test_finished_status_and_the_card_remember_the_device_and_the_autocast(tmp_path, precision, autocast):
    info = runs.start(TrainConfig(**{**SMALL, "steps": 2, "precision": precision}), "dev", root=tmp_path)
    done = wait(info.path)
    assert done.status == "finished"
    status = json.loads((info.path / "status.json").read_text())
    assert (status["device"], status["autocast"]) == ("cpu", autocast) == (done.device, done.autocast)
    assert load_checkpoint(done.checkpoint).card["autocast"] == autocast


def test_a_cuda_run_under_torchrun_opens_its_group_on_a_machine_without_cuda(monkeypatch):
    """session("cuda") reads torch.cuda before it opens the group (it once raised UnboundLocalError there:
    a local `import torch._dynamo` made `torch` a local name); without CUDA it falls back to gloo."""
    import torch.distributed as dist

    from bertviz_lab.pretrain import distributed

    opened, closed = [], []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, device_id=None: opened.append(backend))
    monkeypatch.setattr(dist, "destroy_process_group", lambda: closed.append(True))
    monkeypatch.setattr(distributed.torch.cuda, "is_available", lambda: False)
    with distributed.session("cuda"):
        assert opened == ["gloo"]
    assert closed == [True]
