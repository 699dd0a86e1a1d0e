"""The judge's oracle, guarded two ways: its files are the course's own, and a learner's file does not use them.

A problem's expected values come from its cases.py and from the `qwen` modules that cases.py imports (206's come
from qwen.rope). Both decide a verdict, so both are checksummed (practice/checksums.json): `import_closure` finds
the `qwen` files by reading import statements, never by importing them. And the `qwen` module a problem asks the
learner to write (meta.json "answer_modules"), or any problem's solution.py or cases.py, is the answer: a learner's
file that imports it is refused, not graded (`Watch`, in the runner's process). No torch here.
"""
import ast
import hashlib
import os
import sys
import types
from pathlib import Path

PACKAGE = "qwen"


def sha256(path):
    """Line endings hashed as "\\n", so a checkout that writes "\\r\\n" (git on Windows) matches."""
    return hashlib.sha256(Path(path).read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def package_root(default):
    """The folder that holds the `qwen` package Python imports here (the one the cases will use), else `default`."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(PACKAGE)  # finds, does not import
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    return Path(default)


def module_path(name, root):
    """The file of module `name` (qwen.rope) under `root` (the folder holding qwen/), or None."""
    base = Path(root, *name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _imported(tree, own=None):
    """The module names an AST imports anywhere (function bodies too); `own` resolves relative imports."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and own:
                parts = own.split(".")[:-node.level] if not own.endswith(".__init__") else own.split(".")[:-1]
                base = ".".join(parts + ([base] if base else []))
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # `from qwen import rope` names a module


def import_closure(files, root):
    """{"qwen/rope.py": path, ...}: every file of the `qwen` package under `root` that `files` import, directly or
    through each other, with the package's __init__.py."""
    found, todo = {}, [(Path(f), None) for f in files]
    while todo:
        path, own = todo.pop()
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for name in _imported(tree, own):
            if name != PACKAGE and not name.startswith(PACKAGE + "."):
                continue
            parts = name.split(".")
            for k in range(1, len(parts) + 1):  # qwen, qwen.rope: each package on the way is imported too
                sub = ".".join(parts[:k])
                f = module_path(sub, root)
                if f is None:
                    break
                key = f.relative_to(root).as_posix()
                if key not in found:
                    found[key] = f
                    todo.append((f, sub + (".__init__" if f.name == "__init__.py" else "")))
    return dict(sorted(found.items()))


# ---------------------------------------------------------------- the answer: what a learner's file may not use

def answer_files(practice):
    """Every problem's solution.py and cases.py: each is an answer to some exercise."""
    return sorted(str(f) for f in Path(practice).glob("[0-9][0-9][0-9]_*/*.py") if f.name in ("solution.py",
                                                                                                "cases.py"))


def _norm(path):
    try:
        return os.path.normcase(os.path.abspath(os.fsdecode(path)))
    except (TypeError, ValueError):
        return None


class Watch:
    """Sees the learner's code import an answer module or open an answer file (sys.addaudithook: "import" for a
    module's first import, "open" for any file read, source or not). One hook per process, installed on first use
    and inert unless a Watch is active (hooks cannot be removed). `shown(path)` names a file for the learner."""

    active = None
    _installed = False

    def __init__(self, modules, files, root=None):
        self.modules = set(modules)
        self.files = {}
        for f in files:
            for form in {_norm(f), _norm(os.path.realpath(f))} - {None}:
                self.files[form] = self._name(f, root)
        for m in self.modules:  # the module's own source file, for a file read or loaded by path
            f = module_path(m, root) if root else None
            if f is not None:
                for form in {_norm(f), _norm(os.path.realpath(f))} - {None}:
                    self.files[form] = m
        self.hits = []

    @staticmethod
    def _name(f, root):
        try:
            return Path(f).resolve().relative_to(Path(root).resolve()).as_posix() if root else str(f)
        except ValueError:
            return str(f)

    def _hit(self, name):
        if name and name not in self.hits:
            self.hits.append(name)

    def answer_module(self, name):
        return next((m for m in self.modules if name == m or name.startswith(m + ".")), None)

    def __enter__(self):
        if not Watch._installed:
            sys.addaudithook(_hook)
            Watch._installed = True
        self._outer, Watch.active = Watch.active, self
        return self

    def __exit__(self, *exc):
        Watch.active = self._outer

    def modules_loaded(self, before):
        """Answer modules and files that appeared in sys.modules since `before` (a set of names)."""
        for name in set(sys.modules) - before:
            self._hit(self.answer_module(name))
            self._hit(self.files.get(_norm(getattr(sys.modules.get(name), "__file__", None) or "")))

    def uses(self, functions):
        """Answers that the learner's functions reach through their globals (for grading in the judge's own
        process, where the answer modules are imported already, so no import is seen): a function, class or
        module of an answer module, or code from an answer file, followed through the learner's own helpers."""
        seen, todo = set(), [f for f in functions]
        while todo:
            f = todo.pop()
            while hasattr(f, "func") and not hasattr(f, "__code__"):  # functools.partial
                todo += [a for a in list(getattr(f, "args", ())) + list((getattr(f, "keywords", None) or {})
                                                                        .values()) if callable(a)]
                f = f.func
            if id(f) in seen:
                continue
            seen.add(id(f))
            code = getattr(f, "__code__", None)
            if self._answer(f):
                continue
            if code is None:
                continue
            glob = getattr(f, "__globals__", {})
            names = set(code.co_names)
            for const in code.co_consts:  # nested functions and lambdas
                if isinstance(const, types.CodeType):
                    names |= set(const.co_names)
            for name in names:
                self._hit(self.answer_module(name))  # `from qwen.mlp import MLP` in a body names the module
                value = glob.get(name)
                if isinstance(value, types.ModuleType):
                    if not self._answer(value):
                        for attr in names:  # qwen.rope.apply_rope: the package, then its attribute
                            sub = getattr(value, attr, None)
                            if isinstance(sub, types.ModuleType) or callable(sub):
                                self._answer(sub)
                elif callable(value):
                    if not self._answer(value) and getattr(value, "__module__", None) == getattr(f, "__module__",
                                                                                                  None):
                        todo.append(value)  # the learner's own helper: look inside it too

    def uses_globals(self, space):
        """Answers among a file's global names (for grading in the judge's process, where importing an answer
        module again is not seen): `import qwen.mlp` binds qwen, whose attribute mlp is the answer."""
        for value in list(space.values()):
            if isinstance(value, types.ModuleType):
                if self._answer(value):
                    continue
                for m in self.modules:
                    sub = value
                    for part in m.split(".")[1:] if m.split(".")[0] == value.__name__ else ():
                        sub = getattr(sub, part, None)
                    if sub is not value and isinstance(sub, types.ModuleType):
                        self._answer(sub)
            elif callable(value) and getattr(value, "__module__", None) != space.get("__name__"):
                self._answer(value)

    def _answer(self, obj):
        name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        hit = self.answer_module(name) if isinstance(name, str) else None
        code = getattr(obj, "__code__", None)
        hit = hit or (self.files.get(_norm(code.co_filename)) if code is not None else None)
        if isinstance(obj, types.ModuleType):
            hit = hit or self.files.get(_norm(getattr(obj, "__file__", None) or ""))
        self._hit(hit)
        return hit is not None


def _hook(event, args):
    watch = Watch.active
    if watch is None or event not in ("import", "open"):
        return
    try:
        if event == "import":
            watch._hit(watch.answer_module(args[0]))
        elif isinstance(args[0], (str, bytes, os.PathLike)):
            watch._hit(watch.files.get(_norm(args[0])))
    except Exception:  # an audit hook that raises would break the learner's own file operations
        pass
