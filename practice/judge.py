"""The local judge for the course's exercises: it grades a learner's file the way an online judge does.

Run from the repository root: python practice/judge.py --help. In a notebook: from practice.judge import check.
The learner's file runs in a separate process (practice/runner.py) with a time limit per case. Its results come
back as data and are compared here with expected values from an oracle that is always installed (the `qwen`
package, torch, hand math); tests/test_practice.py proves those oracles equal transformers.
"""
import argparse
import copy
import functools
import importlib.util
import inspect
import json
import locale
import math
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `python practice/judge.py` puts practice/ on the path, not the repo root
    sys.path.insert(0, str(HERE.parent))

from practice.report import MSG, OUTPUT_CAP, Printer, Report, CaseResult, safe, shown_path, size_text  # noqa: E402

STARTUP_LIMIT = 120.0  # seconds for the runner to start Python and import torch: the judge's cost, not the learner's
LOAD_LIMIT = 10.0  # seconds to import the learner's file (torch is already imported by then)
GRACE = 1.0  # a running case is stopped after its limit plus this; the verdict uses the case's own clock
MAX_TIME_LIMIT = 600.0  # seconds: the most --time-limit accepts
MEMORY_LIMIT = 4096  # MiB of memory (RLIMIT_DATA) for the learner's process unless meta.json says "memory_limit"
MAX_EVENT = 1 << 20  # bytes in one line of the runner's events
MAX_RESULT = 1 << 30  # bytes in one saved result (the runner refuses tensors over 256 MiB)


def slack(limit):
    """How far the judge's own clock may run past a case's limit before it overrules the runner's clock (the
    judge's includes the pipe and thread wake-ups; the runner's would miss a learner's tampering)."""
    return 0.5 + 0.2 * limit


def detect_lang(explicit=None):
    """--lang wins; else the locale variables (LC_ALL, LC_MESSAGES, LANG, LANGUAGE): Chinese if they say zh."""
    if explicit:
        return explicit
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        if os.environ.get(var):
            return "zh" if os.environ[var].lower().startswith("zh") else "en"
    try:
        loc = (locale.getlocale()[0] or "").lower()
    except ValueError:
        loc = ""
    return "zh" if loc.startswith(("zh", "chinese")) else "en"


def cmd(*words):
    return " ".join(["python practice/judge.py", *map(str, words)])


# ---------------------------------------------------------------- problems: one folder each, practice/NNN_slug/

@dataclass
class Problem:
    number: int
    slug: str
    folder: Path
    meta: dict  # meta.json: title {en, zh}, chapter, level {en, zh}, functions, time_limit
    _module: object = None

    @property
    def functions(self):
        return list(self.meta["functions"])

    @property
    def time_limit(self):
        return float(self.meta.get("time_limit", 3.0))

    @property
    def memory_limit(self):
        """MiB of memory the learner's process may use (torch itself needs about 250)."""
        return int(self.meta.get("memory_limit", MEMORY_LIMIT))

    @property
    def work_name(self):
        return f"{self.number}_{self.slug}.py"

    def title(self, lang):
        return self.meta["title"].get(lang) or self.meta["title"]["en"]

    def statement(self, lang):
        return (self.folder / ("README.zh.md" if lang == "zh" else "README.md")).read_text(encoding="utf-8")

    @property
    def module(self):
        """cases.py, imported on first use (it imports torch and the oracle)."""
        if self._module is None:
            spec = importlib.util.spec_from_file_location(f"practice_cases_{self.number}", self.folder / "cases.py")
            self._module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(self._module)
        return self._module

    def cases(self, tmp):
        return self.module.make_cases(Path(tmp))

    @property
    def mistakes(self):
        return list(getattr(self.module, "MISTAKES", []))

    @property
    def error_hints(self):
        """[(regex, key, {"en", "zh"})]: a Runtime Error whose traceback matches the regex gets the hint."""
        return list(getattr(self.module, "ERROR_HINTS", []))

    def hint_text(self, key, lang):
        for k, hint in [(m.key, m.hint) for m in self.mistakes] + [(k, h) for _, k, h in self.error_hints]:
            if k == key:
                return hint.get(lang) or hint["en"]
        return None


def problems(root=HERE):
    found = {}
    for meta in sorted(Path(root).glob("[0-9][0-9][0-9]_*/meta.json")):
        number, slug = meta.parent.name.split("_", 1)
        found[int(number)] = Problem(int(number), slug, meta.parent, json.loads(meta.read_text(encoding="utf-8")))
    return found


