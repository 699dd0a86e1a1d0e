"""No import circles in the course's packages: the import graph of qwen/, book/ and practice/ (app/ where present),
read from the source with `ast`, imports inside functions included, has no cycle.

A circle held open by an import moved into a function still runs (Python finds the half-built module by the time
the function is called), so only the source shows it. Each edge is a module of these packages importing another:
`import qwen.x`, `from qwen.x import y` and `from qwen import x` (x a module) all point at qwen.x; `from qwen import
y` (y a name of qwen/__init__.py) at qwen. The second test plants a circle in a tree of its own and checks the same
functions name it."""
import ast
from itertools import pairwise
from pathlib import Path

from helpers import ROOT

PACKAGES = ("qwen", "book", "practice", "app")


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """{dotted name: file} for every importable .py file of `packages` under `root` (a problem folder such as
    practice/204_rmsnorm/ is not importable by name: its files are loaded by path, so nothing imports them)."""
    found = {}
    for package in packages:
        for file in sorted((root / package).rglob("*.py")):
            parts = file.relative_to(root).with_suffix("").parts
            if not all(p.isidentifier() for p in parts):
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


def _targets(node: ast.AST, name: str, is_package: bool, known) -> list[str]:
    """The modules of `known` that one import statement in module `name` points at."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's package, one level up per extra dot
            here = name.split(".") if is_package else name.split(".")[:-1]
            here = here[:len(here) - (node.level - 1)]
            base = ".".join(here + ([base] if base else []))
        wanted = [f"{base}.{alias.name}" if base else alias.name for alias in node.names]  # a module, or a name in base
        wanted = [w if w in known else base for w in wanted]
    out = []
    for w in wanted:
        while w and w not in known:  # `import qwen.x.y` of a name inside qwen.x: the module is qwen.x
            w = w.rpartition(".")[0]
        if w and w != name and w not in out:
            out.append(w)
    return out


def import_graph(root: Path, packages=PACKAGES) -> dict[str, dict[str, str]]:
    """{module: {imported module: where ("qwen/hub.py:12", with "inside a function" when it is)}} for the modules
    of `packages` under `root`, imports inside functions, classes and conditionals included."""
    files = modules(root, packages)
    graph = {}
    for name, file in files.items():
        edges = graph.setdefault(name, {})
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            up, local = parents.get(node), False
            while up is not None and not local:
                local = isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                up = parents.get(up)
            where = f"{file.relative_to(root).as_posix()}:{node.lineno}" + (" (inside a function)" if local else "")
            for target in _targets(node, name, file.name == "__init__.py", files):
                edges.setdefault(target, where)
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One circle per strongly connected group of modules (Tarjan's algorithm), as [a, b, ..., a]."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_circle(graph, group) for group in groups]


def _circle(graph, group):
    """A shortest circle through the first module (by name) of a strongly connected group: breadth-first back to it."""
    start = min(group)
    previous, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:  # back at the start: the path that led to v, then the step home
                    path = [v]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return path[::-1] + [start]
                if w in group and w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle through {start} in {sorted(group)}")


def describe(graph, circle) -> str:
    """'a -> b -> a' and, for each step, where the import is written."""
    steps = "\n".join(f"    {a} imports {b} at {graph[a][b]}" for a, b in pairwise(circle))
    return " -> ".join(circle) + "\n" + steps


def test_no_import_cycles():
    graph = import_graph(ROOT)
    # the graph is read, not empty: edges that every version of the course has
    assert "qwen.attention" in graph["qwen.model"] and "practice.report" in graph["practice.judge"]
    assert "qwen.norm" in graph["book.ch03"]
    found = cycles(graph)
    assert not found, ("import circles (move each shared name to the module that owns it; an import inside a "
                       "function does not break a circle):\n" + "\n".join(describe(graph, c) for c in found))


def test_a_planted_cycle_is_named(tmp_path):
    """Two modules that import each other, one of them only inside a function and by `from pkg import a`; a third
    imported by both is no circle."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import os\n\nfrom pkg.b import helper\nfrom pkg.sub import c\n")
    (pkg / "b.py").write_text("from .sub.c import VALUE\n\n\ndef helper():\n    from pkg import a\n    return a\n")
    (pkg / "sub" / "c.py").write_text("VALUE = 1\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {"pkg": {}, "pkg.a": {"pkg.b": "pkg/a.py:3", "pkg.sub.c": "pkg/a.py:4"},
                     "pkg.b": {"pkg.sub.c": "pkg/b.py:1", "pkg.a": "pkg/b.py:5 (inside a function)"},
                     "pkg.sub": {}, "pkg.sub.c": {}}
    found = cycles(graph)
    assert found == [["pkg.a", "pkg.b", "pkg.a"]]
    assert describe(graph, found[0]) == ("pkg.a -> pkg.b -> pkg.a\n    pkg.a imports pkg.b at pkg/a.py:3\n"
                                         "    pkg.b imports pkg.a at pkg/b.py:5 (inside a function)")
    (pkg / "b.py").write_text("from .sub.c import VALUE\n")  # the circle removed: nothing to report
    assert cycles(import_graph(tmp_path, ("pkg",))) == []
    (pkg / "sub" / "c.py").write_text("import pkg.a.os\n")  # a longer circle, through a name inside pkg.a
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.sub.c", "pkg.a"]]
