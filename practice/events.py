"""The runner's events as the judge accepts them (Protocol), and the verdicts they give (grade_events): a Report,
with a CaseResult per case.

Both ways of grading share this: a child process's events arrive through `supervise`, a notebook's from
runner.run called in-process. No torch at import.
"""
import math
import re
from dataclasses import dataclass, field

from practice.limits import slack
from qwen.lang import tr

# ---------------------------------------------------------------- what a grading found

@dataclass(frozen=True)
class Outcome:
    """How a run or a case ended when not with a result to compare; report.py says it, by kind.

    kind           detail                                  when
    compile_error  the compiler's message                  the file does not compile, or one of its imports fails
    missing        the names the file lacks (a tuple)      a function the starter defines is gone
    answer         what the file used (a tuple)            it uses the answer (guard.py): "qwen.model>qwen.mlp"
    raised         the learner's traceback                 an exception, as the file loads or in a case (`exit`:
                                                           the argument of a sys.exit)
    load_time      -                                       importing the file ran past its limit
    total          -                                       the cases together ran past their limit
    died           the exit status (negative: a signal)    the process ended during a case
    died_load      the exit status                         ... while the file was being imported
    died_between   the exit status                         ... between two cases
    garbled        why                                     the runner's events stopped making sense
    stalled        the state the judge waited in           a wait ran out while no learner code was expected to run
    judge_error    why                                     the judge itself could not run the file
    """
    kind: str
    detail: object = ""
    exit: str | None = None


def died(rc, stopped=None, garbled=None, kind="died"):
    """The Outcome of a run that ended early: garbled events, a wait that ran out, else the process's end."""
    if garbled:
        return Outcome("garbled", garbled)
    return Outcome("stalled", stopped) if stopped else Outcome(kind, rc)


@dataclass
class CaseResult:
    case: object
    verdict: str | None = None  # AC, WA, RE, TLE; None: not run
    time: float | None = None  # seconds inside the learner's function
    got: object = None
    mismatch: object = None
    mutated: bool = False
    outcome: Outcome | None = None  # why it is a Runtime Error or over the total limit
    hints: list = field(default_factory=list)


@dataclass
class Report:
    problem: object
    file: object  # a Path, or "notebook"
    time_limit: float = 0.0  # seconds per case
    load_limit: float = 0.0  # seconds to import the learner's file
    verdict: str = "AC"  # AC, WA, RE, TLE, CE; JE when the judge itself could not run
    results: list = field(default_factory=list)
    outcome: Outcome | None = None  # for a verdict given before any case, or after the run ended between cases
    output: bytes = b""  # the head of what the learner printed
    output_bytes: int = 0
    seconds: float = 0.0
    in_process: bool = False
    memory_limit: int = 0  # MiB
    total_limit: float = 0.0  # seconds for all cases together
    reference: str | None = None  # the problem's own solution.py, when it is what was graded: shown, never recorded

    @property
    def passed(self):
        return sum(r.verdict == "AC" for r in self.results)

    @property
    def failure(self):
        return next((r for r in self.results if r.verdict not in ("AC", None)), None)


# ---------------------------------------------------------------- the runner's events, as the judge accepts them

class Garbled(Exception):
    """An event the runner cannot have sent: the learner's code wrote to the judge's private pipe."""


def _text(value, cap=20_000):
    if value is None:
        return None
    if not isinstance(value, str):
        kind = type(value).__name__
        raise Garbled(tr(f"a {kind} where text belongs", f"本该是文本，收到的却是 {kind}"))
    return value[:cap]


