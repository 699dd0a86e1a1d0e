"""The supervision loop: learner code in a sandboxed child process, every wait under a deadline on the judge's
clock. One loop (`supervise`) reads the child's events for grading (child.run_file: the runner) and for the plug-in
(plugin.plug_in_file: plugin.py's child); both check the events' order and kill the child and all it started at the
end.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from practice.events import Garbled
from practice.limits import MAX_EVENT, OUTPUT_CAP, STARTUP_LIMIT
from practice.sandbox import kill_tree
from qwen.lang import tr

SANDBOX = Path(__file__).resolve().parent / "sandbox.py"

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


def start_sandboxed(command, memory_limit, **popen):
    """Start `command` in a new session, stdin closed, stdout (its private events) and stderr (what it prints)
    piped, Python's output unbuffered in UTF-8; on POSIX inside the sandbox, which sets the limits and reaps every
    process the learner's code starts."""
    popen["env"] = dict(popen.get("env") or os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1",
                        PYTHONDONTWRITEBYTECODE="1")
    if os.name == "posix":
        command = [sys.executable, str(SANDBOX), str(os.getpid()), str(memory_limit), "--"] + command
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
                raise Garbled(tr("an event after the last one", "最后一个事件之后还有事件"))
            take(item)
        except (ValueError, RecursionError, Garbled) as e:
            garbled = why_garbled(e)
    return Supervised(events, stopped, garbled, rc, bytes(printed.head), printed.total)
