"""Grading in this process, for notebooks: check(N, functions or a namespace) and grade_in_process.

The functions live in the caller's process, so they run here (runner.run, without the child's transport):
a case that hangs cannot be stopped, and this grading trusts the caller's torch (a notebook that patches
torch's comparisons can fool it). The cases are still built under fp32 as torch's default dtype.
"""
import copy
import functools
import inspect
import sys
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path

from practice import messages as say
from practice.events import Report, grade_events
from practice.guard import Watch
from practice.limits import LOAD_LIMIT
from practice.messages import detect_lang, speaking
from practice.problems import Problem, find_problem, verified
from practice.report import Printer, shown_path
from practice.store import clean_stale_temp, progress_path, record, temp_dir
from qwen.lang import tr

# ---------------------------------------------------------------- grading in this process (notebooks)

def check(problem: int | str, *objects: object, lang: str | None = None, save: bool = True,
          **functions: Callable) -> bool:
    """Grade functions defined in a notebook (or any Python session) and print the verdict; True if Accepted.

    check(204, rms_norm, gated_rms_norm, l2norm)   # functions (or functools.partial), matched by their names
    check(204, globals())                           # or a namespace: a dict, a module, or an object (an nn.Module
                                                    # instance, say) whose attributes are the functions
    check(204, rms_norm=my_norm, ...)               # or explicit names

    It runs in this process, since the functions live here. So a case that hangs cannot be stopped (interrupt the
    kernel; the line above the verdict says which case is running), and a case slower than the limit is marked
    Time Limit Exceeded only once it returns. Functions that are, or call, the problem's own solution.py are graded
    and shown, but not recorded as solved: that is the course's work, not the learner's.
    """
    with speaking(detect_lang(lang)):  # lang, else QWEN_LANG (the Chinese notebooks set it), else the locale
        prob = find_problem(problem)
        if prob is None or not verified(prob):
            return False
        space, why = namespace(prob, objects, functions)
        if why:
            print(why)
            return False
        print(say.in_process())
        report = grade_in_process(prob, space, progress=_progress_line())
        save = save and report.reference is None  # the problem's own reference is graded, never recorded
        Printer().report(report, tr("notebook", "笔记本"), None, shown_path(progress_path()) if save else None)
        if report.reference is not None:
            print(say.reference_not_recorded(report.reference))
        if save:
            record(report)
        return report.verdict == "AC"


def _name(obj):
    while isinstance(obj, functools.partial):
        obj = obj.func
    return getattr(obj, "__name__", None)


def namespace(prob: Problem, objects: Iterable[object],
              functions: dict[str, Callable]) -> tuple[dict[str, Callable] | None, str | None]:
    """check()'s arguments as {name: callable}, or (None, one line saying what check() takes); plug_in takes the
    same arguments."""
    wanted, space = prob.functions, {}
    names = say.joined(wanted)
    takes = tr(f"check() takes the functions {names} (or functools.partial of them), a namespace that defines them "
               f"(globals(), a module, an object such as an nn.Module instance), or name=function",
               f"check() 接受的参数：函数 {names}（或它们的 functools.partial）、定义了它们的命名空间（globals()、"
               f"模块、nn.Module 实例这样的对象），或者“函数名=函数”形式的关键字参数")
    for obj in objects:
        if isinstance(obj, dict):
            space.update(obj)
        elif isinstance(obj, types.ModuleType):
            space.update(vars(obj))
        elif isinstance(obj, functools.partial) or inspect.isroutine(obj):
            name = _name(obj)
            if name not in wanted:
                return None, tr(f"check(): {name} is not one of {names}; pass it by name: "
                                f"check({prob.number}, {wanted[0]}={name})",
                                f"check()：{name} 不是 {names} 中的一个；请按名字传入："
                                f"check({prob.number}, {wanted[0]}={name})")
            space[name] = obj
        elif any(callable(getattr(obj, n, None)) for n in wanted):
            space.update({n: getattr(obj, n) for n in wanted if callable(getattr(obj, n, None))})
        elif callable(obj) and len(wanted) == 1:
            space[wanted[0]] = obj
        else:
            return None, tr(f"{takes}; got {type(obj).__name__} {_short(obj)}",
                            f"{takes}；收到的是 {type(obj).__name__} {_short(obj)}")
    for name in functions:
        if name not in wanted:
            return None, tr(f"check(): {name} is not one of {names}", f"check()：{name} 不是 {names} 中的一个")
    space.update(functions)
    return space, None


