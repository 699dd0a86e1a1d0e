"""The answer guard: a learner's file is graded only if it does not use the answer.

The answer is the `qwen` module a problem asks the learner to write (meta.json "answer_modules"), a `qwen` module
that imports one, any problem's solution.py or cases.py, and the references the judge checks against: transformers,
the library the statements name as their source, and gguf, llama.cpp's own Python package, whose quantizer is the
oracle for llama.cpp's block formats (the tests and a problem's cases.py may import it; the learner's code may
not). A file that uses one is refused, not graded, with a message that names what the file did. The command line
(runner.py, in a child process) and a notebook's check() (notebook.py, in the judge's own process) watch the same
way, so they give the same verdict. No torch here.
"""
import ast
import dis
import functools
import os
import sys
import sysconfig
import types
from pathlib import Path

try:
    from practice.imports import PACKAGE, import_closure, imported, module_path
except ImportError:  # in the runner, started without the repository on the path: practice/ is first
    from imports import PACKAGE, import_closure, imported, module_path

REFERENCES = ("transformers", "gguf")  # the libraries the judge checks answers against, for every problem


def _norm(path):
    try:
        return os.path.normcase(os.path.abspath(os.fsdecode(path)))
    except (TypeError, ValueError):
        return None


def _top_imports(tree):
    """The module names a file imports as it loads: its import statements outside function bodies."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from imported(node)
        else:
            todo += ast.iter_child_nodes(node)


class Watch:
    """Sees the learner's code use the answer, three ways: an import or a file read while it runs
    (sys.addaudithook: "import" for a module's first import, "open" for any file read), the import statements of
    its file, and the functions, classes and modules its functions reach (in the judge's own process the answer
    modules are imported already, so no import is seen). One hook per process, installed on first use and inert
    unless a Watch is active (hooks cannot be removed).

    A hit names what the learner's code did: "qwen.mlp" (it imported the answer), or "qwen.model>qwen.mlp" (it
    imported qwen.model, which imports the answer), or a file's name. A `qwen` module that imports an answer module
    counts as the answer: the command line sees its import of it, and this process reads its import statements."""

    active = None
    _installed = False

    def __init__(self, modules, files, root=None, learner=None, on_hit=None):
        self.modules, self.root, self.on_hit = set(modules) | set(REFERENCES), root, on_hit
        self.learner = _norm(learner) if learner else None  # the learner's file; None: a notebook's cells
        self.files = {}
        for f in files:
            for form in {_norm(f), _norm(os.path.realpath(f))} - {None}:
                self.files[form] = self._name(f, root)
        for m in self.modules:  # the module's own source file, for a file read or loaded by path
            f = module_path(m, root) if root else None
            if f is not None:
                for form in {_norm(f), _norm(os.path.realpath(f))} - {None}:
                    self.files[form] = m
        library = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        self.library = tuple(_norm(p) + os.sep for p in library | ({str(Path(root, PACKAGE))} if root else set()))
        self.hits, self._closures = [], {}

    @staticmethod
    def _name(f, root):
        try:
            return Path(f).resolve().relative_to(Path(root).resolve()).as_posix() if root else str(f)
        except ValueError:
            return str(f)

    def _hit(self, name, via=None):
        name = f"{via}>{name}" if name and via and via != name else name
        if name and name not in self.hits and name.split(">")[-1] not in [h.split(">")[-1] for h in self.hits]:
            self.hits.append(name)
            if self.on_hit is not None:
                self.on_hit(self.hits)

    def answer_module(self, name):
        return next((m for m in self.modules if name == m or name.startswith(m + ".")), None)

    def holds(self, name):
        """The answer module that module `name` is or imports (a `qwen` module, by its import statements)."""
        if not isinstance(name, str):
            return None
        hit = self.answer_module(name)
        if hit or not self.root or not name.startswith(PACKAGE + "."):
            return hit
        if name not in self._closures:
            f = module_path(name, self.root)
            names = [k[:-3].replace("/", ".").removesuffix(".__init__")
                     for k in (import_closure([f], self.root) if f else {})]
            self._closures[name] = next(filter(None, map(self.answer_module, names)), None)
        return self._closures[name]

    def _library(self, filename):
        """Code that is not the learner's: Python's, an installed package's, or the course's `qwen` package."""
        return not filename or filename.startswith("<frozen") or any(
            f"{os.sep}{d}-packages{os.sep}" in filename for d in ("site", "dist")) or (
            (_norm(filename) or "").startswith(self.library))

    def _importer(self, frame):
        """The module the learner's code imported that is importing now (the outermost module being loaded below
        the learner's own frame), or None when the learner's code itself imports."""
        outer = None
        while frame is not None:
            file = frame.f_code.co_filename
            if (_norm(file) == self.learner) if self.learner else not self._library(file):
                return outer
            if frame.f_code.co_name == "<module>":
                outer = frame.f_globals.get("__name__")
            frame = frame.f_back
        return None

    def __enter__(self):
        if not Watch._installed:
            sys.addaudithook(_hook)
            Watch._installed = True
        self._outer, Watch.active = Watch.active, self
        return self

    def __exit__(self, *exc):
        Watch.active = self._outer

    def modules_loaded(self, before):
        """Answer modules and files that appeared in sys.modules since `before` (a set of names) unseen by the hook
        (importlib.import_module raises no "import" event)."""
        for name in set(sys.modules) - before:
            self._hit(self.answer_module(name))
            self._hit(self.files.get(_norm(getattr(sys.modules.get(name), "__file__", None) or "")))

    def imports(self, path):
        """The answer among the modules the file at `path` imports as it loads (in this process, where a module
        imported before raises no "import" event): the module, or the `qwen` module that imports it."""
        try:
            tree = ast.parse(Path(path).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return
        for name in _top_imports(tree):
            self._hit(self.holds(name), via=None if self.answer_module(name) else name)

    def uses(self, functions):
        """Answers that the learner's functions reach: a function, class, object or module of an answer module or
        from an answer file, followed through the learner's own code (its helpers, decorators, closures, default
        values, bound objects, partials, callable objects and their attributes, nested functions)."""
        seen, todo = set(), list(functions)
        while todo:
            obj = todo.pop()
            if id(obj) in seen or len(seen) > 100_000:
                continue
            seen.add(id(obj))
            try:
                if not self._answer(obj):
                    todo += self._inside(obj)
            except Exception:  # a learner's object whose attributes raise holds nothing we can see
                pass

    def _inside(self, obj):
        """What `obj` holds that the learner's code may call."""
        if isinstance(obj, functools.partial):
            return [obj.func, *obj.args, *(obj.keywords or {}).values()]
        if isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            return [obj.__func__] + ([obj.__self__] if isinstance(obj, types.MethodType) else [])
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            return list(obj.values() if isinstance(obj, dict) else obj)[:10_000]
        if isinstance(obj, (types.ModuleType, type(None), bool, int, float, str, bytes)):
            return []
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):  # a function: what wraps it always, what it names if the learner's
            held = _cells(obj) + [getattr(obj, "__wrapped__", None)]
            if self._library(code.co_filename):
                return held
            return held + list(getattr(obj, "__defaults__", None) or ()) + list(
                (getattr(obj, "__kwdefaults__", None) or {}).values()) + self._named(code, obj)
        cls = obj if isinstance(obj, type) else type(obj)
        if not self._own(cls):
            return [getattr(obj, "__wrapped__", None)] if callable(obj) else []
        inside = list(vars(cls).values()) + list(cls.__bases__)
        return inside + (list(vars(obj).values()) if not isinstance(obj, type) and hasattr(obj, "__dict__") else [])

    def _own(self, cls):
        """A class the learner wrote: one of its methods is the learner's code."""
        return any(isinstance(getattr(f, "__code__", None), types.CodeType) and not self._library(
            f.__code__.co_filename) for f in (getattr(v, "__func__", v) for v in vars(cls).values()))

    def _named(self, code, f):
        """What the global names of a function's code (and of the code nested in it) hold, and the attributes read
        from each module so named: qwen.image.patchify is qwen, then qwen.image, then its patchify."""
        glob, out, nested = getattr(f, "__globals__", None) or {}, [], [code]
        while nested:
            c = nested.pop()
            nested += [k for k in c.co_consts if isinstance(k, types.CodeType)]
            for name in c.co_names:
                self._hit(self.answer_module(name))  # `from qwen.mlp import MLP` in a body names the module
            for name, *attrs in _chains(c):
                value = glob.get(name)
                out.append(value)
                for attr in attrs:
                    if not isinstance(value, types.ModuleType):
                        break
                    value = vars(value).get(attr)  # vars: a lazy module's __getattr__ would import
                    out.append(value)
        return out

    def _answer(self, obj):
        """Is `obj` the answer (a hit recorded): from an answer module, a `qwen` module that imports one, or an
        answer file."""
        name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
        hit = self.holds(name)
        via = name if hit and self.answer_module(name) is None else None
        code = getattr(obj, "__code__", None)
        if not hit and isinstance(code, types.CodeType):
            hit = self.files.get(_norm(code.co_filename))
        if not hit and isinstance(obj, types.ModuleType):
            hit = self.files.get(_norm(getattr(obj, "__file__", None) or ""))
        self._hit(hit, via)
        return hit is not None


def _chains(code):
    """Each global name the code loads, with the attributes it reads from it straight after: [qwen, image, patchify]."""
    chain = None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain:
            chain.append(ins.argval)
            continue
        if chain:
            yield chain
        chain = [ins.argval] if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") else None
    if chain:
        yield chain


def _cells(f):
    """The values a function's closure holds (a cell not yet filled holds none)."""
    out = []
    for cell in getattr(f, "__closure__", None) or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            pass
    return out


def _hook(event, args):
    watch = Watch.active
    if watch is None or event not in ("import", "open"):
        return
    try:
        if event == "import":
            hit = watch.answer_module(args[0])
        elif isinstance(args[0], (str, bytes, os.PathLike)):
            hit = watch.files.get(_norm(args[0]))
        else:
            return
        if hit:
            watch._hit(hit, via=watch._importer(sys._getframe(1)))
    except Exception:  # an audit hook that raises would break the learner's own file operations
        pass