def find_problem(n, lang):
    table = problems()
    try:
        number = int(str(n).split("_")[0])
    except ValueError:
        number = None
    if number not in table:
        print(MSG[lang]["unknown"].format(n=n, all=", ".join(map(str, table))), file=sys.stderr)
        return None
    return table[number]


# ---------------------------------------------------------------- the reference files' checksums

def manifest_path(root=HERE):
    return Path(root) / "checksums.json"


def reference_files(folder):
    """The files of a problem folder that decide a verdict: all but the statements, the starter and wrong/."""
    return sorted(f for f in Path(folder).iterdir() if f.is_file() and not f.name.startswith(".")
                  and f.suffix != ".pyc" and f.name not in ("README.md", "README.zh.md", "starter.py"))


def given_files(prob):
    """The files of practice/ outside the problem's folder that its cases and the learner's file import (meta.json
    "given", e.g. 213's assembly.py), as paths relative to practice/: they decide a verdict too."""
    return list(prob.meta.get("given", []))


def oracle_files(prob):
    """{"qwen/rope.py": path}: the files of the `qwen` package that the problem's cases.py and given files import,
    directly or through each other (practice/oracle.py): they compute the expected values, so they decide a verdict
    as cases.py does."""
    from practice.oracle import import_closure, package_root

    root = prob.folder.parent
    return import_closure([prob.folder / "cases.py"] + [root / name for name in given_files(prob)],
                          package_root(root.parent))


def checksums(root=HERE):
    """{"files": {"NNN_slug/name" or "given.py": sha256}, "oracle": {"qwen/name.py": sha256}} over every problem's
    reference files, the given files they import and the `qwen` files their cases import. Line endings are hashed
    as "\n", so a checkout that writes "\r\n" (git on Windows) matches. A given file that is missing is left out
    (and so differs from the manifest)."""
    from practice.oracle import sha256

    files, oracle = {}, {}
    for prob in problems(root).values():
        for f in reference_files(prob.folder):
            files[f"{prob.folder.name}/{f.name}"] = sha256(f)
        for name in given_files(prob):
            if (Path(root) / name).is_file():
                files[name] = sha256(Path(root) / name)
        oracle.update({k: sha256(f) for k, f in oracle_files(prob).items()})
    return {"about": "sha256 of each problem's reference files and of the qwen files their cases import; "
                     "regenerate: python practice/judge.py rehash",
            "files": files, "oracle": dict(sorted(oracle.items()))}


def verified(prob, lang="en"):
    """True if the problem's reference files, given files and the `qwen` files its cases import are the committed
    ones; else say which differ and how to restore them (an accidental edit of cases.py or qwen/rope.py must not
    change what the judge accepts)."""
    from practice.oracle import sha256

    try:
        manifest = json.loads(manifest_path(prob.folder.parent).read_text(encoding="utf-8"))
        known, known_oracle = manifest["files"], manifest.get("oracle", {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        known, known_oracle = {}, {}

    def its(k):
        return k.startswith(prob.folder.name + "/") or k in given_files(prob)
    root = prob.folder.parent
    mine = {f"practice/{f.relative_to(root).as_posix()}": sha256(f) for f in reference_files(prob.folder)}
    mine.update({f"practice/{name}": sha256(root / name) for name in given_files(prob) if (root / name).is_file()})
    theirs = {f"practice/{k}": v for k, v in known.items() if its(k)}
    ours = oracle_files(prob)
    mine.update({k: sha256(f) for k, f in ours.items()})
    theirs.update({k: known_oracle.get(k) for k in ours})
    bad = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    if not bad:
        return True
    restore = dict.fromkeys(shown_path(root.parent / "/".join(k.split("/")[:2])) if k.startswith("practice/")
                            else shown_path(root.parent / k) for k in bad)  # the problem folder, the given file
    print(MSG[lang]["tampered"].format(files=", ".join(bad), folder=" ".join(restore), cmd=cmd("rehash")),
          file=sys.stderr)
    return False


def cmd_rehash():
    path = manifest_path()
    data = checksums()
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {shown_path(path)}: {len(data['files'])} files of {len(problems())} problems and the "
          f"{len(data['oracle'])} qwen files their cases import")
    return 0


# ---------------------------------------------------------------- progress: a JSON file, locked, replaced atomically

def home():
    """Where progress and working files live: practice/ itself in a checkout of the course (git-ignored there), or
    ~/.qwen-by-hand after a non-editable install (site-packages is no place for them)."""
    return HERE if (HERE.parent / "pyproject.toml").is_file() else Path.home() / ".qwen-by-hand"


def progress_path():
    if os.environ.get("PRACTICE_PROGRESS"):
        return Path(os.environ["PRACTICE_PROGRESS"])
    return HERE / ".progress.json" if home() == HERE else home() / "progress.json"


def work_dir():
    return Path(os.environ.get("PRACTICE_WORK") or home() / "work")


def load_progress(lang="en"):
    """{number: record}. A missing file is empty progress; so is an unreadable one, with a warning (never a crash)."""
    path = progress_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("problems"), dict):
            raise ValueError("not a progress record")
        return {str(k): v for k, v in data["problems"].items() if isinstance(v, dict)}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0][:80]
        print(MSG[lang]["bad_progress"].format(path=shown_path(path), why=why), file=sys.stderr)
        return {}


