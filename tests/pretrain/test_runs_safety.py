"""Runs that a room of students cannot break (issue 11, item 3 and the run rules of item 4): one trainer
per run folder, signals only to a verified trainer, one process per Resume however fast the clicks,
a failed or diverged run resumes, malformed run files read as "unreadable", Stop between micro-batches,
Delete with its uploaded text, the `runs` command, and who may control which run in classroom mode."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bertviz_lab.cli import main
from bertviz_lab.errors import ConfigError
from bertviz_lab.metrics import EVAL, TRAIN
from bertviz_lab.pretrain import checkpoints, process, runs
from bertviz_lab.pretrain.config import TrainConfig
from bertviz_lab.pretrain.loop import Trainer
from bertviz_lab.ui.shell import classroom as ui_classroom
from bertviz_lab.views.pretrain import live as vp
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT
from tests.helpers.runs import wait

PAGE = str(ROOT / "pages" / "pretrain.py")
SMALL = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=4, lr=5e-3, warmup=1,
             eval_every=2, eval_batches=1, checkpoint_every=2, device="cpu", threads=1)
TIMING = ("tokens_per_s", "elapsed")


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    monkeypatch.setenv("BERTVIZ_RUNS", str(root))
    yield root
    for run in runs.list_runs(root):  # never leave a training process behind
        runs.stop(run.path, timeout=30)


@pytest.fixture
def sleeper():
    """Start unrelated live processes (`sleep 60`); all are killed at the end."""
    started = []

    def start() -> subprocess.Popen:
        started.append(subprocess.Popen(["sleep", "60"]))
        return started[-1]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def fake_run(root: Path, name: str, status: str = "stopped", started_by: str = "owner", pid: int | None = None,
             corpus: str = "builtin", **extra) -> Path:
    """A run folder as a trainer leaves it; with `pid`, that process is recorded (with its start time) as its trainer."""
    folder = root / name
    folder.mkdir()
    config = TrainConfig(**{**SMALL, "corpus": corpus}).to_dict()
    (folder / "run.json").write_text(json.dumps({"config": config, "command": [], "started_by": started_by}))
    record = {"status": status, "message": "", "step": 3, "total_steps": 4, "created": time.time(),
              "updated": time.time(), "started_by": started_by, **extra}
    if pid is not None:
        record.update(pid=pid, pid_started=psutil.Process(pid).create_time())
    (folder / "status.json").write_text(json.dumps(record))
    return folder


def train_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bertviz_lab", "train", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def comparable(run_dir) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING}
            for r in runs.read_metrics(run_dir) if r["kind"] in (TRAIN, EVAL)]


# --- One trainer per folder, and the `runs` command on a live run ------------------------------
def test_a_second_trainer_is_refused_naming_the_holder_and_the_cli_drives_the_run(runs_dir, capsys):
    info = runs.start(TrainConfig(**{**SMALL, "steps": 100_000, "checkpoint_every": 5}), "live")
    live = wait(info.path, until=lambda i: i.status == "running" and i.step >= 1)
    run_json = (info.path / "run.json").read_bytes()
    holder = rf"error: run 'live' is in use: process {live.pid} on {re.escape(socket.gethostname())} holds it " \
             r"since \d\d:\d\d:\d\d \(training, started by owner\)"
    done = train_cli("--run-dir", info.path, "--resume")  # a second trainer from the command line
    assert done.returncode == 2 and re.fullmatch(holder, done.stderr.strip()), done.stderr
    assert process.execute(info.path, TrainConfig(**SMALL), False, ["train"]) == 2  # starting over in it
    assert re.fullmatch(holder, capsys.readouterr().err.strip())
    assert (info.path / "run.json").read_bytes() == run_json  # the refused ones wrote nothing
    for action in (runs.resume, runs.delete):  # from the app
        with pytest.raises(ConfigError, match=f"in use: process {live.pid} "):
            action(info.path)

    assert main(["runs", "list"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["run", "status", "steps"] and row.split()[:2] == ["live", "running"]
    assert main(["runs", "delete", "live"]) == 2 and capsys.readouterr().err.endswith("; stop it first\n")
    assert main(["runs", "stop", "live"]) == 0 and capsys.readouterr().out == "live: stopped\n"
    stopped = runs.read(info.path)
    assert stopped.status == "stopped" and stopped.checkpoint is not None and not psutil.pid_exists(live.pid)
    assert main(["runs", "resume", "live"]) == 0 and capsys.readouterr().out == "live: starting\n"
    assert main(["runs", "stop", "live"]) == 0 and capsys.readouterr().out == "live: stopped\n"  # even while starting
    assert main(["runs", "delete", "live"]) == 0 and capsys.readouterr().out == "live: deleted\n"
    assert not info.path.exists()
    for action in ("stop", "resume", "delete"):
        assert main(["runs", action, "live"]) == 2
        assert capsys.readouterr().err == f"error: no run named 'live' in {runs_dir}\n"


# --- Signals only to a verified trainer -------------------------------------------------------
def test_a_stale_or_reused_pid_is_never_signalled(runs_dir, sleeper):
    unrelated = sleeper()
    reused = fake_run(runs_dir, "reused", "running", pid=unrelated.pid)
    record = json.loads((reused / "status.json").read_text())
    (reused / "status.json").write_text(json.dumps({**record, "pid_started": record["pid_started"] - 50}))
    old_style = fake_run(runs_dir, "old-style", "running")  # no start time: the command line must say train
    (old_style / "status.json").write_text(json.dumps({**record, "pid_started": None}))
    for folder in (reused, old_style):
        assert runs.stop(folder) is False
        info = runs.read(folder)
        assert info.status == "failed" and "without reporting" in info.message
    time.sleep(0.2)
    assert unrelated.poll() is None  # still running: no signal reached it

    zombie = subprocess.Popen(["true"])  # exits at once and is not reaped yet: a zombie
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    assert runs.read(fake_run(runs_dir, "zombie", "running", pid=zombie.pid)).status == "failed"
    zombie.wait()


# --- Resume: one process per click burst; failed and diverged runs ----------------------------
def test_two_quick_resumes_start_one_trainer_and_a_failed_run_resumes(runs_dir):
    straight = runs_dir / "straight"  # the train command, run here: 4 steps, checkpoints at 2 and 4
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        assert process.execute(straight, TrainConfig(**SMALL), False, ["train"]) == 0
    finally:
        signal.signal(signal.SIGTERM, handlers[0])
        signal.signal(signal.SIGINT, handlers[1])
    assert runs.read(straight).status == "finished"
    broken = runs_dir / "broken"  # the same run as if it had been killed after step 3 (checkpoint: step 2)
    shutil.copytree(straight, broken)
    (broken / "checkpoint.json").write_text(json.dumps({"step": 2, "path": "checkpoints/step-000002"}))
    status = json.loads((broken / "status.json").read_text())
    (broken / "status.json").write_text(json.dumps({**status, "status": "failed", "step": 3, "message": "killed"}))
    assert runs.read(broken).resumable

    answers, go = [], threading.Barrier(2)

    def click():
        go.wait()
        try:
            answers.append(runs.resume(broken).status)
        except ConfigError as exc:
            answers.append(str(exc))

    clicks = [threading.Thread(target=click) for _ in range(2)]
    for thread in clicks:
        thread.start()
    for thread in clicks:
        thread.join()
    with pytest.raises(ConfigError, match="'broken' is (already starting|already running|in use)"):
        runs.resume(broken)  # a third click a moment later
    assert answers.count("starting") == 1, answers
    assert re.search("'broken' is (already starting|in use)", next(a for a in answers if a != "starting"))
    trainers = [p for p in psutil.Process().children() if p.status() != psutil.STATUS_ZOMBIE
                and str(broken) in p.cmdline()]
    assert len(trainers) == 1
    done = wait(broken)
    assert done.status == "finished" and done.step == 4, done.message
    assert comparable(broken) == comparable(straight)  # steps 3 and 4 again, exactly

    status = json.loads((broken / "status.json").read_text())
    (broken / "status.json").write_text(json.dumps({**status, "status": "diverged"}))
    assert runs.read(broken).resumable  # from its last good checkpoint
    with pytest.raises(ConfigError, match="has finished all its steps"):
        runs.resume(straight)


# --- Malformed run files ----------------------------------------------------------------------
GOOD = {"status": "stopped", "message": "", "step": 3, "total_steps": 4, "created": 1.7e9}
MALFORMED = {
    "invalid JSON": ("status.json", b'{"status": "running", ', "status.json is not valid JSON"),
    "a list": ("status.json", b"[1, 2, 3]", "status.json holds list data, not a record"),
    "a string step": ("status.json", {**GOOD, "step": "12"}, "step should be a whole number"),
    "a huge int": ("status.json", b'{"status": "stopped", "step": ' + b"9" * 400 + b"}", "a 400-digit number"),
    "a too huge int": ("status.json", b'{"step": ' + b"9" * 5000 + b"}", "status.json is not valid JSON"),
    "a bool pid": ("status.json", {**GOOD, "status": "running", "pid": True}, "pid should be a whole number"),
    "a NaN time": ("status.json", b'{"status": "finished", "created": NaN}', "created should be a time"),
    "an unknown status": ("status.json", {**GOOD, "status": "exploded"}, "unknown status 'exploded'"),
    "deep nesting": ("status.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "5 MB": ("status.json", json.dumps({**GOOD, "message": "x" * 5_000_000}).encode(), "the limit is 4.2 MB"),
    "a FIFO": ("status.json", "fifo", "not a regular file"),
    "run.json a list": ("run.json", b"[]", "run.json holds list data"),
    "run.json config text": ("run.json", {"config": "steps=4"}, "config should be a record"),
    "run.json a FIFO": ("run.json", "fifo", "not a regular file"),
}


def plant(folder: Path, name: str, content) -> None:
    path = folder / name
    path.unlink(missing_ok=True)
    if content == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())


def test_malformed_run_files_read_as_unreadable_everywhere(runs_dir, capsys):
    fake_run(runs_dir, "good")
    for case, (name, content, _) in MALFORMED.items():
        plant(fake_run(runs_dir, case.replace(" ", "-")), name, content)
    (runs_dir / "good" / "checkpoint.json").unlink(missing_ok=True)
    os.mkfifo(runs_dir / "good" / "checkpoint.json")  # never opened: no checkpoint, no hang
    listed = {r.name: r for r in runs.list_runs()}
    assert len(listed) == len(MALFORMED) + 1 and listed["good"].status == "stopped"
    assert listed["good"].checkpoint is None
    for case, (_, _, words) in MALFORMED.items():
        info = listed[case.replace(" ", "-")]
        assert info.status == "unreadable" and words in info.message, (case, info.message)
        assert (type(info.step), type(info.total_steps), type(info.created), type(info.config),
                type(info.started_by), info.pid) == (int, int, float, dict, str, None)
        assert not info.active and not info.resumable
        with pytest.raises(ConfigError, match="cannot be resumed"):
            runs.resume(info.path)
    rows = vp.run_rows(list(listed.values()))
    assert (rows["status"] == "unreadable").sum() == len(MALFORMED)
    assert main(["runs", "list", "--json"]) == 0
    assert sorted(r["status"] for r in json.loads(capsys.readouterr().out)).count("unreadable") == len(MALFORMED)
    assert main(["runs", "list"]) == 0 and capsys.readouterr().out.count(" unreadable ") == len(MALFORMED)

    at = app_test(PAGE).run()
    assert not at.exception
    assert sorted(at.dataframe[0].value["run"]) == sorted(listed)
    at.selectbox(key="pretrain.run").set_value("a-list").run()
    assert not at.exception and any("holds list data" in c.value for c in at.caption)


# --- Stop between micro-batches ---------------------------------------------------------------
def test_stop_between_micro_batches_keeps_the_last_whole_step(tmp_path):
    cfg = TrainConfig(**{**SMALL, "grad_accum": 6, "eval_every": 100, "checkpoint_every": 100})
    straight = [r for r in Trainer(cfg).run() if r["kind"] == TRAIN]
    trainer = Trainer(cfg, tmp_path / "run")
    seen, real = [], trainer.batch

    def batch(step, micro=0, stream=0):
        if stream == 0:
            seen.append((step, micro))
            if (step, micro) == (2, 3):  # SIGTERM arrives during the third step's fourth micro-batch
                trainer.stop_requested = True
        return real(step, micro, stream)

    trainer.batch = batch
    records = list(trainer.run())
    assert records[-1] == {"kind": "end", "status": "stopped", "step": 2, "message": "stopped at step 2 of 4"}
    assert seen[-1] == (2, 3)  # micro-batches 4 to 6 of that step never ran
    assert [r["step"] for r in records if r["kind"] == TRAIN] == [1, 2]
    assert checkpoints.latest(tmp_path / "run").name == "step-000002"
    rest = [r for r in Trainer(cfg, tmp_path / "run", resume=True).run() if r["kind"] == TRAIN]
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING} for r in rs]  # noqa: E731
    assert strip(rest) == strip(straight[2:])  # the abandoned half step left no trace


# --- Delete -----------------------------------------------------------------------------------
def test_delete_removes_the_folder_and_its_upload_once_no_run_uses_it(runs_dir, tmp_path, sleeper):
    upload, mine = runs_dir / "uploads" / "abc.txt", tmp_path / "mine.txt"
    upload.parent.mkdir()
    for text_file in (upload, mine):
        text_file.write_text("some text")
    for name, corpus in (("a", upload), ("b", upload), ("c", mine)):
        fake_run(runs_dir, name, corpus=str(corpus))
    runs.delete(runs_dir / "a")
    assert not (runs_dir / "a").exists() and upload.exists()  # run b still trains on it
    runs.delete(runs_dir / "b")
    assert not upload.exists()
    runs.delete(runs_dir / "c")
    assert mine.exists()  # a file of the user's own, outside runs/uploads, is never deleted

    active = fake_run(runs_dir, "active", "running", pid=sleeper().pid)
    with pytest.raises(ConfigError, match="'active' is running; stop it first"):
        runs.delete(active)
    busy = fake_run(runs_dir, "busy")
    lock = process.hold(busy, "training, started by owner")
    with pytest.raises(ConfigError, match=f"'busy' is in use: process {os.getpid()} "):
        runs.delete(busy)
    lock.release()
    assert active.exists() and busy.exists()
    with pytest.raises(ConfigError, match="reserved"):
        runs.start(TrainConfig(**SMALL), "uploads")


def test_a_run_folder_that_is_a_link_is_refused_and_nothing_is_written_through_it(runs_dir, tmp_path, capsys):
    """runs/evil links to a folder outside the runs folder that holds a status.json: every command refuses it
    before it locks anything, so no .lock or lock_holder.json (nor a stop marker) lands in that folder."""
    outside = fake_run(tmp_path, "outside")
    (runs_dir / "evil").symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())
    assert runs.read(runs_dir / "evil").status == "unreadable"
    assert "link" in runs.read(runs_dir / "evil").message
    for action in ("delete", "resume", "stop"):
        assert main(["runs", action, "evil"]) == 2
        assert "'evil'" in capsys.readouterr().err
    for action in (runs.delete, runs.resume):
        with pytest.raises(ConfigError, match=r"^run 'evil' is a link to a folder elsewhere, and the lab changes "
                                              r"only folders inside the runs folder$"):
            action(runs_dir / "evil")
    assert not runs.stop(runs_dir / "evil")
    assert sorted(p.name for p in outside.iterdir()) == before and (runs_dir / "evil").is_symlink()


def test_deleting_a_run_never_deletes_through_an_uploads_folder_that_is_a_link(runs_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "abc.txt").write_text("a text of the user's own")
    (runs_dir / "uploads").symlink_to(elsewhere, target_is_directory=True)
    fake_run(runs_dir, "a", corpus=str(runs_dir / "uploads" / "abc.txt"))
    runs.delete(runs_dir / "a")
    assert not (runs_dir / "a").exists() and (elsewhere / "abc.txt").exists()


def test_train_says_what_its_setup_is_doing_on_stderr(tmp_path):
    done = train_cli("--run-dir", tmp_path / "run", *runs.cli_args(TrainConfig(**{**SMALL, "steps": 2})))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("train: ")]
    assert [line.split(":")[1].split()[0] for line in said[:3]] == ["preparing", "ready", "step"], said
    assert said[-1].startswith("train: finished 2 steps"), said


def test_the_classroom_cap_is_checked_when_a_run_starts(runs_dir, sleeper):
    fake_run(runs_dir, "one", "running", started_by="visitor 10.0.0.8", pid=sleeper().pid)
    with pytest.raises(ConfigError, match="1 runs are training and this server allows 1 at once"):
        runs.start(TrainConfig(**SMALL), "two", started_by="visitor 10.0.0.7", max_active=1)
    assert not (runs_dir / "two").exists()


# --- Classroom: who may control which run, on the page ------------------------------------------
def test_a_visitor_cannot_stop_anothers_run_but_controls_its_own(runs_dir, monkeypatch, sleeper):
    monkeypatch.setenv("BERTVIZ_CLASSROOM", "1")
    monkeypatch.setenv("BERTVIZ_MAX_RUNS", "1")
    monkeypatch.setattr(ui_classroom, "client_ip", lambda: "10.0.0.7")
    teacher = sleeper()
    fake_run(runs_dir, "other", started_by="visitor 10.0.0.8", created=time.time() - 20)
    fake_run(runs_dir, "mine", started_by="visitor 10.0.0.7", created=time.time() - 10)
    fake_run(runs_dir, "teacher", "running", pid=teacher.pid)
    at = app_test(PAGE).run()
    assert not at.exception and at.selectbox(key="pretrain.run").value == "teacher"
    assert "pretrain.stop" not in [b.key for b in at.button]
    assert any(c.value.startswith("Started by this machine's owner") for c in at.caption)
    assert at.button(key="pretrain.start").disabled  # one run trains: the cap of 1 is reached
    assert any("allows 1 at once" in w.value for w in at.warning)

    at.selectbox(key="pretrain.run").set_value("other").run()
    assert not {"pretrain.delete", "pretrain.resume"} & {b.key for b in at.button}
    at.selectbox(key="pretrain.run").set_value("mine").run()
    at.button(key="pretrain.delete").click().run()
    assert any(w.value == "Delete run mine? This removes its checkpoints." for w in at.warning)
    at.button(key="pretrain.delete_no").click().run()
    assert (runs_dir / "mine").exists()
    at.button(key="pretrain.delete").click().run()
    at.button(key="pretrain.delete_yes").click().run()
    assert not at.exception and not (runs_dir / "mine").exists()
    assert teacher.poll() is None and runs.read(runs_dir / "teacher").status == "running"

    monkeypatch.setattr(ui_classroom, "client_ip", lambda: None)  # the machine's owner
    at = app_test(PAGE).run()
    assert at.button(key="pretrain.stop").label == "Stop" and not at.button(key="pretrain.start").disabled
