"""`bertviz-lab app [--classroom] [--max-runs N] [streamlit args...]`: start the app from any folder.

What `./lab.sh app` did in bash, now in one place for a checkout and for an installed package alike (lab.sh calls
this): `--classroom` and `--max-runs` are ours, every other argument goes to Streamlit (`--server.port 8600`).
In classroom mode the server listens on every interface, prints the address students open (bertviz_lab.classroom's
banner) and lets visitors train at most N runs at once; Streamlit's own banner and browser use localhost.

The server itself is bertviz_lab.ui.shell.serve, run by this copy of the lab, in this process's place (exec), so Ctrl+C
and a service manager's signals reach Streamlit directly; the cli layer never imports Streamlit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bertviz_lab import classroom
from bertviz_lab.errors import LabError
from bertviz_lab.files import PACKAGE

HELP = """start the app (http://localhost:8501); --classroom serves the room (any other argument goes to
Streamlit, e.g. --server.port 8600)"""
NETWORK = ["--server.address", "0.0.0.0", "--browser.serverAddress", "localhost"]


class AppArgumentError(LabError):
    """A --max-runs that is not a whole number from 1 to 99."""


def add_parser(sub) -> None:
    app = sub.add_parser("app", help=HELP.replace("\n", " "), description=HELP.replace("\n", " "))
    app.add_argument("--classroom", action="store_true",
                     help="listen on the local network and print the address students open; visitors open only the "
                          "lab's checkpoints/ and runs/ and manage only their own runs")
    app.add_argument("--max-runs", metavar="N", default=None,
                     help="in classroom mode, how many training runs may run at once (1-99; default 2, or "
                          f"${classroom.MAX_RUNS_ENV})")


def max_runs(text: str) -> str:
    if not re.fullmatch(r"[1-9][0-9]?", text):
        raise AppArgumentError(f"--max-runs needs a whole number from 1 to 99, got {text!r}")
    return text


def serve_command(args, streamlit_args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command that runs the server and what it adds to the environment; in classroom mode, prints the
    address students open."""
    env = {}
    if args.max_runs is not None:
        env[classroom.MAX_RUNS_ENV] = max_runs(args.max_runs)
    if args.classroom:
        env[classroom.CLASSROOM_ENV] = "1"
        runs = int(env[classroom.MAX_RUNS_ENV]) if classroom.MAX_RUNS_ENV in env else None
        print(classroom.banner(streamlit_args, runs), flush=True)
        streamlit_args = [*NETWORK, *streamlit_args]
    # `python -m` would put the working folder first on the path, so a checkout there would be served instead of
    # this copy of the lab: the folder that holds this bertviz_lab goes first instead.
    start = f"import sys; sys.path[0] = {str(PACKAGE.parent)!r}; from bertviz_lab.ui.shell.serve import main; main(sys.argv[1:])"
    return [sys.executable, "-c", start, *streamlit_args], env


def cmd_app(args) -> int:
    return run(*serve_command(args, list(args.extra)))


def run(command: list[str], env: dict[str, str]) -> int:
    """The server in this process's place (POSIX), or as a child this process waits for (Windows, where exec
    would detach the server from the console), with `env` added to the environment."""
    if os.name == "posix":
        os.execve(command[0], command, {**os.environ, **env})  # never returns
    return subprocess.call(command, env={**os.environ, **env})


COMMANDS = {"app": cmd_app}
