"""The package's shape: the qwen package never imports transformers (the test oracle only), dependencies point one
way (book and practice use qwen; book uses practice only to grade an attempt; qwen uses neither; the programs in app
use qwen and nothing uses them), and what the course writes (checkpoints, figures) goes outside site-packages
after a non-editable install."""
import ast
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import qwen
from practice.pinned import manifest

REPO = Path(__file__).resolve().parent.parent
IMPORT_TRANSFORMERS = re.compile(r"^\s*(from\s+transformers\b|import\s+transformers\b)|"
                                 r"(import_module|__import__)\(\s*['\"]transformers", re.MULTILINE)


def sources(package):
    """Every .py file of a package folder, problem folders included."""
    return sorted((REPO / package).rglob("*.py"))


def imported(path):
    """The modules a file imports, at any depth (a lazy import inside a function counts too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.slow
def test_every_qwen_module_imports_without_transformers():
    """Import every module of the qwen package (found by walking it, so a new file is covered without editing this
    test); none pulls in transformers."""
    code = ("import pkgutil, sys, importlib, qwen\n"
            "names = [m.name for m in pkgutil.walk_packages(qwen.__path__, 'qwen.')]\n"
            "for n in names: importlib.import_module(n)\n"
            "print(len(names)); sys.exit('transformers' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:] or "importing the qwen modules imported transformers"
    files = [p for p in (REPO / "qwen").glob("*.py") if p.name != "__init__.py"]
    assert int(r.stdout.split()[-1]) == len(files) == len(list(pkgutil.walk_packages(qwen.__path__))) > 15


def test_no_qwen_source_imports_transformers():
    """Read, not run: not even a lazy import inside a function, or importlib on the name."""
    for path in sources("qwen"):
        assert not any(n.split(".")[0] == "transformers" for n in imported(path)), path
        assert not IMPORT_TRANSFORMERS.search(path.read_text(encoding="utf-8")), path
    assert IMPORT_TRANSFORMERS.search("    from transformers import X") and \
        IMPORT_TRANSFORMERS.search("importlib.import_module('transformers')")  # the pattern itself works


def test_dependencies_point_one_way():
    """qwen imports neither book nor practice; practice imports nothing from book; book imports practice only in
    book/show.py, where `attempt` grades with the judge."""
    def uses(package, other):
        return {p.relative_to(REPO).as_posix(): sorted(n for n in imported(p) if n.split(".")[0] == other)
                for p in sources(package) if any(n.split(".")[0] == other for n in imported(p))}

    assert uses("qwen", "book") == {} and uses("qwen", "practice") == {}
    assert uses("qwen", "app") == {} and uses("book", "app") == {} and uses("practice", "app") == {}
    assert uses("practice", "book") == {}
    assert uses("book", "practice") == {"book/show.py": ["practice.judge"]}


def test_the_session_is_no_terminal_program():
    """The conversation session (qwen/session.py) talks to no terminal: no argparse, input() or print(); the program
    that does (app/chat.py) is outside the model package."""
    path = REPO / "qwen" / "session.py"
    calls = {node.func.id for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if
             isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "argparse" not in imported(path) and not calls & {"input", "print"}
    assert {"input", "print"} <= {node.func.id for node in ast.walk(ast.parse((REPO / "app" / "chat.py").read_text(
        encoding="utf-8"))) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}  # the check can see


@pytest.mark.slow
def test_writable_paths_leave_site_packages(tmp_path):
    """In a checkout, data/ and data/figures/ are the repository's (git-ignored); installed as a wheel installs them
    (the packages without pyproject.toml beside them), both move to ~/.qwen-by-hand, as the judge's progress does."""
    import book  # noqa: F401 (book.show is the function; its module holds FIGURES)
    from qwen.hub import DATA_DIR

    assert DATA_DIR == REPO / "data" and sys.modules["book.show"].FIGURES == REPO / "data" / "figures"
    site = tmp_path / "site-packages"
    for pkg in ("qwen", "book"):
        shutil.copytree(REPO / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    code = "import sys, book, qwen.hub; print(qwen.hub.DATA_DIR); print(sys.modules['book.show'].FIGURES)"
    env = dict(os.environ, PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    data = tmp_path / "home" / ".qwen-by-hand" / "data"
    assert r.stdout.split() == [str(data), str(data / "figures")]


BUILD = """
import sys, warnings
from setuptools import build_meta
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    built = getattr(build_meta, sys.argv[1])(sys.argv[2])
for w in seen:  # what pip shows a learner as a BuildBackendWarning box, even with -q
    print("WARNING", w.category.__name__, " ".join(str(w.message).split())[:300])
print("BUILT", built)
"""


def build(src, hook, out):
    """Run one setuptools build hook in a fresh process, as pip does: (the file it built, the warnings it gave)."""
    r = subprocess.run([sys.executable, "-c", BUILD, hook, str(out)], cwd=src, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "would be ignored" not in r.stderr + r.stdout, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    return out / lines[-1].removeprefix("BUILT "), [line for line in lines if line.startswith("WARNING ")]


@pytest.mark.slow
def test_the_build_is_quiet_and_ships_every_package_file(tmp_path):
    """The first `bash course.sh` installs the checkout editable: setuptools must give no warning (a data folder not
    declared in pyproject.toml gave a box per file, "Package would be ignored"; the editable import hook gave one
    about folders named like the packages). The sdist, the wheel and the editable wheel are built from a copy of
    the sources, each in its own process; every file of the four packages is in the wheel (a folder left out
    silently would fail here). Takes about 10 s."""
    import tarfile
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "work", ".progress.json", ".progress.json.lock", "*.pyc",
                                    "checksums.json")  # the judge's progress and its lock: the learner's, never shipped
    for pkg in ("qwen", "practice", "book", "app"):  # the packages pyproject.toml lists
        shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    dist = tmp_path / "dist"
    dist.mkdir()
    built, warned = {}, {}
    for hook in ("build_sdist", "build_wheel", "build_editable"):
        built[hook], warned[hook] = build(src, hook, dist)
        assert built[hook].is_file(), built
    assert warned == {"build_sdist": [], "build_wheel": [], "build_editable": []}
    wheel = zipfile.ZipFile(built["build_wheel"]).namelist()
    files = sorted(p.relative_to(src).as_posix() for pkg in ("qwen", "practice", "book", "app")
                   for p in (src / pkg).rglob("*") if p.is_file())
    assert len(files) > 150 and [f for f in files if f not in wheel] == []
    sdist = tarfile.open(built["build_sdist"]).getnames()
    assert [f for f in files if not any(n.endswith("/" + f) for n in sdist)] == []
    # the build writes the sha256 of the pinned files into the wheel (setup.py), for an install without git; the
    # sources hold none, and the editable wheel none (an editable install runs the checkout itself)
    shipped = json.loads(zipfile.ZipFile(built["build_wheel"]).read("practice/checksums.json"))
    assert shipped == manifest(src / "practice", src) and len(shipped["sha256"]) > 100
    assert "qwen/norm.py" in shipped["sha256"] and "qwen/lang.py" not in shipped["sha256"]
    assert not (src / "practice" / "checksums.json").exists()
    assert not [n for n in zipfile.ZipFile(built["build_editable"]).namelist() if n.endswith("checksums.json")]
