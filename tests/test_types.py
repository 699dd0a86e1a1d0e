"""The qwen package's public API (qwen/__init__.py's PUBLIC) exists, is fully annotated, and mypy checks it.

The fast tests import each declared name from its module and read its signature: every parameter and the return
annotated (a constructor's return is None by definition; one that takes no argument still says `-> None`, or mypy
would not check its body). The slow ones run mypy as CI does (`python -m mypy`, [tool.mypy] in pyproject.toml) and
prove that it is watching: a copy of a public module with a wrong return annotation, and a caller that passes the
wrong type to a public function, each fail with their error named."""
import ast
import importlib
import importlib.util
import inspect
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import qwen
from helpers import ROOT

# Public names not fully annotated yet (none now). Each must still lack an annotation, so the set can only shrink:
# once a name is annotated, the test below says to remove it from here.
NOT_YET: set[str] = set()


def resolve(module: str, name: str):
    """The object `name` ("f", "Class" or "Class.method") of `module`, and the raw attribute for a method (a
    classmethod, staticmethod or property, as the class body holds it)."""
    owner, raw = importlib.import_module(module), None
    for part in name.split("."):
        raw = inspect.getattr_static(owner, part)
        owner = getattr(owner, part)
    return owner, raw


def missing(module: str, name: str) -> list[str]:
    """What the declared name lacks: 'no such name', or each parameter without an annotation and 'return'."""
    try:
        obj, raw = resolve(module, name)
    except (ImportError, AttributeError):
        return ["no such name"]
    method = "." in name or inspect.isclass(obj)  # a method, or a constructor: self (or cls) needs no annotation
    if isinstance(raw, property):
        obj = raw.fget
    elif isinstance(raw, (classmethod, staticmethod)):
        obj, method = raw.__func__, isinstance(raw, classmethod)
    elif inspect.isclass(obj):
        obj = obj.__init__
    elif not callable(obj):
        return []  # a constant: its type is its value's
    if not inspect.isfunction(obj):  # a constructor written in C (object.__init__): nothing to annotate
        return []
    signature = inspect.signature(obj)
    params = list(signature.parameters.values())[1 if method else 0:]
    lacks = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty and not (obj.__name__ == "__init__" and params):
        lacks.append("return")
    return lacks


def public_names(table=None):
    return [(module, name) for module, names in (table or qwen.PUBLIC).items() for name in names]


def test_import_qwen_imports_nothing():
    """The table is plain strings: qwen/__init__.py has no import statement, so `import qwen` loads no module of the
    package and no torch (a chapter that needs only qwen.lang starts as fast as before)."""
    tree = ast.parse((ROOT / "qwen" / "__init__.py").read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert len(public_names()) > 100 and all(m.startswith("qwen.") for m in qwen.PUBLIC)


def test_every_public_name_exists_and_is_fully_annotated():
    lacking = {f"{module}.{name}": gaps for module, name in public_names() if (gaps := missing(module, name))}
    absent = [n for n, gaps in lacking.items() if gaps == ["no such name"]]
    assert not absent, f"declared in qwen/__init__.py's PUBLIC but not importable: {absent}"
    pending = {n for n in lacking if n in NOT_YET}
    assert pending == NOT_YET, f"annotated now, remove from NOT_YET: {sorted(NOT_YET - pending)}"
    unannotated = {n: gaps for n, gaps in lacking.items() if n not in pending}
    assert not unannotated, f"public names without full annotations (parameter names, or 'return'): {unannotated}"


def test_a_planted_unannotated_name_is_caught(tmp_path, monkeypatch):
    """The same check on a planted module: a function with an unannotated parameter, one without a return
    annotation, a class whose constructor and method lack one each, and a name that does not exist."""
    (tmp_path / "planted_api.py").write_text(textwrap.dedent("""
        LIMIT = 3


        def good(x: int, *rest: str, flag: bool = False, **options: float) -> int:
            return x


        def no_param(x, y: int) -> int:
            return y


        def no_return(x: int):
            return x


        class Thing:
            def __init__(self, size):
                self.size = size

            def grow(self, by: int):
                return self.size + by

            @classmethod
            def make(cls, size: int) -> "Thing":
                return cls(size)

            @property
            def big(self) -> bool:
                return self.size > 3


        class Empty:
            def __init__(self):
                self.items = []
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    table = {"planted_api": ("LIMIT", "good", "no_param", "no_return", "Thing", "Thing.grow", "Thing.make",
                             "Thing.big", "Empty", "gone", "Thing.gone")}
    found = {name: missing(module, name) for module, name in public_names(table)}
    assert found == {"LIMIT": [], "good": [], "no_param": ["x"], "no_return": ["return"], "Thing": ["size"],
                     "Thing.grow": ["return"], "Thing.make": [], "Thing.big": [], "Empty": ["return"],
                     "gone": ["no such name"], "Thing.gone": ["no such name"]}


def mypy(*args, cwd=ROOT):
    """`python -m mypy ARGS` in `cwd`: (exit code, its output)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[dev]' (the version in constraints.txt)")
    r = subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.slow
def test_mypy_passes_on_the_package():
    """CI's command, as it runs it: every module of qwen/ checked, no error. About a minute the first time (mypy
    reads torch's annotations once), a few seconds with its cache in .mypy_cache/."""
    code, out = mypy()
    modules = len(list((ROOT / "qwen").glob("*.py")))
    assert code == 0, out[-6000:]
    assert f"Success: no issues found in {modules} source files" in out, out[-2000:]


@pytest.mark.slow
def test_mypy_fails_on_a_planted_wrong_annotation(tmp_path):
    """qwen/lang.py copied with the project's config, first as it is (clean), then with tr's return annotated as
    int, and beside it a caller that passes an int where tr takes a str: mypy fails and names both lines."""
    (tmp_path / "qwen").mkdir()
    shutil.copy(ROOT / "qwen" / "__init__.py", tmp_path / "qwen" / "__init__.py")
    lang = (ROOT / "qwen" / "lang.py").read_text(encoding="utf-8")
    (tmp_path / "qwen" / "lang.py").write_text(lang, encoding="utf-8")
    (tmp_path / "caller.py").write_text('from qwen.lang import tr\n\nprint(tr("yes", "是"))\n', encoding="utf-8")
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache")]
    code, out = mypy(*config, "qwen/lang.py", "caller.py", cwd=tmp_path)
    assert code == 0, out[-3000:]  # the copy and the caller are clean: what fails below is the plant

    signature = "def tr(en: str, zh: str) -> str:"
    assert lang.count(signature) == 1
    (tmp_path / "qwen" / "lang.py").write_text(lang.replace(signature, signature.replace("-> str", "-> int")),
                                               encoding="utf-8")
    (tmp_path / "caller.py").write_text('from qwen.lang import tr\n\nprint(tr(1, "是"))\n', encoding="utf-8")
    # a cache of its own: the planted file is as long as the clean one, and once (a full run on a loaded machine) mypy
    # reported the caller's error alone, as from the clean file's cache entry
    config[-1] = str(tmp_path / "cache-planted")
    code, out = mypy(*config, "qwen/lang.py", "caller.py", cwd=tmp_path)
    line = lang[:lang.index(signature)].count("\n") + 3  # the return, after the def line and the docstring
    assert code == 1, out
    assert re.search(rf"qwen/lang\.py:{line}: error: Incompatible return value type \(got \"str\", expected \"int\"\)"
                     r"\s+\[return-value\]", out), out
    assert re.search(r'caller\.py:3: error: Argument 1 to "tr" has incompatible type "int"; expected "str"'
                     r"\s+\[arg-type\]", out), out
