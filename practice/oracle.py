"""The judge's oracle, guarded two ways: its files are the course's own, and a learner's file does not use them.

A problem's expected values come from its cases.py and from the `qwen` modules that cases.py imports (206's come
from qwen.rope). Both decide a verdict, so both are checksummed (practice/checksums.json): `import_closure` finds
the `qwen` files by reading import statements, never by importing them. `answer_files` lists what else a learner's
file may not use (guard.py guards it). No torch here.
"""
import ast
import hashlib
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


def imported(tree, own=None):
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
        for name in imported(tree, own):
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
