#!/usr/bin/env bash
# One entry point that sets everything up on a fresh machine, then runs the course, its tests, or Jupyter.
#   bash course.sh          set up .venv (first time) and run the chapters in order (python main.py)
#   bash course.sh test     set up .venv with the test tools (first time) and run the whole test suite
#   bash course.sh lab      set up .venv (first time) and open the notebooks in JupyterLab
#   bash course.sh chat     set up .venv (first time) and chat with the finished model (python main.py chat)
# Extra arguments go to the command: bash course.sh --model synthetic / bash course.sh test -k norm
# The set-up installs the versions in constraints.txt (those CI passed) and redoes it when pyproject.toml or
# constraints.txt change. PYTHON=python3.12 bash course.sh picks the interpreter that builds .venv.
set -euo pipefail
cd "$(dirname "$0")"
mode=run
case "${1:-}" in test|lab|chat) mode=$1; shift ;; esac

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    found=$("$PY" --version 2>/dev/null || echo "not found")
    echo "error: the course needs Python 3.11 or newer ($PY is: $found)." >&2
    echo "Fix: install Python 3.11+ (python.org or your package manager); then PYTHON=python3.11 bash course.sh" >&2
    exit 1
fi
extras=""; [ "$mode" = test ] && extras="[dev]"
stamp=".venv/.installed$extras"
want="$(cat pyproject.toml constraints.txt)"
if [ ! -x .venv/bin/python ]; then
    echo "setting up .venv (first run only)..."
    "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing torch, this package and its dependencies into .venv (the versions in constraints.txt)..."
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -c constraints.txt -e ".$extras"
    printf '%s' "$want" > "$stamp"
fi

case $mode in
    run)  exec .venv/bin/python main.py "$@" ;;
    # -rfEs: every failure, error and skip (with its reason) in the summary; the 25 slowest tests; a hung test
    # fails after the timeout in pyproject.toml
    test) exec .venv/bin/python -m pytest -q -rfEs --durations=25 "$@" ;;
    lab)  exec .venv/bin/jupyter lab notebooks/ "$@" ;;
    chat) exec .venv/bin/python main.py chat "$@" ;;
esac
