"""The set-up a learner and CI run: constraints.txt pins every dependency (the versions this environment, which CI
builds from it, really has), course.sh refuses an old Python with one clear line, main.py --help prints its own help
once, CI runs the README's full test command and ruff, and every pull request gets the default tier, ruff and the
type check, with the official chat templates fetched as the tests pin them."""
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

import official_templates
from official_templates import TEMPLATES

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
    declared = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    names = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", d).group()).lower() for d in declared}
    assert names - set(pins()) == {project["name"]}  # dev names the other extras: qwen-by-hand[proofs,book]
    extras = project["optional-dependencies"]
    assert f"{project['name']}[proofs,book]" in extras["dev"]  # the tests' oracles and engine are the book's
    assert {re.match(r"[a-z]+", d).group() for d in extras["proofs"]} == {"transformers", "gguf"}
    assert pins()["torch"] == "2.13.0" and pins()["transformers"] == "5.24.0"
    assert "jupyter" not in pins() and {"jupyterlab", "ipykernel", "jinja2"} <= names and "tqdm" not in names


def test_installed_versions_are_the_pinned_ones():
    """Where a pinned package is installed here, it is at the pinned version (torch's local label aside): the
    suite that passes is the suite of these versions."""
    wrong = {}
    for name, version in pins().items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if "_vendor" in Path(dist.locate_file("")).parts:  # a copy another package ships inside itself: setuptools
            continue  # (imported by torch's extension builder, chapter 13) puts its own on sys.path, tomli among them
        have = dist.version
        if have.split("+")[0] != version:
            wrong[name] = (have, version)
    assert wrong == {}


@pytest.mark.slow
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


