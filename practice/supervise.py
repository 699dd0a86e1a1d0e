"""Child supervision: learner code in a sandboxed child process, every wait under a deadline on the judge's
clock. One loop (`supervise`) reads the child's events for grading (run_file: the runner) and for the plug-in
(plug_in_file: plugin.py); both check the events' order and kill the child and all it started at the end.
"""
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from practice.events import Garbled, Protocol, grade_events
from practice.problems import HERE, find_problem
from practice.store import work_dir
from practice.report import MSG, OUTPUT_CAP, Report, cmd, safe, size_text


STARTUP_LIMIT = 120.0  # seconds for the runner to start Python and import torch: the judge's cost, not the learner's
LOAD_LIMIT = 10.0  # seconds to import the learner's file (torch is already imported by then)
GRACE = 1.0  # a running case is stopped after its limit plus this; the verdict uses the case's own clock
MAX_EVENT = 1 << 20  # bytes in one line of the runner's events
MAX_RESULT = 1 << 30  # bytes in one saved result (the runner refuses tensors over 256 MiB)


# ---------------------------------------------------------------- running a file in a child process

def _events(stream, q):
    """Lines from the runner's private pipe, each stamped with the judge's clock as it arrives; None at the end."""
    for line in iter(lambda: stream.readline(MAX_EVENT), b""):
        q.put((time.monotonic(), line))
    q.put(None)  # end of stream: the runner has exited (or closed the pipe)


class _Capped:
    """Reads a stream to its end in a thread, keeping the first OUTPUT_CAP bytes and counting the rest."""

    def __init__(self, stream):
        self.head, self.total = bytearray(), 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        while chunk := stream.read1(1 << 16):
            self.total += len(chunk)
            if len(self.head) < OUTPUT_CAP:
                self.head += chunk[:OUTPUT_CAP - len(self.head)]


def _running(proc):
    """True until `proc` exits. It is not reaped here, so its pid (and process group id) cannot be reused by an
    unrelated process before _kill_tree signals them."""
    if not hasattr(os, "waitid"):
        return proc.poll() is None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # already reaped
        return False


