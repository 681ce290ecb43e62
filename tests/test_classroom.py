"""Classroom mode (bertviz_lab/classroom.py, ui/shell/classroom.py): a visitor's folder box opens only checkpoints/
and runs/ and never says which server paths exist; the owner keeps full control; the QR code shows only in
classroom mode, with the address the route or the interfaces give; the server's config binds localhost, hides
error details and caps uploads at the app's own cap."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import segno
import streamlit
from hypothesis import HealthCheck, example, given, settings, strategies
from streamlit.testing.v1 import AppTest

from bertviz_lab.bert.checkpoint import save_checkpoint
from bertviz_lab.corpus.user_text import MAX_TEXT_BYTES, read_text_file
from bertviz_lab.errors import InputError, LabError
from bertviz_lab import classroom
from bertviz_lab.files import ROOT as LAB
from bertviz_lab.ui.shell import classroom as ui_classroom
from bertviz_lab.ui.shell import models
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")
VISITOR = "10.0.0.7"


@pytest.fixture
def rooms(tmp_path, monkeypatch):
    """Classroom mode with the runs under tmp_path/runs and a symlink in a stand-in checkpoints/ that
    points outside (at a real, loadable model). Returns the folders the tests type."""
    monkeypatch.setenv(classroom.CLASSROOM_ENV, "1")
    runs_dir, shipped = tmp_path / "runs", tmp_path / "checkpoints"
    runs_dir.mkdir()
    shipped.mkdir()
    monkeypatch.setenv("BERTVIZ_RUNS", str(runs_dir))
    monkeypatch.setattr(models, "SHIPPED", shipped)
    monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    return runs_dir, shipped


def as_visitor(monkeypatch):
    monkeypatch.setattr(ui_classroom, "client_ip", lambda: VISITOR)


def type_folder(at: AppTest, path: str) -> AppTest:
    at.text_input(key="model.custom").set_value(path).run()
    return at.button(key="model.load").click().run()


def boxes(at: AppTest) -> list[str]:
    return [e.label for e in at.sidebar.expander]


def app() -> AppTest:
    return app_test(APP).run()


# --- A visitor's folder box ------------------------------------------------------------------------
def outside_paths(tmp_path: Path, shipped: Path, runs_dir: Path, model: Path) -> list[str]:
    (shipped / "elsewhere").symlink_to(model, target_is_directory=True)
    (runs_dir / "etc").symlink_to("/etc", target_is_directory=True)
    return ["/etc", "../../etc", "/etc/passwd", str(model), str(tmp_path / "missing"), "~", "~root", ".",
            "checkpoints/elsewhere", str(shipped / "elsewhere"), "runs/etc", "runs/../../../etc",
            "checkpoints/../../etc", "/proc/self", "x" * 5000, "a\x00b"]


def test_every_outside_path_gets_the_same_one_sentence(tmp_path, rooms, monkeypatch, tiny_checkpoint):
    runs_dir, shipped = rooms
    as_visitor(monkeypatch)
    at = app()
    assert boxes(at) == ["Join this class", models.BOX, "Share this view"]  # the visitor's folder box has a caption
    for path in outside_paths(tmp_path, shipped, runs_dir, tiny_checkpoint):
        type_folder(at, path)
        assert not at.exception, path
        assert [e.value for e in at.sidebar.error] == [classroom.REFUSAL], path
        assert at.subheader[0].value == "Active model: bertviz-mini", path
    assert classroom.REFUSAL.count(".") == 1 and "/" not in classroom.REFUSAL.replace("checkpoints/", "").replace(
        "runs/", "")


def test_a_visitor_loads_a_run_under_runs_and_reads_no_server_path(rooms, monkeypatch, tiny_model, tiny_tokenizer):
    runs_dir, _ = rooms
    save_checkpoint(tiny_model, tiny_tokenizer, runs_dir / "r1" / "checkpoint", card={"steps": 0})
    broken = runs_dir / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    as_visitor(monkeypatch)
    at = type_folder(app(), str(broken))  # typed in full: the message shows it relative
    [message] = [e.value for e in at.sidebar.error]
    assert "not valid JSON" in message and "runs/broken" in message
    assert str(runs_dir.parent) not in message and "/" + "runs" not in message
    type_folder(at, "runs/r1/../r1/checkpoint")
    assert not at.exception and not at.sidebar.error
    assert at.subheader[0].value == "Active model: checkpoint"


def test_the_owner_opens_any_folder(rooms, tiny_checkpoint):
    at = type_folder(app(), str(tiny_checkpoint))  # client_ip() is None: a browser on this machine
    assert not at.exception and not at.sidebar.error
    assert at.subheader[0].value == "Active model: tiny"
    assert boxes(at) == ["Join this class", models.BOX, "Share this view"]
    type_folder(at, str(tiny_checkpoint.parent / "nope"))
    assert any(str(tiny_checkpoint.parent) in e.value for e in at.sidebar.error)  # the owner sees full paths


def test_outside_classroom_mode_a_remote_address_is_still_the_owner(monkeypatch, tiny_checkpoint):
    monkeypatch.delenv(classroom.CLASSROOM_ENV, raising=False)
    as_visitor(monkeypatch)
    assert ui_classroom.is_owner() and ui_classroom.visitor_id() == ui_classroom.OWNER
    at = type_folder(app(), str(tiny_checkpoint))
    assert at.subheader[0].value == "Active model: tiny"


# --- The path rule itself ----------------------------------------------------------------------------
def test_visitor_folder_resolves_before_checking(tmp_path):
    inside, outside = tmp_path / "runs", tmp_path / "secret"
    (inside / "a").mkdir(parents=True)
    outside.mkdir()
    (inside / "link").symlink_to(outside)
    (inside / "loop").symlink_to(inside / "loop")
    roots = {"runs": inside}
    assert classroom.visitor_folder("runs/a", roots) == inside / "a"
    assert classroom.visitor_folder(str(inside / "a" / ".." / "a"), roots) == inside / "a"
    for path in ["runs/link", "runs/../secret", str(inside / "link" / "x"), str(outside), "runs/loop/x", ""]:
        with pytest.raises(classroom.VisitorPathError, match="^In classroom mode"):
            classroom.visitor_folder(path, roots)


PARTS = strategies.sampled_from(["..", ".", "runs", "checkpoints", "link", "a", "etc", "~", "", "x" * 300, "\x00"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=strategies.lists(PARTS, max_size=8), absolute=strategies.booleans())
@example(parts=["runs", "link", "..", "..", "etc"], absolute=False)
@example(parts=["runs", "..", "runs", "a"], absolute=False)
def test_a_visitor_folder_is_always_inside_a_root(tmp_path_factory, parts, absolute):
    base = tmp_path_factory.getbasetemp() / "property"
    inside = base / "runs"
    if not inside.exists():
        (inside / "a").mkdir(parents=True)
        (base / "etc").mkdir()
        (inside / "link").symlink_to(base / "etc")
    text = ("/" if absolute else "") + "/".join(parts)
    try:
        folder = classroom.visitor_folder(text, {"runs": inside})
    except classroom.VisitorPathError as exc:
        assert str(exc) == classroom.REFUSAL
    else:
        assert folder.is_relative_to(inside.resolve()) and folder == folder.resolve()


def test_hide_paths_keeps_the_lab_relative_and_drops_the_rest(tmp_path):
    roots = {"runs": tmp_path / "runs", "checkpoints": LAB / "checkpoints"}
    hide = classroom.hide_paths
    assert hide(f"no model folder at {tmp_path}/runs/x", roots) == "no model folder at runs/x"
    assert hide(f"{LAB}/checkpoints/m/config.json is bad", roots) == "checkpoints/m/config.json is bad"
    assert hide(f"see {LAB}/pages/x.py", roots) == "see pages/x.py"
    assert hide("cannot open /home/teacher/secret: denied", roots) == "cannot open a server path: denied"
    assert hide(f"{tmp_path}/runsx and 12/4 heads", roots) == "a server path and 12/4 heads"


# --- The QR code and the address ---------------------------------------------------------------------
def test_the_qr_code_shows_in_classroom_mode_only(rooms, monkeypatch):
    at = app()
    join = at.sidebar.expander[0]
    assert join.label == "Join this class"
    assert [child.type for child in join] == ["expander", "image", "subheader", "caption"]
    assert join.subheader[0].value == "192.168.1.20:8501"
    monkeypatch.delenv(classroom.CLASSROOM_ENV)
    assert boxes(app()) == [models.BOX, "Share this view"]


def test_qr_svg_is_black_on_white_with_a_quiet_zone():
    url = "http://192.168.1.20:8501"
    svg = classroom.qr_svg(url)
    modules = segno.make(url, error="m").symbol_size(scale=1, border=0)[0]
    assert svg.startswith(f'<svg viewBox="0 0 {modules + 8} {modules + 8}"')  # no fixed size: it scales
    assert 'stroke="#000" d="M4 4.5h7' in svg  # the finder pattern's top row starts 4 modules in
    assert f'<path fill="#fff" d="M0 0h{modules + 8}' in svg  # on white, also in the dark theme


def test_lan_address_is_a_usable_ipv4_or_none():
    address = classroom.lan_address()  # this machine's, whatever its network
    if address is not None:
        ip = ipaddress.IPv4Address(address)
        assert not (ip.is_loopback or ip.is_link_local or ip.is_unspecified)
    assert classroom.join_url(8600, "10.1.2.3") == "http://10.1.2.3:8600"
    assert [classroom._usable(a) for a in ("127.0.0.1", "169.254.3.4", "0.0.0.0", "::1", "192.168.0.9")] == [
        False, False, False, False, True]


def routes(monkeypatch, answers: dict[str, str | None]) -> list[str]:
    """The route lookup's sockets answer `answers` (probe -> source address; None: no route there). Returns the
    probes asked, in order."""
    asked = []

    class Socket:
        def __init__(self, *args):
            self.address = None

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def connect(self, where):
            asked.append(where[0])
            if answers.get(where[0]) is None:
                raise OSError("Network is unreachable")
            self.address = answers[where[0]]

        def getsockname(self):
            return self.address, 40000

    monkeypatch.setattr(classroom, "socket", SimpleNamespace(socket=Socket, AF_INET=socket.AF_INET,
                                                             SOCK_DGRAM=socket.SOCK_DGRAM))
    return asked


def interfaces(monkeypatch, table: dict[str, tuple[bool, list[tuple[int, str]]]]) -> None:
    """psutil sees these interfaces: name -> (up, [(family, address), ...])."""
    import psutil

    monkeypatch.setattr(psutil, "net_if_stats", lambda: {n: SimpleNamespace(isup=up) for n, (up, _) in table.items()})
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: {n: [SimpleNamespace(family=f, address=a) for f, a in entries]
                                                         for n, (_, entries) in table.items()})


def test_lan_address_takes_the_first_usable_route(monkeypatch):
    probes = classroom._ROUTE_PROBES
    asked = routes(monkeypatch, {probes[1]: "127.0.0.1", probes[2]: "10.20.30.40", probes[3]: "192.168.9.9"})
    assert classroom.lan_address() == "10.20.30.40"  # the first has no route, the second only loopback
    assert asked == list(probes[:3])


def test_lan_address_falls_back_to_an_interface_that_is_up_and_not_virtual(monkeypatch):
    routes(monkeypatch, {})  # no route anywhere: an offline laptop
    v4, v6 = socket.AF_INET, socket.AF_INET6
    interfaces(monkeypatch, {
        "lo": (True, [(v4, "127.0.0.1")]),
        "docker0": (True, [(v4, "172.17.0.1")]),  # a VM or container bridge, not the room
        "eth0": (False, [(v4, "10.0.0.5")]),  # down
        "wlan0": (True, [(v6, "fe80::1"), (v4, "169.254.7.7"), (v4, "192.168.1.23"), (v4, "192.168.1.24")]),
    })
    assert classroom.lan_address() == "192.168.1.23" and classroom.join_url(8600) == "http://192.168.1.23:8600"
    interfaces(monkeypatch, {"lo": (True, [(v4, "127.0.0.1")]), "eth0": (False, [(v4, "10.0.0.5")])})
    assert classroom.lan_address() is None and classroom.join_url(8501) is None  # nothing the room can reach


def test_the_banner_names_the_port_and_the_limit(monkeypatch):
    monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    monkeypatch.setenv(classroom.MAX_RUNS_ENV, "3")
    text = classroom.banner(["--server.port", "8600", "--theme.base=dark"])
    assert "Students open http://192.168.1.20:8600" in text and "at most 3 runs" in text
    assert classroom.port_from_args(["--server.port=9000"]) == 9000 and classroom.port_from_args([]) == 8501


@pytest.mark.parametrize("value, expected", [(None, 2), ("3", 3), ("0", None), ("many", None)])
def test_max_runs(monkeypatch, value, expected):
    """None: refused with a sentence (tests/test_settings.py has the whole table of bad values)."""
    if value is None:
        monkeypatch.delenv(classroom.MAX_RUNS_ENV, raising=False)
    else:
        monkeypatch.setenv(classroom.MAX_RUNS_ENV, value)
    if expected is None:
        with pytest.raises(LabError, match="^BERTVIZ_MAX_RUNS must be a whole number from 1 to 99"):
            classroom.max_runs()
    else:
        assert classroom.max_runs() == expected


# --- bertviz-lab app (and ./lab.sh app, which calls it) ----------------------------------------------
STUB = """#!/usr/bin/env bash
if [ "$1 $2" = "-m bertviz_lab" ]; then echo "python $*"; fi
"""


def lab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a copy of lab.sh whose .venv/bin/python only echoes what it was asked to do."""
    shutil.copy(ROOT / "lab.sh", tmp_path / "lab.sh")
    (tmp_path / "requirements.txt").write_text("")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text(STUB)
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTVIZ_")}
    return subprocess.run(["bash", str(tmp_path / "lab.sh"), "app", *args], capture_output=True, text=True,
                          env=env, timeout=30)