@pytest.mark.slow
def test_main_help_is_printed_once_and_runs_no_chapter():
    r = subprocess.run([sys.executable, "main.py", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("usage: python main.py") == 1 and "--model" in r.stdout and "=====" not in r.stdout
    r = subprocess.run([sys.executable, "main.py", "--modle", "synthetic"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "unrecognized arguments: --modle" in r.stderr and "=====" not in r.stdout


def test_ci_runs_the_readme_full_test_command_and_ruff():
    ci = (REPO / ".ci" / "run").read_text()
    assert "\nbash course.sh test --all\n" in ci and "ruff check" in ci
    for readme in ("README.md", "README.zh.md"):  # both tiers named, the full one as CI runs it
        text = (REPO / readme).read_text()
        assert re.search(r"`bash course.sh test`", text) and "`bash course.sh test --all`" in text, readme
    assert re.search(r"pytest -q -rfEs --durations=25", (REPO / "course.sh").read_text())


def workflow_steps(job):
    """{step name or uses: run command} of a job of .github/workflows/test.yml, and the job's `if`."""
    jobs = yaml.safe_load((REPO / ".github" / "workflows" / "test.yml").read_text())["jobs"]
    return {s.get("name") or s["uses"]: s.get("run", "") for s in jobs[job]["steps"]}, jobs[job].get("if", "")


def test_a_pull_request_gets_ruff_the_type_check_and_the_default_tier():
    steps, when = workflow_steps("quick")
    runs = list(steps.values())
    assert when == "github.event_name == 'pull_request'"
    assert "bash course.sh test" in runs and "bash course.sh test --all" not in runs
    assert ".venv/bin/ruff check ." in runs
    assert any("mypy" in r for r in runs), runs
    steps, when = workflow_steps("full")
    assert when == "github.event_name != 'pull_request'" and "bash .ci/run" in steps.values()
    on = yaml.safe_load((REPO / ".github" / "workflows" / "test.yml").read_text())[True]  # YAML 1.1 reads `on` as True
    assert set(on) == {"pull_request", "push", "schedule", "workflow_dispatch"}


def test_the_book_is_built_on_the_real_model_with_the_proofs_oracles():
    """The published book: the course installed with the `proofs` extra (transformers and gguf, so each page shows
    its proofs), the real model's hub id downloaded into a cache keyed on its revision before the build, and the
    build on that model, offline, one notebook at a time."""
    from qwen.config import DEFAULT_MODEL

    text = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    steps = text["jobs"]["build"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert text["env"]["MODEL"] == DEFAULT_MODEL
    assert '[ "$mode" = book ] && extras="[proofs,book]"' in (REPO / "course.sh").read_text()
    setup = runs.index("bash course.sh book --help")
    revision = next(i for i, s in enumerate(steps) if s.get("id") == "revision")
    assert "model_info('$MODEL').sha" in runs[revision] and '"$GITHUB_OUTPUT"' in runs[revision]
    cache = next(i for i, s in enumerate(steps) if s.get("with", {}).get("path") == "~/.cache/huggingface/hub")
    assert steps[cache]["with"]["key"] == "model-${{ env.MODEL }}-${{ steps.revision.outputs.sha }}"
    download = next(i for i, r in enumerate(runs) if "find_model('$MODEL')" in r)
    build = next(i for i, r in enumerate(runs) if r.startswith("bash course.sh book --model"))
    assert setup < revision < cache < download < build
    assert '--model "$MODEL" --jobs 1' in runs[build] and steps[build]["env"] == {"HF_HUB_OFFLINE": "1"}
    assert "HF_HUB_OFFLINE" not in text.get("env", {})  # the download must reach the hub


@pytest.mark.parametrize("job", ["quick", "full"])
def test_the_template_cache_is_keyed_on_the_pins_and_fetched_where_the_tests_read(job):
    """The cache's key is the pinned digests (a new pin fetches anew), its folder is $QWEN_CHAT_TEMPLATES, and a
    miss runs the fetch into that folder."""
    text = yaml.safe_load((REPO / ".github" / "workflows" / "test.yml").read_text())
    steps = text["jobs"][job]["steps"]
    key = next(s for s in steps if s.get("id") == "templates")["run"]
    cache = next(s for s in steps if s.get("id") == "cache")
    fetch = next(s for s in steps if "official_templates.py \"$QWEN_CHAT_TEMPLATES\"" in s.get("run", ""))
    assert "python tests/official_templates.py --key" in key and '"$GITHUB_OUTPUT"' in key
    assert cache["with"] == {"path": "${{ env.QWEN_CHAT_TEMPLATES }}", "key": "${{ steps.templates.outputs.key }}"}
    assert fetch["if"] == "steps.cache.outputs.cache-hit != 'true'"
    assert text["env"]["QWEN_CHAT_TEMPLATES"]
    for digest, _ in TEMPLATES.values():  # the key names every pinned digest
        assert digest[:16] in official_templates.key()


def fake_wheel(path, texts):
    """A zip laid out as the trl wheel: {path in the wheel: bytes}."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, data in texts.items():
            z.writestr(name, data)
    return path


def test_the_fetch_writes_the_pinned_templates_and_refuses_others(tmp_path):
    """From a wheel laid out as trl's, the fetch writes the two templates under the names the tests read, each with
    the pinned sha256; a wheel with one byte changed writes nothing. (The real download is pip's: see the module.)"""
    from helpers import chat_template

    texts = {official_templates.SOURCE[name]: chat_template(name).encode("utf-8") for name in TEMPLATES}
    out = tmp_path / "out"
    official_templates.extract(fake_wheel(tmp_path / "trl.whl", texts), out)
    for name, (digest, _) in TEMPLATES.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    first = official_templates.SOURCE["qwen3_5_4b_and_up.jinja"]
    texts[first] = texts[first].replace(b"enable_thinking", b"enable_thinkinG", 1)
    with pytest.raises(SystemExit, match="not the pinned"):
        official_templates.extract(fake_wheel(tmp_path / "bad.whl", texts), tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_course_sh_says_what_it_downloads_before_the_quiet_install():
    """pip -q prints nothing for a minute or more: the line before it says what comes, how big and how long."""
    lines = (REPO / "course.sh").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install -q $pins" in line)
    said = " ".join(line for line in lines[:install] if line.strip().startswith(("echo", '"')))
    said = said[said.rindex("echo"):]  # the last echo before the install: the one a learner reads while it waits
    assert re.search(r"about \d+ MB", said) and "torch" in said and "minute" in said, said


@pytest.mark.slow
def test_the_default_tier_leaves_the_slow_tests_out_and_says_so(tmp_path):
    """A folder with the suite's conftest and three tests: the default run passes the fast one and names what it
    left out; --all runs the slow one too; a test that reads a chapter's run without the mark is refused."""
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path)  # the suite's hooks and fixtures, its settings below
    (tmp_path / "test_tiers.py").write_text("import pytest\n\n\ndef test_fast():\n    pass\n\n\n"
                                            "@pytest.mark.slow\ndef test_slow():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # a run of its own, not a worker
    env["PYTHONPATH"] = str(REPO / "tests")

    def pytest_run(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
                               str(tmp_path), "-p", "no:cacheprovider", "-n", "0", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    r = pytest_run("-q")
    assert r.returncode == 0 and "1 passed, 1 deselected" in r.stdout, r.stdout[-2000:]
    assert "not run in this tier, marked slow: 1 tests (test_tiers.py 1); bash course.sh test --all" in r.stdout
    r = pytest_run("-q", "--all")
    assert r.returncode == 0 and "2 passed" in r.stdout and "not run in this tier" not in r.stdout, r.stdout[-2000:]
    (tmp_path / "test_unmarked.py").write_text("def test_reads_a_chapter(chapter_outputs):\n    pass\n")
    r = pytest_run("-q", "--all")
    assert r.returncode == 4 and "not marked slow" in r.stderr and "test_reads_a_chapter" in r.stderr, r.stderr[-2000:]
