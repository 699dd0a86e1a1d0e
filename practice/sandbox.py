"""Starts the runner under limits, inside a reaper that sees every process the learner's code starts.

    python practice/sandbox.py JUDGE_PID MEMORY_MIB -- python practice/runner.py ARGS...

judge.py starts this in a new session. On Linux it becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a
process the learner's code starts stays its descendant even after a double fork or setsid, where a process-group
kill would miss it. It forks the runner with its limits set, waits for it, kills whatever it left behind, and exits
as the runner did (the same exit code, or the same signal). If the judge dies, it kills everything and exits.

Limits: RLIMIT_DATA (the private writable memory tensors live in; not RLIMIT_AS, since CUDA reserves tens of GB of
address space it never uses, and RLIMIT_AS would refuse it), no core files, and RLIMIT_NPROC (which Linux does not
apply to root). macOS has no subreaper and does not count mmap'd memory in RLIMIT_DATA: there the runner replaces
this process, in its own process group, with the limits that apply. No torch here: this starts in milliseconds.
"""
import os
import signal
import sys
import time

try:
    from practice.limits import EXTRA_PROCESSES
except ImportError:  # started as python practice/sandbox.py: practice/ is first on the path
    from limits import EXTRA_PROCESSES

LINUX = sys.platform.startswith("linux")
PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


def become_subreaper():
    """True if orphans among this process's descendants are now re-parented to it (Linux only)."""
    if not LINUX:
        return False
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _user_tasks():
    """Processes and threads of this user now (what RLIMIT_NPROC counts)."""
    uid, n = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    n += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                pass
    return n


def set_limits(memory_mib):
    try:
        import resource
    except ImportError:  # Windows: no limits
        return
    limits = [(resource.RLIMIT_DATA, memory_mib * 2 ** 20), (resource.RLIMIT_CORE, 0)]
    if LINUX and os.getuid() != 0:
        limits.append((resource.RLIMIT_NPROC, _user_tasks() + EXTRA_PROCESSES))
    for which, value in limits:
        try:
            _, hard = resource.getrlimit(which)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (value, value))  # the hard limit too: the learner's code cannot raise it
        except (ValueError, OSError):
            pass


def descendants(pid):
    """Every process below `pid`, from /proc (parents first)."""
    children = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])  # the name in (...) may hold spaces
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def kill_tree(pid, include_root=True):
    """Stop every process below `pid` (a stopped process cannot fork), again until no new one appears, then kill
    them all. Needs /proc; without it only `pid` itself is killed."""
    stopped = set()
    if include_root:
        _signal(pid, signal.SIGSTOP)
    if os.path.isdir("/proc"):
        for _ in range(1000):
            new = set(descendants(pid)) - stopped
            if not new:
                break
            for p in new:
                _signal(p, signal.SIGSTOP)
            stopped |= new
    for p in stopped | ({pid} if include_root else set()):
        _signal(p, signal.SIGKILL)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def main(argv):
    judge, memory_mib, command = int(argv[0]), int(argv[1]), argv[3:]  # argv[2] is "--"
    if not become_subreaper():
        set_limits(memory_mib)
        os.execv(command[0], command)  # the runner replaces this process
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file if the signal is passed on below
    except (ImportError, ValueError, OSError):
        pass
    runner = os.fork()
    if runner == 0:
        try:
            set_limits(memory_mib)
            os.execv(command[0], command)
        finally:
            os._exit(127)
    status = None
    while status is None:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)  # the runner, or an orphan adopted from below
        except ChildProcessError:
            pid, st = runner, 127 << 8
        if pid == runner:
            status = st
        elif pid == 0:
            if os.getppid() != judge:  # the judge is gone: nothing may run on unwatched
                kill_tree(os.getpid(), include_root=False)
                os._exit(1)
            time.sleep(0.02)
    kill_tree(os.getpid(), include_root=False)
    while True:
        try:
            if os.waitpid(-1, 0)[0] == 0:
                break
        except ChildProcessError:
            break
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL has no handler to reset
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