def test_lab_sh_app_is_the_app_command_with_every_argument(tmp_path):
    done = lab(tmp_path, "--classroom", "--max-runs", "3", "--server.port", "8600")
    assert done.stdout == "python -m bertviz_lab app --classroom --max-runs 3 --server.port 8600\n"
    assert lab(tmp_path).stdout == "python -m bertviz_lab app\n"


@pytest.mark.parametrize("command", ["app", "test"])
def test_lab_sh_says_it_is_installing_before_pip_runs_and_only_then(tmp_path, command):
    shutil.copy(ROOT / "lab.sh", tmp_path / "lab.sh")
    for name in ("requirements.txt", "requirements-test.txt"):
        (tmp_path / name).write_text("")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/usr/bin/env bash\nif [ "$1 $2" = "-m pip" ]; then echo "pip ran" >&2; fi\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BERTVIZ_")}

    def run() -> str:
        return subprocess.run(["bash", str(tmp_path / "lab.sh"), command], capture_output=True, text=True, env=env,
                              timeout=30).stderr

    first = run()  # no stamp yet: an install runs, and the reader is told before pip starts
    assert "installing (a few minutes, once)" in first and "pip ran" in first
    assert first.index("installing (a few minutes, once)") < first.index("pip ran")
    assert run() == ""  # installed: nothing to say, no pip