def _short(obj):
    try:
        text = repr(obj)
    except Exception:
        text = "?"
    return text if len(text) <= 40 else text[:37] + "..."


def _progress_line():
    """Overwrites one line with the case being graded: a hanging case stays on screen, with what to do."""
    def show(i, n, case, done=False):
        if done:
            print("\r" + " " * 79 + "\r", end="", flush=True)
        else:
            text = say.running(i + 1, n, say.case_label(case.label), case.fn)
            print("\r" + text[:79].ljust(79), end="", flush=True)
    return show


def grade_in_process(prob: Problem, space: dict[str, Callable] | None = None, path: str | Path | None = None,
                     progress: Callable | None = None) -> Report:
    """Grade the functions in `space`, or in the file at `path` imported here, without a child process.
    progress(i, n, case) is called as each case starts, and progress(None, n, None, done=True) at the end."""
    from practice import runner  # runner and grading import torch: imported when something is graded
    from practice.grading import float32_default

    report = Report(prob, Path(path) if path else "notebook", prob.time_limit, LOAD_LIMIT, in_process=True,
                    memory_limit=prob.memory_limit)
    t0 = time.perf_counter()
    events, results = [], {}
    clean_stale_temp()
    with temp_dir() as tmp:
        cases = prob.cases(Path(tmp))
        report.total_limit = prob.total_limit(len(cases))

        def emit(ev):
            if progress is not None and ev["ev"] == "begin":
                progress(ev["i"], len(cases), cases[ev["i"]])
            events.append(dict(ev, _at=time.monotonic()))
        # a namespace's functions may be the problem's own reference (the course's tests grade it so): only
        # the answer modules and the other problems' files count as the answer there
        answers = prob.answers(path if path is not None else prob.folder / "solution.py")
        watch = Watch(answers["modules"], answers["files"], answers["root"], path)
        report.reference = _reference(prob, answers["root"], space if path is None else None, path)
        if path is not None:  # as the runner loads it, where the first answer seen ends the run
            before = set(sys.modules)
            with watch:
                module, failure = runner.load_file(path)
            watch.modules_loaded(before)
            watch.imports(path)  # here a module imported before raises no "import" event
            space = vars(module) if module else {}
            events += [failure] if failure and not watch.hits else []
        missing = [n for n in prob.functions if not callable((space or {}).get(n))]
        if missing and not events and not watch.hits:
            events.append({"ev": "missing", "names": missing})
        if not events:
            watch.uses([space[n] for n in prob.functions if n not in missing])
            if watch.hits:
                events.append({"ev": "answer", "names": list(watch.hits)})
        if not events:
            events.append({"ev": "loaded"})
            calls = [(c.fn, copy.deepcopy(c.values())) for c in cases]  # the learner may change them in place
            try:
                with watch:
                    runner.run({n: space[n] for n in prob.functions}, calls, emit, results.__setitem__,
                               str(Path(path).resolve()) if path else "<notebook>", reraise=(KeyboardInterrupt,),
                               answers=lambda: watch.hits)
            finally:
                if progress is not None:
                    progress(None, len(cases), None, done=True)
        with float32_default():  # the known mistakes run here too
            grade_events(prob, cases, events, results.get, report)
    report.seconds = time.perf_counter() - t0
    return report


def _reference(prob: Problem, root: str, space: dict[str, Callable] | None, path: str | Path | None) -> str | None:
    """The problem's own solution.py, named as the guard names files, when it is what is graded: the file at
    `path`, or a file the functions in `space` are or reach (imported by module name, by path, or called from a
    cell's own function); else None."""
    own = prob.folder / "solution.py"
    if path is not None:
        return Watch._name(own, root) if Path(path).resolve() == own.resolve() else None
    seen = Watch((), [own], root)  # this watch's answer is the solution file alone
    seen.uses([space[n] for n in prob.functions if callable((space or {}).get(n))])
    name = Watch._name(own, root)
    return name if any(hit.split(">")[-1] == name for hit in seen.hits) else None
