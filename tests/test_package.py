"""The package's shape: the qwen package never imports transformers (the test oracle only), dependencies point one
way (book and practice use qwen; book uses practice only to grade an attempt; qwen uses neither; the programs in app
use qwen and nothing uses them), and what the course writes (checkpoints, figures) goes outside site-packages
after a non-editable install."""
import ast
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import qwen

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