def app_command(monkeypatch, capsys, *argv: str):
    """What `bertviz-lab app ARGV` would exec (the Streamlit arguments after the start-up code), what it adds to the
    server's environment, and what it printed; this process's environment is left as it was."""
    from bertviz_lab import cli
    from bertviz_lab.cli import app as cli_app

    for name in (classroom.CLASSROOM_ENV, classroom.MAX_RUNS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(classroom, "lan_address", lambda: "192.168.1.20")
    ran = []
    monkeypatch.setattr(cli_app, "run", lambda command, env: ran.append((command, env)) or 0)
    before = dict(os.environ)
    status = cli.main(["app", *argv])
    assert dict(os.environ) == before
    if not ran:
        return status, None, None, capsys.readouterr()
    (command, env), = ran
    assert command[:2] == [sys.executable, "-c"] and "from bertviz_lab.ui.shell.serve import main" in command[2]
    return status, command[3:], env, capsys.readouterr()


def test_app_classroom_listens_on_the_network_and_prints_the_address(monkeypatch, capsys):
    _, args, env, out = app_command(monkeypatch, capsys, "--classroom", "--max-runs", "3", "--server.port", "8600")
    assert args == ["--server.address", "0.0.0.0", "--browser.serverAddress", "localhost", "--server.port", "8600"]
    assert env == {classroom.CLASSROOM_ENV: "1", classroom.MAX_RUNS_ENV: "3"}
    assert "http://192.168.1.20:8600" in out.out and "at most 3 runs at once" in out.out


def test_app_without_classroom_passes_everything_to_streamlit(monkeypatch, capsys):
    _, args, env, out = app_command(monkeypatch, capsys, "--server.port", "8600", "--theme.base", "dark")
    assert args == ["--server.port", "8600", "--theme.base", "dark"]
    assert env == {} and out.out == ""
    assert app_command(monkeypatch, capsys)[1] == []


@pytest.mark.parametrize("bad", ["0", "x", "", "-1", "100"])
def test_app_refuses_a_bad_max_runs(monkeypatch, capsys, bad):
    status, args, _, out = app_command(monkeypatch, capsys, "--classroom", f"--max-runs={bad}")
    assert status == 2 and args is None and out.out == ""
    assert out.err.strip() == f"error: --max-runs needs a whole number from 1 to 99, got '{bad}'"


def test_the_server_runs_this_copy_of_the_lab_whatever_the_working_folder_holds(tmp_path):
    """`python -m` would import a bertviz_lab found in the working folder first; the start-up code does not."""
    from bertviz_lab import files
    from bertviz_lab.cli import app as cli_app

    (tmp_path / "bertviz_lab" / "ui" / "shell").mkdir(parents=True)
    for init in ("bertviz_lab/__init__.py", "bertviz_lab/ui/__init__.py", "bertviz_lab/ui/shell/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "bertviz_lab" / "ui" / "shell" / "serve.py").write_text("def main(argv):\n    print('impostor')\n")
    command, _ = cli_app.serve_command(SimpleNamespace(max_runs=None, classroom=False), [])
    probe = command[2].replace("from bertviz_lab.ui.shell.serve import main; main(sys.argv[1:])",
                               "import bertviz_lab.ui.shell.serve as s; print(s.__file__)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(files.PACKAGE / "ui" / "shell" / "serve.py"), done.stderr


def test_only_the_app_command_takes_arguments_it_does_not_know(capsys):
    from bertviz_lab import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["info", "--checkpoint", "bertviz-mini", "--server.port", "8600"])
    assert stop.value.code == 2 and "unrecognized arguments: --server.port 8600" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix", reason="exec is the POSIX path")
def test_app_puts_the_server_in_its_place_on_posix(monkeypatch):
    from bertviz_lab.cli import app as cli_app

    execs = []

    def execve(path, command, env):
        execs.append((command, env.get("BERTVIZ_CLASSROOM")))
        raise SystemExit(0)  # as exec would: nothing after it runs in this process

    monkeypatch.delenv("BERTVIZ_CLASSROOM", raising=False)
    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr(cli_app.subprocess, "call", lambda *a, **k: pytest.fail("a child server was started"))
    with pytest.raises(SystemExit):
        cli_app.run(["python", "-c", "pass"], {"BERTVIZ_CLASSROOM": "1"})
    assert execs == [(["python", "-c", "pass"], "1")] and "BERTVIZ_CLASSROOM" not in os.environ


# --- .streamlit/config.toml -------------------------------------------------------------------------
def test_config_binds_localhost_hides_errors_and_caps_uploads_at_the_apps_cap():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "localhost"
    assert config["client"]["showErrorDetails"] == "none"
    assert config["client"]["toolbarMode"] == "viewer" and config["browser"]["gatherUsageStats"] is False
    assert config["server"]["maxUploadSize"] * 2**20 == MAX_TEXT_BYTES


def test_no_full_garbage_collection_after_every_script_run():
    """Streamlit's default collects all generations after each run: ~150 ms holding the GIL with torch,
    pandas and plotly loaded, paid by every session on every redraw (bench.classroom_load)."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
    runner = Path(streamlit.__file__).parent / "runtime" / "scriptrunner" / "script_runner.py"
    assert re.search(r'if config\.get_option\("runner\.postScriptGC"\):\s+gc\.collect\(2\)', runner.read_text())


def test_streamlit_counts_max_upload_size_in_units_of_2_to_the_20():
    """The unit the cap above relies on, as Streamlit 1.67's upload route computes it."""
    routes = Path(streamlit.__file__).parent / "web" / "server" / "starlette" / "starlette_routes.py"
    assert 'config.get_option("server.maxUploadSize") * 1024 * 1024' in routes.read_text()


def test_the_upload_cap_is_exact():
    assert read_text_file(b"a" * MAX_TEXT_BYTES) == "a" * MAX_TEXT_BYTES
    with pytest.raises(InputError, match="the limit is 20,971,520 bytes"):
        read_text_file(b"a" * (MAX_TEXT_BYTES + 1))
