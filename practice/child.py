"""Grading a file in a child process, the command line's way (notebook.py grades in this process): the runner
(runner.py) started in the sandbox (sandbox.py), its events read by the supervision loop (supervise.py) under the
limits (limits.py), its results read back here as plain data and turned into a Report (events.py).
"""
import io
import json
import os
import stat
import sys
import time
from pathlib import Path

from practice.events import Outcome, Protocol, Report, grade_events
from practice.limits import GRACE, LOAD_LIMIT, MAX_RESULT, STARTUP_LIMIT
from practice.problems import HERE
from practice.store import clean_stale_temp, temp_dir
from practice.supervise import start_sandboxed, supervise
from qwen.lang import language, tr


def run_file(problem, path, time_limit=None, load_limit=LOAD_LIMIT):
    """Grade the file at `path` in a separate process. Returns a Report; nothing in the file can make it raise or
    hang: every wait has a deadline on the judge's own clock."""
    import torch  # here, not at the top: the judge's commands that grade nothing start without torch

    report = Report(problem, Path(path), float(time_limit or problem.time_limit), float(load_limit),
                    memory_limit=problem.memory_limit)
    limits = {"startup": STARTUP_LIMIT, "load": report.load_limit, "case": report.time_limit + GRACE}
    t0 = time.perf_counter()
    clean_stale_temp()
    with temp_dir() as tmp:
        tmp = Path(tmp)
        for sub in ("data", "out", "cwd"):
            (tmp / sub).mkdir()
        cases = problem.cases(tmp / "data")
        report.total_limit = problem.total_limit(len(cases), time_limit)
        torch.save([(c.fn, c.values()) for c in cases], tmp / "inputs.pt")
        command = [sys.executable, str(HERE / "runner.py"), str(tmp / "inputs.pt"), str(tmp / "out"),
                   str(Path(path).resolve()), json.dumps(problem.functions),
                   json.dumps(problem.answers(path))]
        proto = Protocol(len(cases))
        used, begun = 0.0, None  # seconds the cases took so far, on the judge's clock; when this one began

        def wait(ev):
            nonlocal used, begun
            if ev["ev"] == "begin":
                begun = ev["_at"]
                left = report.total_limit - used  # the time all cases have left, if less than one case's
                if left + GRACE < limits["case"]:
                    return max(left, 0.0) + GRACE, "total"
            elif ev["ev"] == "ret":
                used += ev["_at"] - begun
            return limits.get(Protocol.LIMIT.get(proto.state), 0.0), None
        env = dict(os.environ, QWEN_LANG=language())  # the runner's few lines in the learner's language
        seen = supervise(start_sandboxed(command, problem.memory_limit, cwd=tmp / "cwd", env=env), proto, wait)
        report.output, report.output_bytes = seen.output, seen.output_bytes
        stopped, garbled, rc = seen.stopped, seen.garbled, seen.rc
        if not seen.events:
            report.verdict = "JE"
            report.outcome = Outcome("judge_error", tr(f"Python and torch took over {STARTUP_LIMIT:g} s to start",
                                                        f"启动 Python 和 torch 用了 {STARTUP_LIMIT:g} 秒以上")
                                     if stopped else tr(f"the runner exited with code {rc} before starting",
                                                        f"运行器还没开始就退出了，退出码 {rc}")
                                     if not garbled else tr(f"the runner's first message was garbled ({garbled})",
                                                            f"运行器的第一条消息就被破坏了（{garbled}）"))
            return report
        grade_events(problem, cases, seen.events, lambda i: read_result(tmp / "out" / f"{i}.pt"), report,
                     stopped if stopped != "start" else None, rc, garbled)
    report.seconds = time.perf_counter() - t0
    return report


def read_result(path):
    """A saved result, read only if it is a regular file of a sane size (a named pipe or a device put in its place
    would block or never end), then loaded without unpickling and reduced to plain data."""
    import torch  # here, not at the top: the judge's commands that grade nothing start without torch

    from practice.runner import sanitize  # the runner imports torch

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(tr("not a regular file", "不是普通文件"))
        if st.st_size > MAX_RESULT:
            cap = MAX_RESULT // 2 ** 20
            raise ValueError(tr(f"too large to send back (over {cap} MiB)", f"太大，无法传回（超过 {cap} MiB）"))
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_RESULT + 1)
    finally:
        os.close(fd)
    return sanitize(torch.load(io.BytesIO(data), weights_only=True))
