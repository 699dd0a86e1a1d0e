"""The local judge for the course's exercises: it grades a learner's file the way an online judge does.

Run from the repository root: python practice/judge.py --help. In a notebook: from practice.judge import check.
The learner's file runs in a separate process (practice/runner.py) with a time limit per case. Its results come
back as data and are compared here with expected values from an oracle that is always installed (the `qwen`
package, torch, hand math); tests/test_practice.py proves those oracles equal transformers.
"""
import argparse
import copy
import importlib.util
import json
import locale
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `python practice/judge.py` puts practice/ on the path, not the repo root
    sys.path.insert(0, str(HERE.parent))

from practice.report import MSG, OUTPUT_CAP, Printer, Report, CaseResult, shown_path  # noqa: E402

STARTUP_LIMIT = 120.0  # seconds for the runner to start Python and import torch: the judge's cost, not the learner's
LOAD_LIMIT = 10.0  # seconds to import the learner's file (torch is already imported by then)
GRACE = 1.0  # a running case is stopped after its limit plus this; the verdict uses the case's own clock


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


# ---------------------------------------------------------------- progress: a git-ignored JSON file, replaced atomically

def progress_path():
    return Path(os.environ.get("PRACTICE_PROGRESS") or HERE / ".progress.json")


def work_dir():
    return Path(os.environ.get("PRACTICE_WORK") or HERE / "work")


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