def _kill_tree(proc):
    """Kill the runner's sandbox and every process below it (Linux: it is a subreaper, so daemons that left the
    process group are still below it), then its process group; elsewhere the process group or tree only."""
    from practice.sandbox import kill_tree

    try:
        if os.name == "posix":
            kill_tree(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass


def read_result(path):
    """A saved result, read only if it is a regular file of a sane size (a named pipe or a device put in its place
    would block or never end), then loaded without unpickling and reduced to plain data."""
    import io

    import torch

    from practice.runner import sanitize

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > MAX_RESULT:
            raise ValueError(f"too large to send back (over {MAX_RESULT // 2 ** 20} MiB)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_RESULT + 1)
    finally:
        os.close(fd)
    return sanitize(torch.load(io.BytesIO(data), weights_only=True))


def _start_sandboxed(command, memory_limit, **popen):
    """Start `command` in a new session, stdin closed, stdout (its private events) and stderr (what it prints)
    piped; on POSIX inside the sandbox, which sets the limits and reaps every process the learner's code starts."""
    if os.name == "posix":
        command = [sys.executable, str(HERE / "sandbox.py"), str(os.getpid()), str(memory_limit), "--"] + command
    group = ({"start_new_session": True} if os.name == "posix"
             else {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **group, **popen)


@dataclass
class Supervised:
    """What `supervise` saw of a child: its events (each with "_at", the judge's clock when it arrived), the
    protocol state it was stopped in for taking too long (or the `why` its deadline gave), why its events stopped
    making sense, its exit code, and the head of what it printed."""
    events: list
    stopped: object
    garbled: object
    rc: int
    output: bytes
    output_bytes: int


def supervise(proc, proto, wait):
    """Read a sandboxed child's events (its private stdout) into `proto` (a Protocol: accept(ev), state), each wait
    under a deadline on the judge's own clock: wait(ev) gives (seconds, why) for the wait after event ev, why being
    what `stopped` says if that deadline passes (None: the protocol state). The one loop for grading and the
    plug-in: anything out of the protocol's order, or after its end, is garbled; past a deadline, or once the child
    has exited, or on Ctrl-C, the child and everything it started are killed."""
    q = queue.Queue()
    threading.Thread(target=_events, args=(proc.stdout, q), daemon=True).start()
    printed = _Capped(proc.stderr)  # what the learner's code printed: the child points its stdout there too
    events, stopped, garbled, eof, exited = [], None, None, False, None

    def take(item):
        stamp, line = item
        ev = proto.accept(json.loads(line))  # ValueError (not JSON), RecursionError (nested too deep), Garbled
        ev["_at"] = stamp
        events.append(ev)
        seconds, why = wait(ev)
        return stamp + seconds, why

    def why_garbled(e):
        return str(e) if isinstance(e, Garbled) else "a line that is not an event"

    deadline, bound = time.monotonic() + STARTUP_LIMIT, None
    try:
        while proto.state != "over":
            item = False
            if eof:
                time.sleep(0.05)
            else:
                try:
                    item = q.get(timeout=0.05)
                except queue.Empty:
                    pass
            if item is None:
                eof = True
            elif item:
                try:
                    deadline, bound = take(item)
                except (ValueError, RecursionError, Garbled) as e:
                    garbled = why_garbled(e)
                    break
            elif not _running(proc):  # exited, though something it started may hold the pipe open
                exited = exited or time.monotonic()
                if eof or time.monotonic() - exited > 0.5:
                    break
            elif time.monotonic() > deadline:
                stopped = bound or proto.state
                break
    finally:  # also on Ctrl-C: never leave the learner's code running
        end = time.monotonic() + 1.0
        while proto.state == "over" and _running(proc) and time.monotonic() < end:
            time.sleep(0.01)  # the child is exiting: let the sandbox reap it and its leftovers first
        _kill_tree(proc)
        rc = proc.wait()
        printed.thread.join(timeout=1.0)
    while garbled is None:  # events sent before the end, read after it; after the protocol's end, none may come
        try:
            item = q.get(timeout=0.2) if proto.state == "over" and not eof else q.get_nowait()
        except queue.Empty:
            break
        if not item:
            break
        try:
            if proto.state == "over":
                raise Garbled("an event after the last one")
            take(item)
        except (ValueError, RecursionError, Garbled) as e:
            garbled = why_garbled(e)
    return Supervised(events, stopped, garbled, rc, bytes(printed.head), printed.total)


def run_file(problem, path, time_limit=None, load_limit=LOAD_LIMIT):
    """Grade the file at `path` in a separate process. Returns a Report; nothing in the file can make it raise or
    hang: every wait has a deadline on the judge's own clock."""
    import torch

    report = Report(problem, Path(path), float(time_limit or problem.time_limit), float(load_limit),
                    memory_limit=problem.memory_limit)
    limits = {"startup": STARTUP_LIMIT, "load": report.load_limit, "case": report.time_limit + GRACE}
    t0 = time.perf_counter()
    clean_stale_temp()
    with _temp_dir() as tmp:
        tmp = Path(tmp)
        for sub in ("data", "out", "cwd"):
            (tmp / sub).mkdir()
        cases = problem.cases(tmp / "data")
        report.total_limit = problem.total_limit(len(cases), time_limit)
        torch.save([(c.fn, c.values()) for c in cases], tmp / "inputs.pt")
        command = [sys.executable, str(HERE / "runner.py"), str(tmp / "inputs.pt"), str(tmp / "out"),
                   str(Path(path).resolve()), json.dumps(problem.functions),
                   json.dumps(problem.answers(path))]
        env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
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
        seen = supervise(_start_sandboxed(command, problem.memory_limit, cwd=tmp / "cwd", env=env), proto, wait)
        report.output, report.output_bytes = seen.output, seen.output_bytes
        stopped, garbled, rc = seen.stopped, seen.garbled, seen.rc
        if not seen.events:
            report.verdict = "JE"
            report.message = (f"Python and torch took over {STARTUP_LIMIT:g} s to start" if stopped
                              else f"the runner exited with code {rc} before starting" if not garbled
                              else f"the runner's first message was garbled ({garbled})")
            return report
        died = f"signal:{-rc}" if rc < 0 else f"exit:{rc}"
        grade_events(problem, cases, seen.events, lambda i: read_result(tmp / "out" / f"{i}.pt"), report,
                     stopped if stopped != "start" else None, died, garbled)
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------- temporary folders: removed even after a kill -9

TEMP_PREFIX = "qwen-practice-"


def _temp_dir():
    """A temporary folder named after this process, so the next judge can tell when its owner is gone."""
    return tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-", ignore_cleanup_errors=True)


def clean_stale_temp():
    """Remove the temporary folders of judges that were killed (their process no longer exists)."""
    import shutil

    for folder in Path(tempfile.gettempdir()).glob(TEMP_PREFIX + "*-*"):
        try:
            pid = int(folder.name[len(TEMP_PREFIX):].split("-")[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue  # alive (or another user's): not ours to remove
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- the plug-in's child

class PlugProtocol:
    """The plug-in child's events (plugin.main) in their one order: ready (the course model is loaded), loaded (the
    learner's file is imported), then begin (with one of the exercise's function names) and ret around each call of
    the learner's functions, then done (with same: true or false) after at least one call. Anything else raises
    Garbled, as Protocol does for the runner."""

    def __init__(self, functions):
        self.functions, self.state, self.fn = list(functions), "start", "function"

    def accept(self, ev):
        if not isinstance(ev, dict):
            raise Garbled("a line that is not an event")
        kind, st = ev.get("ev"), self.state
        if (st, kind) in (("start", "ready"), ("ready", "loaded")):
            self.state = kind
        elif st in ("loaded", "returned") and kind == "begin" and ev.get("fn") in self.functions:
            self.state, self.fn = "inside", ev["fn"]
        elif st == "inside" and kind == "ret":
            self.state = "returned"
        elif st == "returned" and kind == "done" and type(ev.get("same")) is bool:
            self.state = "over"
            return {"ev": kind, "same": ev["same"]}
        else:
            raise Garbled(f"an event {str(kind)[:20]!r} where the judge expected {self._expected()}")
        return {"ev": kind}

    def _expected(self):
        return {"start": "'ready'", "ready": "'loaded'", "loaded": "a call of your functions",
                "inside": f"the return of your {self.fn}", "returned": "another call, or 'done'"}.get(
            self.state, "nothing more")


def plug_in_allowed(prob, lang):
    """True for an exercise that is a part of the model; else one line, with the parts and the command to grade it
    without --plug-in."""
    from practice.plugin import PARTS

    if prob.number in PARTS:
        return True
    print(MSG[lang]["plug_not_part"].format(n=prob.number, parts=", ".join(map(str, PARTS)), cmd=cmd(prob.number)),
          file=sys.stderr)
    return False


def plug_in_file(number, file, lang="en"):
    """The plug-in mode (practice/plugin.py) with the learner's file in a child process, under the limits it was
    graded with: the sandbox (memory, processes, a reaper) and the supervision loop of grading, with a deadline for
    each wait after the child's last event (PlugProtocol): Python, torch and the course model get STARTUP_LIMIT,
    importing the file LOAD_LIMIT, each call of the learner's functions the problem's time limit (+ GRACE), the
    course's own code between calls STARTUP_LIMIT. Past one, everything is stopped and one line says which. Returns
    the exit code: 0 for the same prediction, 1 otherwise, 2 for an exercise that is not a part of the model."""
    m = MSG[lang]
    prob = find_problem(number, lang)
    if prob is None or not plug_in_allowed(prob, lang):
        return 2
    path = Path(file) if file else work_dir() / prob.work_name
    waits = {"start": STARTUP_LIMIT, "ready": LOAD_LIMIT, "loaded": STARTUP_LIMIT, "returned": STARTUP_LIMIT,
             "inside": prob.time_limit + GRACE, "over": LOAD_LIMIT}  # over: only its exit is left
    env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    print(m["plug_banner"].format(n=prob.number), flush=True)
    proto = PlugProtocol(prob.functions)
    proc = _start_sandboxed([sys.executable, str(HERE / "plugin.py"), str(prob.number), str(path.resolve())],
                            prob.memory_limit, env=env)
    seen = supervise(proc, proto, lambda ev: (waits[proto.state], None))
    for line in seen.output.decode("utf-8", "replace").splitlines():
        print(safe(line))
    if seen.output_bytes > len(seen.output):
        print(m["printed"].format(size=size_text(seen.output_bytes), cap=size_text(len(seen.output))))
    done = next((ev for ev in seen.events if ev["ev"] == "done"), None)
    if done is not None and seen.garbled is None:
        return 0 if done["same"] else 1
    if seen.garbled:
        why = m["garbled"].format(why=seen.garbled)
    elif seen.stopped:
        why = m["plug_" + seen.stopped].format(t=waits[seen.stopped], fn=proto.fn, n=prob.number,
                                               limit=prob.time_limit)
    elif seen.rc < 0:
        why = m["plug_died"].format(how=m["oom_kill"] if seen.rc == -signal.SIGKILL else f"signal {-seen.rc}")
    else:
        return 1  # it raised: its traceback is printed above
    print(m["plug_stopped"].format(why=why), file=sys.stderr)
    return 1
