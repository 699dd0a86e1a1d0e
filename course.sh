#!/usr/bin/env bash
# One entry point that sets everything up on a fresh machine, then runs the course, its tests, or Jupyter.
#   bash course.sh          set up .venv (first time) and run the chapters in order (python main.py)
#   bash course.sh test     set up .venv with the test tools (first time) and run the default test tier (minutes)
#   bash course.sh test --all   the full gate: the tests marked slow too (what .ci/run runs)
#   bash course.sh lab      set up .venv (first time) and open the notebooks in JupyterLab
#   bash course.sh chat     set up .venv (first time) and chat with the finished model (python main.py chat)
#   bash course.sh book     set up .venv with the proofs' oracles and the book's engine (first time) and build the
#                           course as web pages
#                           (python -m web; --model PATH|HUB_ID builds it on that checkpoint; --serve
#                           serves them on localhost); it prints where its index.html is
# Extra arguments go to the command: bash course.sh --model synthetic / bash course.sh test -k norm
# The set-up installs the versions in constraints.txt (those CI passed) and redoes it when pyproject.toml or
# constraints.txt change. PYTHON=python3.12 bash course.sh picks the interpreter that builds .venv.
set -euo pipefail
cd "$(dirname "$0")"
mode=run
case "${1:-}" in test|lab|chat|book) mode=$1; shift ;; esac

PY=${PYTHON:-python3}
# The course runs on Python 3.10; the tests need 3.11, the oldest that transformers 5.24 (the oracle) supports.
need=10; [ "$mode" = test ] && need=11
if ! "$PY" -c "import sys; sys.exit(sys.version_info < (3, $need))" 2>/dev/null; then
    found=$("$PY" --version 2>/dev/null || echo "not found")
    why=""; [ "$mode" = test ] && why=" for its tests (transformers 5.24, the oracle, needs it)"
    echo "error: the course needs Python 3.$need or newer$why ($PY is: $found)." >&2
    echo "Fix: install Python 3.$need+ (python.org or your package manager); then PYTHON=python3.$need bash course.sh" >&2
    exit 1
fi
# constraints.txt holds the versions CI passed, on Python 3.11+; on 3.10 several of them (numpy 2.4, matplotlib
# 3.11) do not exist, so pip picks the newest versions that support it, within pyproject.toml's bounds
pins="-c constraints.txt"
if ! "$PY" -c "import sys; sys.exit(sys.version_info < (3, 11))"; then
    pins=""
    echo "(Python 3.10: installing the newest versions that support it; CI tests the ones in constraints.txt)"
fi
extras=""; [ "$mode" = test ] && extras="[dev]"
[ "$mode" = book ] && extras="[proofs,book]"  # the pages show the chapters' proofs (transformers, gguf); the engine
stamp=".venv/.installed$extras"
want="$(cat pyproject.toml constraints.txt)"
if [ ! -x .venv/bin/python ]; then
    echo "setting up .venv (first run only)..."
    "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # pip -q prints nothing while it works: say first what comes and how long it takes
    echo "installing torch, this package and its dependencies into .venv (the versions in constraints.txt): a download"\
         "of about 300 MB (a few GB on Linux, where pip takes torch's CUDA build), a minute or more; pip is quiet meanwhile..."
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q $pins -e ".$extras"
    printf '%s' "$want" > "$stamp"
fi

case $mode in
    run)  exec .venv/bin/python main.py "$@" ;;
    # -rfEs: every failure, error and skip (with its reason) in the summary; the 25 slowest tests; a hung test
    # fails after the timeout in pyproject.toml; -n: worker processes, one thread each (TEST_WORKERS=1 for one;
    # bash course.sh test -n 0 runs in this process, for a debugger); worksteal: a worker that runs out of tests
    # takes some of the other's, so a run of long chapter tests does not leave one worker idle at the end
    test) exec .venv/bin/python -m pytest -q -rfEs --durations=25 -n "${TEST_WORKERS:-2}" --dist worksteal "$@" ;;
    lab)  exec .venv/bin/jupyter lab notebooks/ "$@" ;;
    chat) exec .venv/bin/python main.py chat "$@" ;;
    book) exec .venv/bin/python -m web "$@" ;;
esac