class Protocol:
    """The runner's events in the one order it sends them: ready, then loaded (or compile_error, missing,
    load_error, answer), then begin i, ret i, end i for each case, then done (or, after a case, answer); each
    reduced to its known fields, checked. Anything else raises Garbled. `state` names what the judge waits for,
    so each wait gets one deadline."""

    LIMIT = {"start": "startup", "ready": "load", "between": "load", "begun": "case", "returned": "load"}

    def __init__(self, n):
        self.n, self.i, self.state = n, -1, "start"

    def accept(self, ev):
        if not isinstance(ev, dict):
            raise Garbled(tr("a line that is not an event", "收到的一行不是事件"))
        kind, st, i = ev.get("ev"), self.state, ev.get("i")
        if st == "start" and kind == "ready":
            self.state = "ready"
            return {"ev": kind}
        if kind == "answer" and st in ("ready", "between"):
            names = ev.get("names")
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                raise Garbled(tr("answer names that are not a list of text", "答案的名字不是文本列表"))
            self.state = "over"
            return {"ev": kind, "names": [n[:200] for n in names[:20]]}
        if st == "ready" and kind in ("loaded", "compile_error", "missing", "load_error"):
            if kind == "missing":
                names = ev.get("names")
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise Garbled(tr("missing names that are not a list of text", "缺少的名字不是文本列表"))
                out = {"ev": kind, "names": [n[:100] for n in names[:50]]}
            else:
                out = {"ev": kind, "msg": _text(ev.get("msg")), "exc": _text(ev.get("exc"), 200),
                       "tb": _text(ev.get("tb")), "code": _text(ev.get("code"), 200)}
            self.state = "between" if kind == "loaded" else "over"
            return out
        if st == "between" and kind == "done" and self.i + 1 == self.n:
            self.state = "over"
            return {"ev": kind}
        if type(i) is not int or i != (self.i + 1 if kind == "begin" else self.i):
            shown, case = str(kind)[:20], str(i)[:20]
            raise Garbled(tr(f"an event {shown!r} for case {case}, where the judge expected {self._expected()}",
                             f"收到用例 {case} 的事件 {shown!r}，评测器此时等待的是：{self._expected()}"))
        if st == "between" and kind == "begin" and i < self.n:
            self.i, self.state = i, "begun"
            return {"ev": kind, "i": i}
        if st == "begun" and kind == "ret":
            t = ev.get("t")
            if type(t) not in (int, float) or not math.isfinite(t) or t < 0:
                shown = str(t)[:20]
                raise Garbled(tr(f"a case time that is not a number of seconds: {shown!r}",
                                 f"用例的用时不是秒数：{shown!r}"))
            self.state = "returned"
            return {"ev": kind, "i": i, "t": float(t)}
        if st == "returned" and kind == "end":
            ok, mutated = ev.get("ok"), ev.get("mutated", False)
            if type(ok) is not bool or type(mutated) is not bool:
                raise Garbled(tr("an end event without a true/false outcome", "end 事件没有 true/false 结果"))
            out = {"ev": kind, "i": i, "ok": ok, "mutated": mutated, "exc": _text(ev.get("exc"), 200),
                   "tb": _text(ev.get("tb")), "code": _text(ev.get("code"), 200)}
            self.state = "between"
            return out
        shown = str(kind)[:20]
        raise Garbled(tr(f"an event {shown!r}, where the judge expected {self._expected()}",
                         f"收到事件 {shown!r}，评测器此时等待的是：{self._expected()}"))

    def _expected(self):
        i, following = self.i, self.i + 1
        return {"start": "'ready'", "ready": tr("the file's import", "导入文件"),
                "begun": tr(f"case {i}'s return", f"用例 {i} 返回"),
                "returned": tr(f"case {i}'s end", f"用例 {i} 结束"), "over": tr("nothing more", "不再有任何事件")}.get(
            self.state, "'done'" if following == self.n else tr(f"case {following}'s begin",
                                                                    f"用例 {following} 开始"))


# ---------------------------------------------------------------- from the runner's events to verdicts

