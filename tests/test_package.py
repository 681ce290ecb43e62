"""The lab as a package: the wheel carries the app, its settings and the shipped model; installed, it runs from any
folder (the console script, the shipped model by name, the app's pages) and writes its runs to the user's data folder.

Built here with the test environment's hatchling and installed with `pip install --target` (no download, no new
virtual environment): .ci/package does the whole thing a user does, a fresh virtual environment included.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from bertviz_lab import files
from tests.helpers.lab import installed_env, no_gpu_env
from tests.helpers.paths import ROOT
from tests.ui.shell.test_serve_settings import check_served_as_the_lab, hostile_folder

pytestmark = pytest.mark.slow


def tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def run_installed(installed: Path, tmp_path: Path, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`command` from an empty folder, with only the installed copy of the package importable."""
    env = installed_env(installed, tmp_path, HOME=str(tmp_path / "home"))
    where = tmp_path / "elsewhere"
    where.mkdir(exist_ok=True)
    return subprocess.run(list(command), cwd=where, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_dependencies_are_the_requirements_pins_as_lower_bounds():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.split("#")[0].strip():
            name, version = line.split("#")[0].strip().split("==")
            pins[name.lower()] = version
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = dict(d.lower().split(">=") for d in declared)
    assert bounds == pins


def test_the_wheel_carries_the_package_the_app_and_the_shipped_model(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {p for p in tracked("bertviz_lab") if p.endswith(".py")}
    assert package <= names
    app = tracked("app.py", "pages", ".streamlit/config.toml", "checkpoints/bertviz-mini")
    assert len(app) > 15
    assert {"bertviz_lab/lab/" + p for p in app} <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "runs/", "bench/", "docs/"))]
    (entry,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "bertviz-lab = bertviz_lab.cli:console" in zipfile.ZipFile(wheel).read(entry).decode()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    metadata = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Provides-Extra: notebook" in metadata and "Requires-Dist: torch>=2.13.0" in metadata
    assert wheel.stat().st_size < 40e6


def test_installed_it_finds_its_files_inside_the_package_and_writes_runs_to_the_data_folder(installed, tmp_path):
    # A project of the user's beside the package (an app.py, a pages/ folder) does not make it a checkout.
    (installed / "app.py").write_text("print('the user app')\n")
    (installed / "pages").mkdir()
    try:
        done = _where(installed, tmp_path)
    finally:
        (installed / "app.py").unlink()
        (installed / "pages").rmdir()
    checkout, root, shipped, runs = done.stdout.split("\n")[:4]
    assert done.returncode == 0, done.stderr
    assert checkout == "False"
    assert root == str(installed / "bertviz_lab" / "lab")
    assert shipped == str(installed / "bertviz_lab" / "lab" / "checkpoints" / "bertviz-mini")
    assert runs == str(tmp_path / "data" / "bertviz-lab" / "runs")


def _where(installed, tmp_path):
    return run_installed(installed, tmp_path, sys.executable, "-c", textwrap.dedent("""
        from bertviz_lab import files
        from bertviz_lab.pretrain import runs
        print(files.CHECKOUT, files.ROOT, files.shipped_model("bertviz-mini"), runs.runs_root(), sep="\\n")
    """))


def test_in_the_checkout_its_files_are_the_repositorys():
    assert files.CHECKOUT and files.ROOT == ROOT and files.data_root() == ROOT
    assert files.shipped_model("bertviz-mini") == ROOT / "checkpoints" / "bertviz-mini"


@pytest.mark.parametrize("name", ["nothing-here", "../checkpoints/bertviz-mini", "a/b", "", "x" * 200, None])
def test_only_a_shipped_models_bare_name_is_one(name):
    assert files.shipped_model(name) is None


def test_the_console_script_predicts_from_any_folder_as_the_checkout_does(installed, tmp_path):
    script = installed / "bin" / "bertviz-lab"
    sentence = "the cat sat on the [MASK] ."
    done = run_installed(installed, tmp_path, sys.executable, str(script), "predict", "--checkpoint", "bertviz-mini",
                         sentence)
    assert done.returncode == 0, done.stderr
    here = subprocess.run([sys.executable, "-m", "bertviz_lab", "predict", "--checkpoint", "checkpoints/bertviz-mini",
                           sentence], cwd=ROOT, env=no_gpu_env(), capture_output=True, text=True, timeout=120)
    assert done.stdout == here.stdout and "mat" in done.stdout
    info = run_installed(installed, tmp_path, sys.executable, str(script), "info", "--checkpoint", "bertviz-mini")
    assert re.search(r"^path +" + re.escape(str(installed)), info.stdout, re.M), info.stdout + info.stderr
    assert "usage: bertviz-lab" in run_installed(installed, tmp_path, sys.executable, str(script), "nothing").stderr


def test_the_installed_app_draws_its_pages(installed, tmp_path):
    """AppTest on the installed app.py: the home page and Mask & predict draw without an exception."""
    done = run_installed(installed, tmp_path, sys.executable, "-c", textwrap.dedent("""
        from streamlit.testing.v1 import AppTest
        from bertviz_lab import files
        at = AppTest.from_file(str(files.ROOT / "app.py"), default_timeout=120).run()
        assert not at.exception, at.exception
        print("home:", at.title[0].value if at.title else at.markdown[0].value[:60])
        at.switch_page("pages/predict.py").run()
        assert not at.exception, at.exception
        print("predict:", len(at.get("plotly_chart")), "charts")
    """), timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"predict: [1-9]\d* charts", done.stdout), done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_installed_app_command_serves_from_any_folder_with_its_own_settings(installed, tmp_path):
    """From a folder whose .streamlit/config.toml opens the server to other sites, serves files and moves the app
    (test_serve_settings.HOSTILE): the installed lab serves with its own settings, and no file beside its app.py."""
    port = free_port()
    env = {k: v for k, v in installed_env(installed, tmp_path).items() if not k.startswith("STREAMLIT_")}
    where = hostile_folder(tmp_path / "shared")
    static = installed / "bertviz_lab" / "lab" / "static"
    static.mkdir()
    shutil.copy(where / "static" / "planted.txt", static)
    server = subprocess.Popen([sys.executable, str(installed / "bin" / "bertviz-lab"), "app", "--server.port",
                               str(port), "--server.headless", "true"], cwd=where, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        check_served_as_the_lab(f"http://localhost:{port}", server)
    finally:
        server.terminate()
        out = server.communicate(timeout=30)[0]
        shutil.rmtree(static)
    assert f"localhost:{port}" in out and "Network URL" not in out  # the shipped settings: this machine only


def test_a_relative_runs_folder_is_the_one_under_the_working_folder(monkeypatch, tmp_path):
    from bertviz_lab.pretrain import runs

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERTVIZ_RUNS", "relruns")
    assert runs.runs_root() == tmp_path / "relruns"  # absolute: the trainer, started anywhere, writes there too
    monkeypatch.setenv("BERTVIZ_RUNS", "~/r")
    assert runs.runs_root() == Path("~/r").expanduser()


def test_the_trainer_imports_the_same_copy_of_the_lab(monkeypatch):
    from bertviz_lab.pretrain.process import STARTED_BY_ENV, child_env

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "/opt/x", ""]))
    env = child_env("me")
    assert env["PYTHONPATH"] == os.pathsep.join([str(ROOT), "/opt/x"]) and env[STARTED_BY_ENV] == "me"  # checkout
    monkeypatch.setattr(files, "CHECKOUT", False)  # installed: already on the path, and no empty (cwd) entry
    assert child_env("me")["PYTHONPATH"] == "/opt/x"
    monkeypatch.delenv("PYTHONPATH")
    assert "PYTHONPATH" not in child_env("me")


def test_the_trainer_command_ignores_a_bertviz_lab_in_the_working_folder(tmp_path):
    """The app starts `train`/`finetune` with LAB_COMMAND from whatever folder it runs in; `-m` alone would import
    a bertviz_lab folder found there first."""
    from bertviz_lab.pretrain.process import LAB_COMMAND, child_env

    (tmp_path / "bertviz_lab").mkdir()
    (tmp_path / "bertviz_lab" / "__init__.py").write_text("")
    (tmp_path / "bertviz_lab" / "__main__.py").write_text("print('impostor')\n")
    done = subprocess.run([*LAB_COMMAND, "--help"], cwd=tmp_path, env=child_env("me"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "impostor" not in done.stdout and "Watch BERT work." in done.stdout
