"""Every BERTVIZ_* setting goes through one reader (bertviz_lab/settings.py): whole numbers in ASCII digits only,
'~' expanded safely, and a folder the lab cannot use is one sentence naming the variable and the fix, from the
functions that read them, the command line, the app's pages and the Start button."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertviz_lab import classroom
from bertviz_lab.errors import ConfigError
from bertviz_lab.neurons.index import cache_folder
from bertviz_lab.pretrain import batch_cache, runs, threads
from bertviz_lab.pretrain.config import TrainConfig
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")
SMALL = dict(preset="tiny", hidden=32, heads=2, layers=2, batch_size=8, seq_len=32, steps=2, warmup=1,
             eval_every=2, eval_batches=1, checkpoint_every=2, device="cpu")
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0  # root writes into any folder, whatever its mode

# Each setting, the function that reads it, and values it must refuse ({file}, {dangling}, ... are made per test).
READERS = {"BERTVIZ_RUNS": runs.runs_root, "BERTVIZ_BATCH_CACHE": batch_cache.folder,
           "BERTVIZ_NEURON_CACHE": cache_folder, "BERTVIZ_THREADS": lambda: threads.Threads(0),
           "BERTVIZ_MAX_RUNS": classroom.max_runs,
           "BERTVIZ_CLASSROOM": classroom.classroom_mode}
BAD_FOLDERS = ["~nosuchuser/runs", "~nosuchuser", "{file}", "/etc/passwd", "{dangling}", "{file}/below", "/",
               "/proc/self", "{tmp}/a\nb", "{tmp}/" + "x" * 5000]
BAD_WHOLE = ["²", "1²", "٣", "１", "1" * 5000, "0", "-1", "+1", "1.5", "two", "1 1"]
FOLDERS = ("BERTVIZ_RUNS", "BERTVIZ_BATCH_CACHE", "BERTVIZ_NEURON_CACHE")
BAD = ([(name, value) for name in FOLDERS for value in BAD_FOLDERS]
       + [(name, value) for name in ("BERTVIZ_THREADS", "BERTVIZ_MAX_RUNS") for value in BAD_WHOLE]
       + [("BERTVIZ_MAX_RUNS", "100"), ("BERTVIZ_THREADS", str(len(threads.cores()) + 1))]
       + [("BERTVIZ_CLASSROOM", value) for value in ("maybe", "2", "²", "yes please", "1" * 5000)])


def made(value: str, tmp_path: Path) -> str:
    """`value` with its placeholders made: a file, a link to nothing, this test's folder."""
    (tmp_path / "file.txt").write_text("not a folder")
    if not (tmp_path / "dangling").is_symlink():
        (tmp_path / "dangling").symlink_to(tmp_path / "nothing-here")
    return value.format(file=tmp_path / "file.txt", dangling=tmp_path / "dangling", tmp=tmp_path)


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v[:20]!r}" for n, v in BAD])
def test_a_bad_setting_is_one_sentence_naming_the_variable_and_the_fix(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv(name, made(value, tmp_path))
    with pytest.raises(ConfigError) as caught:
        READERS[name]()
    message = str(caught.value)
    assert message.startswith(name) and "set it" in message, message  # "set it to ...", or "unset it"
    assert "\n" not in message and len(message) < 400  # 5,000 digits are not quoted back
    assert not (tmp_path / "nothing-here").exists()  # reading a setting writes nothing


@pytest.mark.skipif(ROOT_USER, reason="root may write into a read-only folder")
@pytest.mark.parametrize("name", FOLDERS)
def test_a_folder_that_cannot_be_written_is_refused(monkeypatch, tmp_path, name):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    for value in (locked, locked / "below"):
        monkeypatch.setenv(name, str(value))
        with pytest.raises(ConfigError, match=f"^{name} .*cannot be written"):
            READERS[name]()


def test_good_values_are_read_and_reading_makes_no_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BERTVIZ_RUNS", "~/lab/runs ")
    assert runs.runs_root() == tmp_path / "lab" / "runs" and not (tmp_path / "lab").exists()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")  # a link to a folder is a folder
    monkeypatch.setenv("BERTVIZ_BATCH_CACHE", str(tmp_path / "link"))
    assert batch_cache.folder() == tmp_path / "link"
    for value, expected in (("", 2), ("5", 5), (" 7 ", 7)):
        monkeypatch.setenv("BERTVIZ_MAX_RUNS", value)
        assert classroom.max_runs() == expected
    for value, expected in (("", False), ("0", False), ("1", True), ("off", False), ("On", True)):
        monkeypatch.setenv("BERTVIZ_CLASSROOM", value)
        assert classroom.classroom_mode() is expected


def test_who_started_a_run_is_read_as_one_short_line(monkeypatch):
    from bertviz_lab import settings  # new with the reader: imported here, so the other tests run without it
    from bertviz_lab.pretrain import process

    for value, expected in (("", process.OWNER), ("visitor 10.0.0.7", "visitor 10.0.0.7"),
                            ("a\nb\x1b[31m", "a b [31m"), ("v" * 5000, "v" * 200)):
        monkeypatch.setenv(process.STARTED_BY_ENV, value)
        assert settings.who(process.STARTED_BY_ENV, process.OWNER) == expected


# --- The command line ----------------------------------------------------------------------------
def lab(*args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bertviz_lab", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=180, env={**os.environ, **env})


@pytest.mark.parametrize("value", ["~nosuchuser/runs", "/etc/passwd", "/"])
def test_runs_list_with_a_bad_runs_folder_says_so_in_one_line(value):
    done = lab("runs", "list", BERTVIZ_RUNS=value)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: BERTVIZ_RUNS ") and done.stderr.count("\n") == 1
    assert "no runs in" not in done.stdout


@pytest.mark.parametrize("name, value", [("BERTVIZ_THREADS", "²"), ("BERTVIZ_THREADS", "9" * 5000),
                                         ("BERTVIZ_BATCH_CACHE", "~nosuchuser/c"),
                                         ("BERTVIZ_BATCH_CACHE", "/etc/passwd")])
def test_train_with_a_bad_setting_says_so_before_it_makes_anything(tmp_path, name, value):
    done = lab("train", "--run-dir", tmp_path / "run", *runs.cli_args(TrainConfig(**SMALL, threads=0)),
               **{name: value})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {name} ") and done.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["²", "9" * 5000])
def test_finetune_with_a_bad_thread_count_says_so_before_it_makes_anything(tmp_path, value):
    done = lab("finetune", "--run-dir", tmp_path / "run", "--task", "acceptability", "--from-scratch", "tiny",
               "--steps", "2", "--device", "cpu", BERTVIZ_THREADS=value)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: BERTVIZ_THREADS ") and done.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


# --- The app and the Start button ------------------------------------------------------------------
def shown_text(at) -> str:
    """What the page (or part of it: at.main, at.sidebar) says in error boxes, plain text and warnings."""
    return "\n".join(e.value for kind in ("error", "text", "warning") for e in at.get(kind))


def test_every_page_that_lists_runs_shows_a_bad_runs_folder_as_a_sentence(monkeypatch):
    monkeypatch.setenv("BERTVIZ_RUNS", "~nosuchuser/runs")
    at = app_test(APP, 90).run()  # Home, with the sidebar that lists the runs' models
    assert not at.exception, [e.value for e in at.exception]
    said = "BERTVIZ_RUNS '~nosuchuser/runs' names the home folder of a user this machine does not have"
    assert said in shown_text(at.sidebar) and at.get("page_link")  # and Home itself is drawn
    for page in ("pages/pretrain.py", "pages/finetune.py", "pages/timelapse.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
        assert said in shown_text(at.main), page  # the page's own list of runs


def test_start_with_a_bad_setting_shows_the_sentence_and_starts_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("BERTVIZ_RUNS", str(tmp_path))
    monkeypatch.setenv("BERTVIZ_THREADS", "²")
    with pytest.raises(ConfigError, match="^BERTVIZ_THREADS must be a whole number"):
        runs.start(TrainConfig(**SMALL, threads=0), "direct")
    at = app_test(ROOT / "pages" / "pretrain.py").run()
    at.selectbox(key="pretrain.device").set_value("cpu")
    at.button(key="pretrain.start").click().run()
    assert not at.exception
    assert "BERTVIZ_THREADS must be a whole number from 1 to" in shown_text(at)
    assert list(tmp_path.iterdir()) == []  # no run folder, no run labelled "failed · ValueError"


def test_a_runs_folder_that_cannot_be_made_is_a_sentence_on_start(monkeypatch, tmp_path):
    """Not a FileExistsError or NotADirectoryError from making the folder: the Start button shows the sentence."""
    (tmp_path / "file").write_text("not a folder")
    for root in (tmp_path / "file", tmp_path / "file" / "below"):
        with pytest.raises(ConfigError, match="^cannot make the runs folder .*: (File exists|Not a directory)"):
            runs.start(TrainConfig(**SMALL, threads=1), "r", root=root)
        monkeypatch.setenv("BERTVIZ_RUNS", str(root))
        with pytest.raises(ConfigError, match="^BERTVIZ_RUNS .* file, not a folder: set it to a folder"):
            runs.start(TrainConfig(**SMALL, threads=1), "r")
        monkeypatch.delenv("BERTVIZ_RUNS")
