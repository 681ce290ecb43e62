#!/usr/bin/env bash
# One entry point for a fresh machine: creates or reuses .venv, installs what is
# missing, then runs the app or the tests.
#   ./lab.sh app [streamlit args...]   start the app (http://localhost:8501)
#   ./lab.sh test [pytest args...]     run the test suite
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

ensure_venv() {  # $1: requirements file to install from
    local req=$1 stamp
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    # Reinstall only when the requirements changed since the last install.
    stamp=".venv/.installed-$(cat requirements*.txt | sha256sum | cut -c1-16)-${req%.txt}"
    if [ ! -f "$stamp" ]; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
        touch "$stamp"
    fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    app)
        ensure_venv requirements.txt
        exec .venv/bin/python -m streamlit run app.py "$@" ;;
    test)
        ensure_venv requirements-test.txt
        exec .venv/bin/python -m pytest "$@" ;;
    *)
        echo "usage: ./lab.sh app|test [args...]" >&2; exit 2 ;;
esac