def record(report, lang):
    records = load_progress(lang)
    key = str(report.problem.number)
    records[key] = {"accepted": bool(records.get(key, {}).get("accepted")) or report.verdict == "AC",
                    "last": report.verdict, "passed": report.passed, "total": len(report.results),
                    "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "file": str(report.file)}
    save_progress(records, lang)


# ---------------------------------------------------------------- from the runner's events to verdicts

def grade_events(problem, cases, events, output, report, stopped=None, died=None):
    """Per-case verdicts from the runner's events (both ways of running share this).

    output(i): the learner's result for case i. stopped: "load" or "case" when the judge killed the runner for
    taking too long. died: "exit:N" or "signal:N" when the runner ended without finishing."""
    from practice.grading import compare, diagnose

    report.results = [CaseResult(c) for c in cases]
    begun = set()
    for ev in events:
        kind = ev.get("ev")
        if kind == "compile_error":
            report.verdict, report.message = "CE", ev.get("msg", "")
            return report
        if kind == "missing":
            report.verdict, report.message = "CE", "missing:" + ", ".join(ev.get("names", []))
            return report
        if kind == "load_error":
            report.verdict = "RE"
            report.message = ev.get("tb", "") + (f"\nsysexit:{ev.get('code')}" if ev.get("exc") == "SystemExit" else "")
            return report
        if kind in ("begin", "end") and ev.get("i") not in range(len(cases)):
            continue  # not from the runner (it cannot happen unless something writes to the judge's pipe)
        if kind == "begin":
            begun.add(ev["i"])
        elif kind == "end":
            r = report.results[ev["i"]]
            r.time = ev.get("t")
            if not ev.get("ok"):
                r.verdict = "RE"
                r.error = ev.get("tb", "") + (f"\nsysexit:{ev.get('code')}" if ev.get("exc") == "SystemExit" else "")
                r.hints = error_hints(problem, ev.get("tb", ""))
                continue
            try:
                r.got, r.mutated = output(ev["i"]), bool(ev.get("mutated"))
            except Exception as e:  # the saved result is gone or unreadable (the learner's code deleted it?)
                r.verdict, r.error = "RE", f"the judge could not read your result back: {type(e).__name__}: {e}"
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
    if stopped == "load":
        report.verdict, report.message = "TLE", "load"
        return report
    for i in begun:  # begun but never ended: stopped by the judge, or the process died
        r = report.results[i]
        if r.verdict is None:
            r.verdict, r.error = ("TLE", "") if stopped == "case" else ("RE", f"died:{died}")
    failure = report.failure
    if failure:
        report.verdict = failure.verdict
    elif any(r.verdict is None for r in report.results):  # ended between cases (cannot happen with a sound runner)
        report.verdict, report.message = "JE", f"the runner stopped early ({died})"
    else:
        report.verdict = "AC"
    return report


def error_hints(problem, text):
    keys = ["not_implemented"] if text and text.splitlines()[-1].startswith("NotImplementedError") else []
    return keys + [key for pattern, key, _ in problem.error_hints if re.search(pattern, text)]


# ---------------------------------------------------------------- running a file in a child process

def _events(stream, q):
    for line in iter(stream.readline, b""):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            q.put(event)
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


def _kill_tree(proc):
    """Kill the runner and whatever it started: it leads its own process group (session) on POSIX."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass


def run_file(problem, path, time_limit=None, load_limit=LOAD_LIMIT):
    """Grade the file at `path` in a separate process. Returns a Report; nothing in the file can make it raise."""
    import torch

    report = Report(problem, Path(path), float(time_limit or problem.time_limit), float(load_limit))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qwen-practice-", ignore_cleanup_errors=True) as tmp:
        tmp = Path(tmp)
        for sub in ("data", "out", "cwd"):
            (tmp / sub).mkdir()
        cases = problem.cases(tmp / "data")
        torch.save([(c.fn, c.values()) for c in cases], tmp / "inputs.pt")
        command = [sys.executable, str(HERE / "runner.py"), str(tmp / "inputs.pt"), str(tmp / "out"),
                   str(Path(path).resolve()), json.dumps(problem.functions)]
        env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        group = ({"start_new_session": True} if os.name == "posix"
                 else {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)})
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=tmp / "cwd", env=env, **group)
        q = queue.Queue()
        threading.Thread(target=_events, args=(proc.stdout, q), daemon=True).start()
        printed = _Capped(proc.stderr)  # the learner's prints: the runner points its stdout there too
        events, phase, stopped, exited = [], "start", None, None
        deadline = time.monotonic() + STARTUP_LIMIT
        try:
            while True:
                try:
                    ev = q.get(timeout=0.05)
                except queue.Empty:
                    ev = False
                if ev is None:
                    break
                if ev:
                    events.append(ev)
                    kind = ev.get("ev")
                    if kind in ("done", "compile_error", "missing", "load_error"):
                        break
                    phase = {"ready": "load", "begin": "case"}.get(kind, "between")
                    deadline = time.monotonic() + (report.time_limit + GRACE if phase == "case" else report.load_limit)
                elif proc.poll() is not None:  # exited, though something it started may hold the pipe open
                    exited = exited or time.monotonic()
                    if time.monotonic() - exited > 0.5:
                        break
                elif time.monotonic() > deadline:
                    stopped = phase
                    break
        finally:  # also on Ctrl-C: never leave the learner's code running
            _kill_tree(proc)
            rc = proc.wait()
            printed.thread.join(timeout=1.0)
        while not q.empty():
            ev = q.get_nowait()
            if ev:
                events.append(ev)
        report.output, report.output_bytes = bytes(printed.head), printed.total
        if not any(ev.get("ev") == "ready" for ev in events):
            report.verdict = "JE"
            report.message = (f"Python and torch took over {STARTUP_LIMIT:g} s to start" if stopped
                              else f"the runner exited with code {rc} before starting")
            return report
        died = f"signal:{-rc}" if rc < 0 else f"exit:{rc}"
        grade_events(problem, cases, events, lambda i: torch.load(tmp / "out" / f"{i}.pt", weights_only=True),
                     report, stopped if stopped in ("load", "case") else None, died)
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------- grading in this process (notebooks)

def check(problem, *objects, lang=None, save=True, **functions):
    """Grade functions defined in a notebook (or any Python session) and print the verdict; True if Accepted.

    check(204, rms_norm, gated_rms_norm, l2norm)   # functions, matched by their names
    check(204, globals())                           # or a namespace (a dict or a module) that defines them
    check(204, rms_norm=my_norm, ...)               # or explicit names

    It runs in this process, since the functions live here. So a case that hangs cannot be stopped (interrupt the
    kernel), and a case slower than the limit is marked Time Limit Exceeded only once it returns.
    """
    lang = lang or detect_lang()
    prob = find_problem(problem, lang)
    if prob is None:
        return False
    space = {}
    for obj in objects:
        space.update(obj if isinstance(obj, dict) else {obj.__name__: obj} if callable(obj) else vars(obj))
    space.update(functions)
    report = grade_in_process(prob, space)
    Printer(lang).report(report, "notebook", None, shown_path(progress_path()))
    if save:
        record(report, lang)
    return report.verdict == "AC"


def grade_in_process(prob, space=None, path=None):
    """Grade the functions in `space`, or in the file at `path` imported here, without a child process."""
    from practice import runner

    report = Report(prob, Path(path) if path else "notebook", prob.time_limit, LOAD_LIMIT, in_process=True)
    t0 = time.perf_counter()
    events, results = [], {}
    with tempfile.TemporaryDirectory(prefix="qwen-practice-", ignore_cleanup_errors=True) as tmp:
        cases = prob.cases(Path(tmp))
        if path is not None:
            module, failure = runner.load_file(path)
            space = vars(module) if module else {}
            events += [failure] if failure else []
        missing = [n for n in prob.functions if not callable((space or {}).get(n))]
        if missing and not events:
            events.append({"ev": "missing", "names": missing})
        if not events:
            calls = [(c.fn, copy.deepcopy(c.values())) for c in cases]  # the learner may change them in place
            runner.run({n: space[n] for n in prob.functions}, calls, events.append, results.__setitem__,
                       str(Path(path).resolve()) if path else "<notebook>", reraise=(KeyboardInterrupt,))
        grade_events(prob, cases, events, results.get, report)
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------- commands

def cmd_list(lang):
    records = load_progress(lang)
    print(MSG[lang]["list_head"])
    for number, prob in problems().items():
        rec = records.get(str(number))
        mark = "–" if not rec else "✓" if rec.get("accepted") else "✗"
        chapter = prob.meta.get("chapter")
        where = "" if not chapter else f"ch{chapter}" if lang == "en" else f"第 {chapter} 章"
        title, level = prob.title(lang), prob.meta.get("level", {}).get(lang, "")
        pad = " " * max(1, 44 - sum(2 if ord(ch) >= 0x2E80 else 1 for ch in title))
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
    default = work_dir() / prob.work_name
    path = Path(file) if file else default
    if not path.is_file():
        print(MSG[lang]["no_file"].format(path=shown_path(path), cmd=cmd("start", prob.number)), file=sys.stderr)
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
Language: --lang, else the locale (LANG=zh_CN.UTF-8 gives Chinese).
"""


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
    args = parser.parse_args(argv)
    if args.time_limit is not None and not args.time_limit > 0:
        parser.error("--time-limit must be a positive number of seconds")
    lang = detect_lang(args.lang)
    words = args.words
    if words in ([], ["list"]):
        return cmd_list(lang)
    if len(words) == 2 and words[0] in ("show", "start", "test"):
        if words[0] == "show":
            return cmd_show(words[1], lang)
        if words[0] == "start":
            return cmd_start(words[1], lang)
        return cmd_test(words[1], lang, args.file, args.time_limit)
    if len(words) == 1 and words[0].split("_")[0].isdigit():
        return cmd_test(words[0], lang, args.file, args.time_limit)
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: unknown command {' '.join(words)!r} (see --help)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
