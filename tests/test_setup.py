"""The set-up a learner and CI run: constraints.txt pins every dependency (the versions this environment, which CI
builds from it, really has), course.sh refuses an old Python with one clear line, main.py --help prints its own help
once, and CI runs the README's test command and ruff."""
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent


def pins():
    """{normalized name: version} of constraints.txt."""
    out = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_constraints_pin_every_declared_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["dev"]
    names = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", d).group()).lower() for d in declared}
    assert names - set(pins()) == set()
    assert pins()["torch"] == "2.13.0" and pins()["transformers"] == "5.24.0"
    assert "jupyter" not in pins() and {"jupyterlab", "ipykernel", "jinja2"} <= names and "tqdm" not in names


def test_installed_versions_are_the_pinned_ones():
    """Where a pinned package is installed here, it is at the pinned version (torch's local label aside): the
    suite that passes is the suite of these versions."""
    wrong = {}
    for name, version in pins().items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if have.split("+")[0] != version:
            wrong[name] = (have, version)
    assert wrong == {}


def test_course_sh_refuses_an_old_python(tmp_path):
    fake = tmp_path / "python3.9"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python 3.9.18' && exit 0\nexit 1\n")
    fake.chmod(0o755)
    r = subprocess.run(["bash", str(REPO / "course.sh")], env=dict(os.environ, PYTHON=str(fake)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines()[0] == f"error: the course needs Python 3.10 or newer ({fake} is: Python 3.9.18)."
    assert "Fix:" in r.stderr
    r = subprocess.run(["bash", str(REPO / "course.sh"), "test"], env=dict(os.environ, PYTHON=str(fake)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines()[0] == (f"error: the course needs Python 3.11 or newer for its tests "
                                        f"(transformers 5.24, the oracle, needs it) ({fake} is: Python 3.9.18).")


def test_main_help_is_printed_once_and_runs_no_chapter():
    r = subprocess.run([sys.executable, "main.py", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("usage: python main.py") == 1 and "--model" in r.stdout and "=====" not in r.stdout
    r = subprocess.run([sys.executable, "main.py", "--modle", "synthetic"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "unrecognized arguments: --modle" in r.stderr and "=====" not in r.stdout


def test_ci_runs_the_readme_test_command_and_ruff():
    ci = (REPO / ".ci" / "run").read_text()
    assert "\nbash course.sh test\n" in ci and "ruff check" in ci
    assert "bash course.sh test" in (REPO / "README.md").read_text()
    assert re.search(r"pytest -q -rfEs --durations=25", (REPO / "course.sh").read_text())


def test_course_sh_says_what_it_downloads_before_the_quiet_install():
    """pip -q prints nothing for a minute or more: the line before it says what comes, how big and how long."""
    lines = (REPO / "course.sh").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install -q $pins" in line)
    said = " ".join(line for line in lines[:install] if line.strip().startswith(("echo", '"')))
    said = said[said.rindex("echo"):]  # the last echo before the install: the one a learner reads while it waits
    assert re.search(r"about \d+ MB", said) and "torch" in said and "minute" in said, said