def save_progress(records, lang="en"):
    """Write a temporary file, flush it to disk, then os.replace it over the old one: a judge killed at any moment
    leaves the old file or the new one, never a mix. The temporary file lives in a git-ignored folder."""
    path = progress_path()
    text = json.dumps({"version": 1, "problems": records}, indent=1, ensure_ascii=False, sort_keys=True)
    folder = path.parent if "PRACTICE_PROGRESS" in os.environ else work_dir()
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        print(MSG[lang]["save_failed"].format(path=shown_path(path), why=e), file=sys.stderr)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


class _Locked:
    """An exclusive lock on PROGRESS.lock while progress is read, changed and replaced, so two judges finishing
    at once both keep their record. fcntl on Linux and macOS, msvcrt on Windows; none if neither works."""

    def __enter__(self):
        path = progress_path()
        self.f = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.f = open(path.with_name(path.name + ".lock"), "a+b")
            try:
                import fcntl
                fcntl.flock(self.f, fcntl.LOCK_EX)
            except ImportError:
                import msvcrt
                self.f.seek(0)
                msvcrt.locking(self.f.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
        except (OSError, ImportError):
            pass  # no lock: still correct for a single judge
        return self

    def __exit__(self, *exc):
        if self.f is not None:
            self.f.close()  # releases the lock


def record(report, lang):
    with _Locked():
        records = load_progress(lang)
        key = str(report.problem.number)
        records[key] = {"accepted": bool(records.get(key, {}).get("accepted")) or report.verdict == "AC",
                        "last": report.verdict, "passed": report.passed, "total": len(report.results),
                        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "file": str(report.file)}
        save_progress(records, lang)


# ---------------------------------------------------------------- the runner's events, as the judge accepts them

class Garbled(Exception):
    """An event the runner cannot have sent: the learner's code wrote to the judge's private pipe."""


def _text(value, cap=20_000):
    if value is None:
        return None
    if not isinstance(value, str):
        raise Garbled(f"a {type(value).__name__} where text belongs")
    return value[:cap]


class Protocol:
    """The runner's events in the one order it sends them: ready, then loaded (or compile_error, missing,
    load_error), then begin i, ret i, end i for each case, then done; each reduced to its known fields, checked.
    Anything else raises Garbled. `state` names what the judge waits for, so each wait gets one deadline."""

    LIMIT = {"start": "startup", "ready": "load", "between": "load", "begun": "case", "returned": "load"}

    def __init__(self, n):
        self.n, self.i, self.state = n, -1, "start"

    def accept(self, ev):
        if not isinstance(ev, dict):
            raise Garbled("a line that is not an event")
        kind, st, i = ev.get("ev"), self.state, ev.get("i")
        if st == "start" and kind == "ready":
            self.state = "ready"
            return {"ev": kind}
        if st == "ready" and kind in ("loaded", "compile_error", "missing", "load_error"):
            if kind == "missing":
                names = ev.get("names")
                if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                    raise Garbled("missing names that are not a list of text")
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
            raise Garbled(f"an event {str(kind)[:20]!r} for case {str(i)[:20]}, where the judge expected "
                          f"{self._expected()}")
        if st == "between" and kind == "begin" and i < self.n:
            self.i, self.state = i, "begun"
            return {"ev": kind, "i": i}
        if st == "begun" and kind == "ret":
            t = ev.get("t")
            if type(t) not in (int, float) or not math.isfinite(t) or t < 0:
                raise Garbled(f"a case time that is not a number of seconds: {str(t)[:20]!r}")
            self.state = "returned"
            return {"ev": kind, "i": i, "t": float(t)}
        if st == "returned" and kind == "end":
            ok, mutated = ev.get("ok"), ev.get("mutated", False)
            if type(ok) is not bool or type(mutated) is not bool:
                raise Garbled("an end event without a true/false outcome")
            out = {"ev": kind, "i": i, "ok": ok, "mutated": mutated, "exc": _text(ev.get("exc"), 200),
                   "tb": _text(ev.get("tb")), "code": _text(ev.get("code"), 200)}
            self.state = "between"
            return out
        raise Garbled(f"an event {str(kind)[:20]!r}, where the judge expected {self._expected()}")

    def _expected(self):
        return {"start": "'ready'", "ready": "the file's import", "begun": f"case {self.i}'s return",
                "returned": f"case {self.i}'s end", "over": "nothing more"}.get(
            self.state, "'done'" if self.i + 1 == self.n else f"case {self.i + 1}'s begin")


# ---------------------------------------------------------------- from the runner's events to verdicts

def grade_events(problem, cases, events, output, report, stopped=None, died=None, garbled=None):
    """Per-case verdicts from the runner's events (both ways of running share this).

    output(i): the learner's result for case i. stopped: the Protocol state the judge was waiting in when it
    killed the runner for taking too long. died: "exit:N", "signal:N" when the runner ended without finishing.
    garbled: why the events stopped making sense. An event's "_at" is the judge's own clock when it arrived."""
    from practice.grading import compare, diagnose

    report.results = [CaseResult(c) for c in cases]
    loaded, current, begun_at = False, None, None
    for ev in events:
        kind = ev.get("ev")
        if kind == "compile_error":
            report.verdict, report.message = "CE", ev.get("msg") or ""
            return report
        if kind == "missing":
            report.verdict, report.message = "CE", "missing:" + ", ".join(ev.get("names", []))
            return report
        if kind == "load_error":
            report.verdict = "RE"
            report.message = (ev.get("tb") or "") + (f"\nsysexit:{ev.get('code')}" if ev.get("exc") == "SystemExit"
                                                     else "")
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
        elif kind == "end":
            r, current = report.results[ev["i"]], None
            if not ev.get("ok"):
                r.verdict = "RE"
                tb = ev.get("tb") or ""
                r.error = tb + (f"\nsysexit:{ev.get('code')}" if ev.get("exc") == "SystemExit" else "")
                r.hints = error_hints(problem, tb)
                continue
            try:
                r.got, r.mutated = output(ev["i"]), bool(ev.get("mutated"))
            except Exception as e:  # the saved result is gone, replaced or unreadable (the learner's code did it?)
                r.verdict = "RE"
                r.error = f"the judge could not read your result back: {type(e).__name__}: {str(e)[:300]}"
                continue
            r.mismatch = compare(r.got, r.case.expected, r.case.tol)
            if r.mismatch is not None:
                r.verdict, r.hints = "WA", diagnose(problem, r.case, r.got)
            elif r.mutated:
                r.verdict = "WA"
            elif r.time is not None and r.time > report.time_limit:
                r.verdict = "TLE"
            else:
                r.verdict = "AC"
    if not loaded:  # the learner's file was being imported: whatever ended the run, it is the learner's
        report.verdict = "TLE" if stopped == "ready" else "RE"
        report.message = ("load" if stopped == "ready" else f"garbled:{garbled}" if garbled
                          else f"stalled:{stopped}" if stopped else f"died_load:{died}")
        return report
    if current is not None:  # begun but never ended: stopped by the judge, garbled, or the process died
        r = report.results[current]
        if r.verdict is None:
            r.verdict = "TLE" if stopped == "begun" else "RE"
            r.error = ("" if stopped == "begun" else f"garbled:{garbled}" if garbled
                       else f"stalled:{stopped}" if stopped else f"died:{died}")
    failure = report.failure
    if failure:
        report.verdict = failure.verdict
    elif any(r.verdict is None for r in report.results):  # ended between cases: learner code ran, so it is an RE
        report.verdict = "RE"
        report.message = (f"garbled:{garbled}" if garbled else f"stalled:{stopped}" if stopped
                          else f"died_between:{died}")
    else:
        report.verdict = "AC"
    return report


OUT_OF_MEMORY = re.compile(r"MemoryError|can't allocate memory|cannot allocate memory|out of memory|"
                           r"unable to allocate|bad_alloc", re.IGNORECASE)


def error_hints(problem, text):
    last = text.splitlines()[-1] if text else ""
    keys = ["not_implemented"] if last.startswith("NotImplementedError") else []
    keys += ["out_of_memory"] if OUT_OF_MEMORY.search(last) else []
    return keys + [key for pattern, key, _ in problem.error_hints if re.search(pattern, text)]


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
            raise ValueError(f"{st.st_size} bytes")
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
        torch.save([(c.fn, c.values()) for c in cases], tmp / "inputs.pt")
        command = [sys.executable, str(HERE / "runner.py"), str(tmp / "inputs.pt"), str(tmp / "out"),
                   str(Path(path).resolve()), json.dumps(problem.functions)]
        env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        proc = _start_sandboxed(command, problem.memory_limit, cwd=tmp / "cwd", env=env)
        q = queue.Queue()
        threading.Thread(target=_events, args=(proc.stdout, q), daemon=True).start()
        printed = _Capped(proc.stderr)  # the learner's prints: the runner points its stdout there too
        proto = Protocol(len(cases))
        events, stopped, garbled, eof, exited = [], None, None, False, None

        def take(item):
            stamp, line = item
            ev = proto.accept(json.loads(line))  # ValueError (not JSON), RecursionError (nested too deep), Garbled
            ev["_at"] = stamp
            events.append(ev)
            return stamp + limits.get(Protocol.LIMIT.get(proto.state), 0.0)

        deadline = time.monotonic() + STARTUP_LIMIT
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
                        deadline = take(item)
                    except (ValueError, RecursionError, Garbled) as e:
                        garbled = str(e) if isinstance(e, Garbled) else "a line that is not an event"
                        break
                elif not _running(proc):  # exited, though something it started may hold the pipe open
                    exited = exited or time.monotonic()
                    if eof or time.monotonic() - exited > 0.5:
                        break
                elif time.monotonic() > deadline:
                    stopped = proto.state
                    break
        finally:  # also on Ctrl-C: never leave the learner's code running
            end = time.monotonic() + 1.0
            while proto.state == "over" and _running(proc) and time.monotonic() < end:
                time.sleep(0.01)  # the runner is exiting: let the sandbox reap it and its leftovers first
            _kill_tree(proc)
            rc = proc.wait()
            printed.thread.join(timeout=1.0)
        while garbled is None and proto.state != "over":  # events sent before the end, read after it
            try:
                item = q.get_nowait()
            except queue.Empty:
                break
            if not item:
                break
            try:
                take(item)
            except (ValueError, RecursionError, Garbled) as e:
                garbled = str(e) if isinstance(e, Garbled) else "a line that is not an event"
        report.output, report.output_bytes = bytes(printed.head), printed.total
        if not events:
            report.verdict = "JE"
            report.message = (f"Python and torch took over {STARTUP_LIMIT:g} s to start" if stopped
                              else f"the runner exited with code {rc} before starting" if not garbled
                              else f"the runner's first message was garbled ({garbled})")
            return report
        died = f"signal:{-rc}" if rc < 0 else f"exit:{rc}"
        grade_events(problem, cases, events, lambda i: read_result(tmp / "out" / f"{i}.pt"), report,
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


# ---------------------------------------------------------------- grading in this process (notebooks)

def check(problem, *objects, lang=None, save=True, **functions):
    """Grade functions defined in a notebook (or any Python session) and print the verdict; True if Accepted.

    check(204, rms_norm, gated_rms_norm, l2norm)   # functions (or functools.partial), matched by their names
    check(204, globals())                           # or a namespace: a dict, a module, or an object (an nn.Module
                                                    # instance, say) whose attributes are the functions
    check(204, rms_norm=my_norm, ...)               # or explicit names

    It runs in this process, since the functions live here. So a case that hangs cannot be stopped (interrupt the
    kernel; the line above the verdict says which case is running), and a case slower than the limit is marked
    Time Limit Exceeded only once it returns.
    """
    lang = lang or detect_lang()
    prob = find_problem(problem, lang)
    if prob is None:
        return False
    if not verified(prob, lang):
        return False
    space, why = _namespace(prob, objects, functions)
    if why:
        print(why)
        return False
    print(MSG[lang]["in_process"])
    report = grade_in_process(prob, space, progress=_progress_line(lang))
    Printer(lang).report(report, "notebook", None, shown_path(progress_path()))
    if save:
        record(report, lang)
    return report.verdict == "AC"


def _name(obj):
    while isinstance(obj, functools.partial):
        obj = obj.func
    return getattr(obj, "__name__", None)


def _namespace(prob, objects, functions):
    """check()'s arguments as {name: callable}, or (None, one line saying what check() takes)."""
    wanted, space = prob.functions, {}
    takes = (f"check() takes the functions {', '.join(wanted)} (or functools.partial of them), a namespace that "
             f"defines them (globals(), a module, an object such as an nn.Module instance), or name=function")
    for obj in objects:
        if isinstance(obj, dict):
            space.update(obj)
        elif isinstance(obj, types.ModuleType):
            space.update(vars(obj))
        elif isinstance(obj, functools.partial) or inspect.isroutine(obj):
            name = _name(obj)
            if name not in wanted:
                return None, (f"check(): {name} is not one of {', '.join(wanted)}; pass it by name: "
                              f"check({prob.number}, {wanted[0]}={name})")
            space[name] = obj
        elif any(callable(getattr(obj, n, None)) for n in wanted):
            space.update({n: getattr(obj, n) for n in wanted if callable(getattr(obj, n, None))})
        elif callable(obj) and len(wanted) == 1:
            space[wanted[0]] = obj
        else:
            return None, f"{takes}; got {type(obj).__name__} {_short(obj)}"
    for name in functions:
        if name not in wanted:
            return None, f"check(): {name} is not one of {', '.join(wanted)}"
    space.update(functions)
    return space, None


def _short(obj):
    try:
        text = repr(obj)
    except Exception:
        text = "?"
    return text if len(text) <= 40 else text[:37] + "..."


def _progress_line(lang):
    """Overwrites one line with the case being graded: a hanging case stays on screen, with what to do."""
    def show(i, n, case, done=False):
        if done:
            print("\r" + " " * 79 + "\r", end="", flush=True)
        else:
            text = MSG[lang]["running"].format(i=i + 1, n=n, label=case.label, fn=case.fn)
            print("\r" + text[:79].ljust(79), end="", flush=True)
    return show


def grade_in_process(prob, space=None, path=None, progress=None):
    """Grade the functions in `space`, or in the file at `path` imported here, without a child process.
    progress(i, n, case) is called as each case starts, and progress(None, n, None, done=True) at the end."""
    from practice import runner

    report = Report(prob, Path(path) if path else "notebook", prob.time_limit, LOAD_LIMIT, in_process=True,
                    memory_limit=prob.memory_limit)
    t0 = time.perf_counter()
    events, results = [], {}
    clean_stale_temp()
    with _temp_dir() as tmp:
        cases = prob.cases(Path(tmp))

        def emit(ev):
            if progress is not None and ev["ev"] == "begin":
                progress(ev["i"], len(cases), cases[ev["i"]])
            events.append(dict(ev, _at=time.monotonic()))
        if path is not None:
            module, failure = runner.load_file(path)
            space = vars(module) if module else {}
            events += [failure] if failure else []
        missing = [n for n in prob.functions if not callable((space or {}).get(n))]
        if missing and not events:
            events.append({"ev": "missing", "names": missing})
        if not events:
            events.append({"ev": "loaded"})
            calls = [(c.fn, copy.deepcopy(c.values())) for c in cases]  # the learner may change them in place
            try:
                runner.run({n: space[n] for n in prob.functions}, calls, emit, results.__setitem__,
                           str(Path(path).resolve()) if path else "<notebook>", reraise=(KeyboardInterrupt,))
            finally:
                if progress is not None:
                    progress(None, len(cases), None, done=True)
        grade_events(prob, cases, events, results.get, report)
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------- commands

def cmd_list(lang):
    records = load_progress(lang)
    print(MSG[lang]["list_head"])
    width = lambda text: sum(2 if ord(ch) >= 0x2E80 else 1 for ch in text)  # noqa: E731  (CJK is two columns)
    column = 2 + max(width(prob.title(lang)) for prob in problems().values())
    for number, prob in problems().items():
        rec = records.get(str(number))
        mark = "–" if not rec else "✓" if rec.get("accepted") else "✗"
        chapter = prob.meta.get("chapter")
        where = "" if not chapter else f"ch{chapter}" if lang == "en" else f"第 {chapter} 章"
        title, level = prob.title(lang), prob.meta.get("level", {}).get(lang, "")
        pad = " " * (column - width(title))
        print(f"  {mark} {number}  {title}{pad}{level:<7}{where}")
    print(MSG[lang]["list_foot"].format(show=cmd("show", "N"), start=cmd("start", "N")))
    return 0


def cmd_show(n, lang):
    prob = find_problem(n, lang)
    if prob is None:
        return 2
    print(prob.statement(lang).rstrip())  # it ends with the start and grade commands
    return 0


def cmd_start(n, lang):
    prob = find_problem(n, lang)
    if prob is None:
        return 2
    target = work_dir() / prob.work_name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "x", encoding="utf-8") as f:  # "x" fails if the file exists: it is never overwritten
            f.write((prob.folder / "starter.py").read_text(encoding="utf-8"))
    except FileExistsError:
        print(MSG[lang]["exists"].format(path=shown_path(target), cmd=cmd(prob.number)))
        return 0
    print(MSG[lang]["created"].format(path=shown_path(target), cmd=cmd(prob.number)))
    return 0


def cmd_test(n, lang, file=None, time_limit=None):
    prob = find_problem(n, lang)
    if prob is None:
        return 2
    if not verified(prob, lang):
        return 2
    default = work_dir() / prob.work_name
    path = Path(file) if file else default
    if not path.is_file():
        key = "is_folder" if path.is_dir() else "no_file_given" if file else "no_file"
        print(MSG[lang][key].format(path=shown_path(path), cmd=cmd("start", prob.number)), file=sys.stderr)
        return 2
    if path.suffix == ".ipynb":  # JSON, not Python: importing it would only say "name 'null' is not defined"
        print(MSG[lang]["is_notebook"].format(path=shown_path(path), n=prob.number,
                                              functions=", ".join(prob.functions)), file=sys.stderr)
        return 2
    try:
        report = run_file(prob, path, time_limit)
    except KeyboardInterrupt:
        print("\n" + MSG[lang]["interrupted"], file=sys.stderr)
        return 130
    except Exception:  # a bug in the judge itself: say so, with its traceback, rather than blame the learner
        import traceback
        print(MSG[lang]["judge_error"].format(why="an internal error"), file=sys.stderr)
        traceback.print_exc()
        return 3
    again = cmd(prob.number) if path.resolve() == default.resolve() else cmd(prob.number, "--file", shown_path(path))
    Printer(lang).report(report, shown_path(path), again, shown_path(progress_path()))
    if report.verdict == "JE":
        return 3
    record(report, lang)
    return 0 if report.verdict == "AC" else 1


HELP = """\
commands:
  list             the problems and your status: ✓ accepted, ✗ tried, – not tried
  show N           the statement of problem N (--lang zh: in Chinese)
  start N          copy problem N's starter to practice/work/ (an existing file is never overwritten)
  N  or  test N    grade your file practice/work/N_*.py; exit code 0 only when Accepted
                   (--file PATH: grade another file; --time-limit S: seconds per case)

verdicts:
  Accepted; Wrong Answer (the case, expected vs got, max |Δ|, tolerance, first bad index, and a hint when your
  answer matches a known mistake); Runtime Error (your traceback); Time Limit Exceeded; Compile Error.

examples:
  python practice/judge.py list
  python practice/judge.py show 204 --lang zh
  python practice/judge.py start 204
  python practice/judge.py 204
  python practice/judge.py 204 --file my_norm.py

Your code runs in a separate process, with a time limit per case; the judge never writes to your file.
Progress: practice/.progress.json (git-ignored). In a notebook: from practice.judge import check.
Developers: after changing a problem's reference files, run python practice/judge.py rehash (practice/README.md).
Language: --lang, else the locale (LANG=zh_CN.UTF-8 gives Chinese).
"""


def plug_in_file(number, file):
    """The plug-in mode (practice/plugin.py) with the learner's file in a child process, under the limits it was
    graded with: the sandbox (memory, processes, a reaper) and deadlines on the judge's clock, each set by the
    child's last event (plugin.main): Python, torch and the course model get STARTUP_LIMIT, importing the file
    LOAD_LIMIT, each call of the learner's functions the problem's time limit (+ GRACE), the course's own code
    between calls STARTUP_LIMIT. Past one, everything is stopped and one line says which. Returns the exit code:
    0 for the same prediction, 1 otherwise."""
    prob = find_problem(number, "en")
    path = Path(file) if file else work_dir() / prob.work_name
    model = (STARTUP_LIMIT, f"the course's model ran over {STARTUP_LIMIT:g} s between two calls of your functions")
    waits = {None: (STARTUP_LIMIT, f"Python, torch and the model took over {STARTUP_LIMIT:g} s to start"),
             "ready": (LOAD_LIMIT, f"importing your file took over {LOAD_LIMIT:g} s"),
             "loaded": model, "ret": model,
             "begin": (prob.time_limit + GRACE, "one call of your {fn} inside the model ran over "
                                                f"{prob.time_limit:g} s, exercise {prob.number}'s time limit"),
             "done": (LOAD_LIMIT, "")}  # finished: only its exit is left
    env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    print(f"plug-in: exercise {prob.number} in the whole model, in a child process under the judge's limits …",
          flush=True)
    proc = _start_sandboxed([sys.executable, str(HERE / "plugin.py"), str(prob.number), str(path.resolve())],
                            prob.memory_limit, env=env)
    q = queue.Queue()
    threading.Thread(target=_events, args=(proc.stdout, q), daemon=True).start()
    printed = _Capped(proc.stderr)
    last, same, stopped, exited, fn = None, None, None, None, "function"
    deadline = time.monotonic() + STARTUP_LIMIT
    try:
        while True:
            try:
                item = q.get(timeout=0.05)
            except queue.Empty:
                item = False
            if item is None:  # the child closed its events: it has exited
                break
            if item:
                stamp, line = item
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                kind = ev.get("ev") if isinstance(ev, dict) else None
                if kind in waits:
                    last = kind
                    same = ev.get("same") is True if kind == "done" else same
                    fn = ev["fn"] if kind == "begin" and ev.get("fn") in prob.functions else fn
                    deadline = stamp + waits[last][0]
            elif not _running(proc):  # exited, though something it started may hold the pipe open
                exited = exited or time.monotonic()
                if time.monotonic() - exited > 0.5:
                    break
            elif time.monotonic() > deadline:
                stopped = waits[last][1].format(fn=fn)
                break
    finally:  # also on Ctrl-C: never leave the learner's code running
        _kill_tree(proc)
        rc = proc.wait()
        printed.thread.join(timeout=1.0)
    for line in bytes(printed.head).decode("utf-8", "replace").splitlines():
        print(safe(line))
    if printed.total > len(printed.head):
        print(MSG["en"]["printed"].format(size=size_text(printed.total), cap=size_text(len(printed.head))))
    if last == "done":
        return 0 if same else 1
    if stopped:
        print(f"plug-in stopped: {stopped}", file=sys.stderr)
    elif rc < 0:
        how = MSG["en"]["oom_kill"] if rc == -signal.SIGKILL else f"signal {-rc}"
        print(f"plug-in stopped: the child process ended by {how}", file=sys.stderr)
    return 1


def _meant(words):
    """For a command typed by mistake: (message key, its fields) giving the command the learner meant, or None."""
    numbers = ", ".join(map(str, problems()))
    if len(words) == 1 and words[0] in ("show", "start", "test"):
        return "needs_number", dict(word=words[0], cmd=cmd(words[0], "N"), all=numbers)
    if len(words) == 1 and (words[0].endswith(".py") or os.sep in words[0] or "/" in words[0]):
        number = re.match(r"(\d{3})(_|\.py$)", os.path.basename(words[0]))
        if Path(words[0]).is_file():
            return "file_as_command", dict(cmd=cmd(number.group(1) if number else "N", "--file", words[0]))
        if number:  # no such file: they meant the problem, whose working file is practice/work/NNN_slug.py
            return "did_you_mean", dict(cmd=cmd(number.group(1)))
    if len(words) > 1 and all(w.split("_")[0].isdigit() for w in words):
        return "one_at_a_time", dict(cmd=cmd(words[0]))
    return None


def main(argv=None):
    for stream in (sys.stdout, sys.stderr):  # a console that cannot show ✓ or Chinese gets '?', not a crash
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass
    parser = argparse.ArgumentParser(prog="python practice/judge.py", epilog=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     description="Grade your solutions to the course's exercises, like an online "
                                                 "judge.")
    parser.add_argument("words", nargs="*", metavar="command", help="list | show N | start N | N | test N")
    parser.add_argument("--lang", choices=["en", "zh"], help="language of messages and statements")
    parser.add_argument("--file", metavar="PATH", help="grade this file instead of practice/work/N_*.py")
    parser.add_argument("--time-limit", type=float, metavar="S", help="seconds per case (default: the problem's)")
    parser.add_argument("--plug-in", action="store_true", help="after Accepted on a model part (204, 206, 207, 208, "
                        "211, 212), run the whole model with your part and compare the next-token prediction")
    args = parser.parse_args(argv)
    if args.time_limit is not None and not 0 < args.time_limit <= MAX_TIME_LIMIT:  # NaN fails both
        parser.error(f"--time-limit must be a number of seconds above 0 and at most {MAX_TIME_LIMIT:g}")
    lang = detect_lang(args.lang)
    words = args.words
    if words in ([], ["list"]):
        return cmd_list(lang)
    if words == ["rehash"]:
        return cmd_rehash()
    if len(words) == 2 and words[0] in ("show", "start", "test"):
        if words[0] == "show":
            return cmd_show(words[1], lang)
        if words[0] == "start":
            return cmd_start(words[1], lang)
        return cmd_test(words[1], lang, args.file, args.time_limit)
    if len(words) == 1 and words[0].split("_")[0].isdigit() and not words[0].endswith(".py") \
            and "/" not in words[0] and os.sep not in words[0]:
        code = cmd_test(words[0], lang, args.file, args.time_limit)
        if args.plug_in and code == 0:
            code = plug_in_file(words[0], args.file)
        return code
    mistaken = _meant(words)
    if mistaken:
        print(MSG[lang][mistaken[0]].format(**mistaken[1]), file=sys.stderr)
        return 2
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: unknown command {' '.join(words)!r} (see --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (judge.py show 204 | head): nothing left to say, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        code = 1
    sys.exit(code)
