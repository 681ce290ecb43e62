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
    app)  # --classroom and --max-runs N are ours; every other argument goes to streamlit
        ensure_venv requirements.txt
        classroom=0
        args=()
        while [ $# -gt 0 ]; do
            case "$1" in
                --classroom) classroom=1 ;;
                --max-runs|--max-runs=*)
                    if [ "$1" = --max-runs ]; then n=${2:-}; [ $# -gt 1 ] && shift; else n=${1#*=}; fi
                    if ! [[ $n =~ ^[1-9][0-9]?$ ]]; then
                        echo "--max-runs needs a whole number from 1 to 99, got '$n'" >&2; exit 2
                    fi
                    export BERTVIZ_MAX_RUNS=$n ;;
                *) args+=("$1") ;;
            esac
            shift
        done
        if [ $classroom = 1 ]; then
            export BERTVIZ_CLASSROOM=1
            .venv/bin/python -m bertviz_lab.classroom ${args[@]+"${args[@]}"}  # where students go
            # Listen on every interface; Streamlit's own banner and browser use localhost (the owner).
            args=(--server.address 0.0.0.0 --browser.serverAddress localhost ${args[@]+"${args[@]}"})
        fi
        exec .venv/bin/python -m bertviz_lab.ui.serve ${args[@]+"${args[@]}"} ;;
    test)
        ensure_venv requirements-test.txt
        exec .venv/bin/python -m pytest "$@" ;;
    *)
        echo "usage: ./lab.sh app|test [args...]" >&2; exit 2 ;;
esac
