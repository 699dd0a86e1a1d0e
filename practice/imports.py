"""What a file imports, read from its import statements, never by running it: `import_closure` follows them through
the `qwen` package. pinned.py uses it to find the modules that compute a problem's expected values, guard.py to see
whether a learner's file reaches the answer. The standard library only (setup.py imports pinned.py at build time).
"""
import ast
from pathlib import Path

PACKAGE = "qwen"


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


def import_closure(files, root, skip=()):
    """{"qwen/rope.py": path, ...}: every file of the `qwen` package under `root` that `files` import, directly or
    through each other, with the package's __init__.py; a file named in `skip` ("qwen/lang.py") is neither listed nor
    followed."""
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
                if key in skip:
                    continue
                if key not in found:
                    found[key] = f
                    todo.append((f, sub + (".__init__" if f.name == "__init__.py" else "")))
    return dict(sorted(found.items()))

