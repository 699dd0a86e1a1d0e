"""Starts the runner under limits, inside a reaper that sees every process the learner's code starts.

    python practice/sandbox.py JUDGE_PID MEMORY_MIB -- python practice/runner.py ARGS...

judge.py starts this in a new session. On Linux it becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a
process the learner's code starts stays its descendant even after a double fork or setsid, where a process-group
kill would miss it. It forks the runner with its limits set, waits for it, kills whatever it left behind, and exits
as the runner did (the same exit code, or the same signal). If the judge dies, it kills everything and exits.

Limits: RLIMIT_DATA (the private writable memory tensors live in; not RLIMIT_AS, since CUDA reserves tens of GB of
address space it never uses, and RLIMIT_AS would refuse it), no core files, and RLIMIT_NPROC (which Linux does not
apply to root). Memory in a memory-backed file (a memfd, a file in /dev/shm, a shared anonymous mapping, a System V
segment) is no data segment and escapes RLIMIT_DATA: RLIMIT_FSIZE stops any one file growing past the limit, and on
Linux this process counts them all from /proc while it waits (SharedMemory) and kills the run once they and the
runner's data segment together pass the limit. macOS has no subreaper and does not count mmap'd memory in
RLIMIT_DATA: there the runner replaces this process, in its own process group, with the limits that apply. No torch
here: this starts in milliseconds.
"""
import os
import re
import signal
import stat
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
    limits = [(resource.RLIMIT_DATA, memory_mib * 2 ** 20), (resource.RLIMIT_FSIZE, memory_mib * 2 ** 20),
              (resource.RLIMIT_CORE, 0)]
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


def tree(pid):
    """Every process below `pid`, from each of its threads' list of children (cheap enough to poll); from all of
    /proc where the kernel keeps no such list."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return descendants(pid)
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{here}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{here}/task/{task}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


# ---------------------------------------------------------------- memory held in memory-backed files (Linux)

SHM = "/dev/shm"
MAPPING = re.compile(rb"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ ([0-9a-f]+):([0-9a-f]+) (\d+) *(.*)$")


class SharedMemory:
    """The bytes the run's processes hold in memory-backed files, which RLIMIT_DATA does not count: memfds, shared
    anonymous mappings and System V segments (all three live on the kernel's internal tmpfs) and files in /dev/shm.
    Each file counts once, by inode, whether a process holds it open, maps it, or left it in /dev/shm after closing
    it; a file already in /dev/shm when the run began is not the run's. Other tmpfs folders (/tmp on some systems)
    count only through RLIMIT_FSIZE: a file there may hold another program's data, such as a checkpoint."""

    def __init__(self):
        self.devices = set()  # the filesystems that hold memory-backed files: the kernel's internal tmpfs, /dev/shm
        try:
            probe = os.memfd_create("qwen-judge-probe")
            self.devices.add(os.fstat(probe).st_dev)
            os.close(probe)
        except (AttributeError, OSError):
            pass
        try:
            self.devices.add(os.stat(SHM).st_dev)
        except OSError:
            pass
        self.before = {key for key, _ in self._shm_files()}
        self.pids, self.segments = set(), set()  # every process of the run seen; the System V segments they made

    def used(self, pids):
        """(bytes in memory-backed files, the data segment of each process in `pids`)."""
        held, data = {}, {}
        for pid in pids:
            self.pids.add(pid)
            data[pid] = self._descriptors(pid, held) or 0
        for key, st in self._shm_files():
            if key not in self.before and st.st_uid == os.getuid():
                held[key] = max(held.get(key, 0), st.st_blocks * 512)
        return sum(held.values()) + self._segments(), data

    def _descriptors(self, pid, held):
        """Count the memory-backed files `pid` holds open or maps into `held`; its data segment in bytes."""
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            names = os.listdir(f"/proc/{pid}/fd")
        except (OSError, ValueError):
            return None
        for name in names:
            try:
                st = os.stat(f"/proc/{pid}/fd/{name}")  # the file the descriptor points to
            except OSError:
                continue
            if st.st_dev in self.devices and stat.S_ISREG(st.st_mode):
                key = (st.st_dev, st.st_ino)
                held[key] = max(held.get(key, 0), st.st_blocks * 512)
        if int(status.get(b"RssShmem", b"0 kB").split()[0]):  # it maps some: which, and how much of each
            self._mapped(pid, held)
        return int(status.get(b"VmData", b"0 kB").split()[0]) * 1024

    def _mapped(self, pid, held):
        """The resident bytes of each memory-backed file `pid` maps (System V segments are counted apart)."""
        here, key = {}, None
        try:
            with open(f"/proc/{pid}/smaps", "rb") as f:
                for line in f:
                    m = MAPPING.match(line)
                    if m:
                        dev = os.makedev(int(m[1], 16), int(m[2], 16))
                        key = ((dev, int(m[3])) if dev in self.devices and int(m[3])
                               and not m[4].startswith(b"/SYSV") else None)
                    elif key is not None and line.startswith(b"Rss:"):
                        here[key] = here.get(key, 0) + int(line.split()[1]) * 1024
        except (OSError, ValueError):
            return
        for key, size in here.items():
            held[key] = max(held.get(key, 0), size)

    def _shm_files(self, most=10_000):
        """((device, inode), stat) of each file under /dev/shm, up to `most` entries."""
        todo, seen = [SHM], 0
        while todo and seen < most:
            try:
                entries = list(os.scandir(todo.pop()))
            except OSError:
                continue
            for entry in entries[:most - seen]:
                seen += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    todo.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    yield (st.st_dev, st.st_ino), st

    def _segments(self):
        """Resident bytes of the System V segments the run's processes created (/proc/sysvipc/shm)."""
        total = 0
        try:
            with open("/proc/sysvipc/shm", "rb") as f:
                rows = f.read().splitlines()
            head = rows[0].split()
            shmid, cpid, rss = head.index(b"shmid"), head.index(b"cpid"), head.index(b"rss")
            for row in rows[1:]:
                cols = row.split()
                if int(cols[cpid]) in self.pids:
                    self.segments.add(int(cols[shmid]))
                    total += int(cols[rss])
        except (OSError, ValueError, IndexError):
            pass
        return total

    def release(self):
        """Remove the System V segments the run created: unlike its files, one outlives every process that used
        it, until the machine restarts."""
        if not self.segments:
            return
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            for shmid in self.segments:
                libc.shmctl(shmid, 0, None)  # IPC_RMID
        except (OSError, AttributeError):
            pass


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
    status, shared, limit = None, SharedMemory(), memory_mib * 2 ** 20
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
                shared.release()
                os._exit(1)
            held, data = shared.used(tree(os.getpid()))
            if held and held + data.get(runner, 0) > limit:  # out of memory: killed, as the kernel's OOM killer would
                kill_tree(os.getpid(), include_root=False)
            time.sleep(0.02)
    kill_tree(os.getpid(), include_root=False)
    shared.release()
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