def grade_events(problem, cases, events, output, report, stopped=None, rc=None, garbled=None):
    """Per-case verdicts from the runner's events (both ways of running share this).

    output(i): the learner's result for case i. stopped: the Protocol state the judge was waiting in when it
    killed the runner for taking too long. rc: the runner's exit status when it ended without finishing (negative:
    a signal). garbled: why the events stopped making sense. An event's "_at" is the judge's own clock when it
    arrived."""
    from practice.grading import grade  # grading and mistakes import torch: only when something is graded
    from practice.mistakes import diagnose

    def raised(ev):
        return Outcome("raised", ev.get("tb") or "", ev.get("code") if ev.get("exc") == "SystemExit" else None)

    report.results = [CaseResult(c) for c in cases]
    if not report.total_limit:
        report.total_limit = problem.total_limit(len(cases), report.time_limit)
    loaded, current, begun_at, used = False, None, None, 0.0
    for ev in events:
        kind = ev.get("ev")
        if kind in ("compile_error", "missing", "answer", "load_error"):
            # decided before any case ran, or (answer) after one: nothing the file returned is graded
            report.results = [CaseResult(c) for c in cases]
            report.verdict, report.outcome = {
                "compile_error": ("CE", Outcome("compile_error", ev.get("msg") or "")),
                "missing": ("CE", Outcome("missing", tuple(ev.get("names", [])))),
                "answer": ("NG", Outcome("answer", tuple(ev.get("names", [])))),
                "load_error": ("RE", raised(ev))}[kind]
            return report
        if kind == "loaded":
            loaded = True
        elif kind == "begin":
            current, begun_at = ev["i"], ev.get("_at")
        elif kind == "ret":
            r = report.results[ev["i"]]
            r.time = ev["t"]
            if begun_at is not None and ev.get("_at") is not None:
                seen = ev["_at"] - begun_at  # the judge's own clock: a learner's replaced clock cannot fool it
                if seen > report.time_limit + slack(report.time_limit) and seen > r.time:
                    r.time = seen
            used += r.time
        elif kind == "end":
            r, current = report.results[ev["i"]], None
            if not ev.get("ok"):
                r.verdict, r.outcome = "RE", raised(ev)
                r.hints = error_hints(problem, ev.get("tb") or "")
                continue
            try:
                r.got, r.mutated = output(ev["i"]), bool(ev.get("mutated"))
            except Exception as e:  # the saved result is gone, replaced or unreadable (the learner's code did it?)
                r.verdict = "RE"
                why = f"{type(e).__name__}: {str(e)[:300]}"
                r.outcome = Outcome("raised", tr(f"the judge could not read your result back: {why}",
                                                 f"评测器没能读回你的结果：{why}"))
                continue
            r.mismatch = grade(r.case, r.got)
            if r.mismatch is not None:
                r.verdict, r.hints = "WA", diagnose(problem, r.case, r.got)
            elif r.mutated:
                r.verdict = "WA"
            elif r.time is not None and r.time > report.time_limit:
                r.verdict = "TLE"
            elif used > report.total_limit:  # in time for this case, but not for all of them together
                r.verdict, r.outcome = "TLE", Outcome("total")
            else:
                r.verdict = "AC"
    if not loaded:  # the learner's file was being imported: whatever ended the run, it is the learner's
        report.verdict = "TLE" if stopped == "ready" else "RE"
        report.outcome = Outcome("load_time") if stopped == "ready" else died(rc, stopped, garbled, "died_load")
        return report
    if current is not None:  # begun but never ended: stopped by the judge, garbled, or the process died
        r = report.results[current]
        if r.verdict is None:
            r.verdict = "TLE" if stopped in ("begun", "total") else "RE"
            r.outcome = (None if stopped == "begun" else Outcome("total") if stopped == "total"
                         else died(rc, stopped, garbled))
    failure = report.failure
    if failure:
        report.verdict = failure.verdict
    elif any(r.verdict is None for r in report.results):  # ended between cases: learner code ran, so it is an RE
        report.verdict, report.outcome = "RE", died(rc, stopped, garbled, "died_between")
    elif garbled:  # every case passed, then an event after the last one: forged by the learner's code
        report.verdict, report.outcome = "RE", Outcome("garbled", garbled)
    else:
        report.verdict = "AC"
    return report


OUT_OF_MEMORY = re.compile(r"MemoryError|can't allocate memory|cannot allocate memory|out of memory|"
                           r"unable to allocate|bad_alloc|File too large", re.IGNORECASE)  # the last: RLIMIT_FSIZE


def error_hints(problem, text):
    last = text.splitlines()[-1] if text else ""
    keys = ["not_implemented"] if last.startswith("NotImplementedError") else []
    keys += ["out_of_memory"] if OUT_OF_MEMORY.search(last) else []
    return keys + [key for pattern, key, _ in problem.error_hints if re.search(pattern, text)]
