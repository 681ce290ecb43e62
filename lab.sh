#!/usr/bin/env bash
# One entry point for a fresh machine: creates or reuses .venv, installs what is
# missing, then runs the app or the tests.
#   ./lab.sh app [streamlit args...]   start the app for this machine only (http://localhost:8501)
#   ./lab.sh app --classroom [--max-runs N] [streamlit args...]
#                                      serve the room: listen on the local network, print the address
#                                      students open (the sidebar shows it as a QR code); visitors open
#                                      only checkpoints/ and runs/, manage only their own runs, and train
#                                      at most N runs at once (default 2; or set BERTVIZ_MAX_RUNS)
#   ./lab.sh test [pytest args...]     run the test suite
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

ensure_venv() {  # $1: requirements file to install from
    local req=$1 stamp
    # Reinstall only when the requirements changed since the last install.
    stamp=".venv/.installed-$(cat requirements*.txt | sha256sum | cut -c1-16)-${req%.txt}"
    if [ ! -f "$stamp" ] || [ ! -x .venv/bin/python ]; then  # pip --quiet prints nothing for minutes: say so first (on stderr)
        echo "lab.sh: installing (a few minutes, once): the packages of $req into .venv" >&2
        [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
        touch "$stamp"
    fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    app)  # bertviz_lab/cli/app.py: --classroom and --max-runs N are ours, every other argument goes to streamlit
        ensure_venv requirements.txt
        exec .venv/bin/python -m bertviz_lab app "$@" ;;
    test)
        ensure_venv requirements-test.txt
        exec .venv/bin/python -m pytest "$@" ;;
    *)
        echo "usage: ./lab.sh app|test [args...]" >&2; exit 2 ;;
esac
