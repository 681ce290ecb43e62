"""The server's settings are the lab's own and complete (bertviz_lab/ui/shell/serve.py SETTINGS): a `.streamlit/config.toml`
in the folder the app is started from changes nothing, and the repository's own file says what the table says, so
that `streamlit run app.py` from the checkout gets the same."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench.common import free_port, stop
from bertviz_lab.ui.shell import serve
from tests.helpers.lab import no_gpu_env
from tests.helpers.paths import ROOT

# What a shared folder could hold: every cross-origin page may read the server, a planted file is served, the app
# moves to another address, and the browser shows tracebacks and the developer menu.
HOSTILE = """
[global]
developmentMode = false
[server]
enableCORS = false
corsAllowedOrigins = ["https://evil.example"]
enableXsrfProtection = false
enableStaticServing = true
baseUrlPath = "x"
runOnSave = true
[client]
toolbarMode = "developer"
showErrorDetails = "full"
[browser]
gatherUsageStats = true
"""
EVIL = "https://evil.example"
PLANTED = "a file planted in a shared folder"


def hostile_folder(folder: Path) -> Path:
    (folder / ".streamlit").mkdir(parents=True)
    (folder / ".streamlit" / "config.toml").write_text(HOSTILE)
    (folder / "static").mkdir()
    (folder / "static" / "planted.txt").write_text(PLANTED)
    return folder


def get(url: str) -> tuple[int, dict[str, str], str]:
    """Status, headers (lower-case names) and body of a GET from another site's page (an Origin header)."""
    request = urllib.request.Request(url, headers={"Origin": EVIL})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode(errors="replace")


def wait_for_health(base: str, proc, deadline_s: float = 120) -> str:
    """The path prefix ("" or "/x") at which the server first answers its health check, within the deadline."""
    import time

    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        for prefix in ("", "/x"):
            try:
                if get(f"{base}{prefix}/_stcore/health")[0] == 200:
                    return prefix
            except OSError:
                pass
        time.sleep(0.3)
    raise AssertionError(f"no health answer within {deadline_s:.0f} s (exit code {proc.poll()})")


def check_served_as_the_lab(base: str, proc) -> None:
    prefix = wait_for_health(base, proc)
    assert prefix == "", "the working folder's server.baseUrlPath moved the app"
    status, headers, _ = get(f"{base}/_stcore/health")
    assert status == 200
    assert headers.get("access-control-allow-origin") not in ("*", EVIL), headers
    status, headers, body = get(f"{base}/app/static/planted.txt")  # 404, or the app's page (Streamlit's fallback)
    assert PLANTED not in body and (status == 404 or headers["content-type"].startswith("text/html"))


@pytest.mark.slow
def test_a_hostile_config_in_the_working_folder_changes_nothing(tmp_path):
    where = hostile_folder(tmp_path / "shared")
    port = free_port()
    env = {k: v for k, v in no_gpu_env(PYTHONPATH=str(ROOT)).items() if not k.startswith("STREAMLIT_")}
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bertviz_lab", "app", "--server.port", str(port),
                                 "--server.headless", "true"], cwd=where, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            check_served_as_the_lab(f"http://localhost:{port}", proc)
        finally:
            stop(proc)
    text = log.read_text(errors="replace")
    assert "Static file serving is enabled" not in text and "enableCORS=false" not in text, text[-2000:]
    assert f"localhost:{port}/x" not in text and f"localhost:{port}" in text


def flat(table: dict, section: str = "") -> dict:
    out = {}
    for name, value in table.items():
        key = f"{section}.{name}" if section else name
        out.update(flat(value, key) if isinstance(value, dict) else {key: value})
    return out


def test_the_repositorys_config_file_is_the_labs_table():
    """`streamlit run app.py` from the checkout reads only the file; `./lab.sh app` and `bertviz-lab app` pass the
    table as flags: both must say the same."""
    assert flat(tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())) == serve.SETTINGS


def test_the_users_own_arguments_come_after_the_labs_settings(monkeypatch):
    from streamlit.web import cli

    seen = []
    monkeypatch.setattr(cli, "main", lambda args, prog_name: seen.extend(args))
    monkeypatch.setattr(serve, "warm", lambda: None)
    monkeypatch.setattr(serve, "ignore_the_working_folders_config", lambda: None)
    serve.main(["--server.port", "8600"])
    assert seen[:2] == ["run", str(ROOT / "app.py")] and seen[-2:] == ["--server.port", "8600"]
    assert seen[2:-2] == serve.setting_flags()


def test_the_working_folders_settings_are_not_read(monkeypatch, tmp_path):
    from streamlit import config

    monkeypatch.setattr(config, "get_config_files", config.get_config_files)  # put back afterwards
    monkeypatch.chdir(hostile_folder(tmp_path))
    serve.ignore_the_working_folders_config()
    for name in ("config.toml", "secrets.toml"):
        read = config.get_config_files(name)
        assert str(tmp_path / ".streamlit" / name) not in read and read[-1] == str(ROOT / ".streamlit" / name)


def test_the_settings_as_flags_leave_an_administrators_environment_variable(monkeypatch):
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    flags = serve.setting_flags()
    assert flags[flags.index("--server.enableCORS") + 1] == "true"
    assert flags[flags.index("--server.baseUrlPath") + 1] == ""
    assert flags[flags.index("--server.maxUploadSize") + 1] == "20"
    assert "--server.address" in flags
    monkeypatch.setenv("STREAMLIT_SERVER_ADDRESS", "0.0.0.0")  # an administrator's environment is a choice too
    assert "--server.address" not in serve.setting_flags()


def test_streamlit_takes_the_last_of_a_flag_given_twice(monkeypatch):
    """What the user's `--server.port 8600` and --classroom's `--server.address 0.0.0.0` after the lab's own flags
    rely on (Streamlit's click options)."""
    from click.testing import CliRunner
    from streamlit.web import cli

    seen = {}
    monkeypatch.setattr(cli, "_main_run", lambda file, args, flag_options: seen.update(flag_options))
    done = CliRunner().invoke(cli.main, ["run", str(ROOT / "app.py"), "--server.address", "localhost",
                                         "--server.address", "0.0.0.0"],
                              env={k: None for k in os.environ if k.startswith("STREAMLIT_")})
    assert done.exit_code == 0, done.output
    assert seen["server_address"] == "0.0.0.0"
