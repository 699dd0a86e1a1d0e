#!/usr/bin/env bash
# One entry point that sets everything up on a fresh machine, then runs the course, its tests, or Jupyter.
#   bash course.sh          set up .venv (first time) and run the chapters in order (python main.py)
#   bash course.sh test     set up .venv with the test tools (first time) and run the whole test suite
#   bash course.sh lab      set up .venv (first time) and open the notebooks in JupyterLab
#   bash course.sh chat     set up .venv (first time) and chat with the finished model (python main.py chat)
# Extra arguments go to the command: bash course.sh --model synthetic / bash course.sh test -k norm
set -euo pipefail
cd "$(dirname "$0")"
mode=run
case "${1:-}" in test|lab|chat) mode=$1; shift ;; esac

PY=${PYTHON:-python3}
extras=""; [ "$mode" = test ] && extras="[dev]"
stamp=".venv/.installed$extras"
want="$(cat pyproject.toml)"
if [ ! -x .venv/bin/python ]; then
    echo "setting up .venv (first run only)..."
    "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # torch first and pinned: an unpinned torch can pull a multi-GB build you do not need
    .venv/bin/python -m pip install -q "torch==2.13.0"
    .venv/bin/python -m pip install -q -e ".$extras"
    printf '%s' "$want" > "$stamp"
fi

case $mode in
    run)  exec .venv/bin/python main.py "$@" ;;
    test) exec .venv/bin/python -m pytest -q "$@" ;;
    lab)  exec .venv/bin/jupyter lab notebooks/ "$@" ;;
    chat) exec .venv/bin/python main.py chat "$@" ;;
esac
