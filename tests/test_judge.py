"""The judge as a learner meets it: the command line, the child process that runs learner code (hostile files
included), the progress file, and check() for notebooks."""
import ast
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import mistake_file
from practice.child import run_file
from practice.events import Outcome, Report, grade_events
from practice.judge import check, grade_in_process, problems
from practice.limits import GRACE, OUTPUT_CAP
from practice.messages import detect_lang
from practice.report import Printer
from practice.store import load_progress, record, save_progress

REPO = Path(__file__).resolve().parent.parent
PRACTICE = REPO / "practice"
HOSTILE_DIR = REPO / "tests" / "hostile"  # files that exist to test the judge: they hang, crash, flood, forge
HOSTILE = sorted(HOSTILE_DIR.glob("*.py"))
PROBLEMS = problems()


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Progress and work files in a temporary folder, for this process and for the judges it starts."""
    monkeypatch.setenv("PRACTICE_PROGRESS", str(tmp_path / "progress.json"))
    monkeypatch.setenv("PRACTICE_WORK", str(tmp_path / "work"))
    monkeypatch.setenv("LANG", "C.UTF-8")
    for var in ("LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def judge(*args, env_extra=None, timeout=120):
    run_env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(PRACTICE / "judge.py"), *map(str, args)], cwd=REPO, env=run_env,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------- learner code in a child process

# files that misbehave only in what they return or raise are graded in this process (the same code, less the
# transport); the others need the child process: they hang, crash, kill the process, print megabytes, spawn processes
IN_PROCESS = {"syntax_error", "import_error", "missing_function", "returns_nan", "returns_fp64", "returns_garbage",
              "mutates_input", "raises", "sys_exit", "exits_at_import", "escapes", "odd_returns"}
HUNG = 90  # seconds: a judge still running after this is hung (it must always end)


def _graded_in_child(prob, files):
    """run_file on each file, two at a time, each in a daemon thread: a judge that hangs (still running after HUNG
    seconds) or raises becomes a failed test ("hung" or the exception), never a hung test session."""
    import threading

    out, pending, running = {}, list(files), {}

    def one(f):
        try:
            rep = run_file(prob, f, time_limit=1.0, load_limit=2.0)
        except BaseException as e:  # noqa: BLE001 - the judge must never raise; the test says what it raised
            rep = e
        out.setdefault(f, rep)
    while pending or running:
        for f, (thread, started) in list(running.items()):
            if not thread.is_alive() or time.monotonic() - started > HUNG:
                out.setdefault(f, "hung")
                del running[f]
        while pending and len(running) < 2:
            f = pending.pop(0)
            running[f] = (threading.Thread(target=one, args=(f,), daemon=True), time.monotonic())
            running[f][0].start()
        time.sleep(0.05)
    return out


@pytest.fixture(scope="module")
def hostile_reports():
    """Every hostile file graded, the dangerous ones through the real child process, two at a time, with 1 s per
    case and 2 s to import."""
    prob = PROBLEMS[204]
    _ = prob.module  # import cases.py once, before the threads share it
    before = {f: digest(f) for f in HOSTILE}
    t0 = time.monotonic()
    reports = _graded_in_child(prob, [f for f in HOSTILE if f.stem not in IN_PROCESS])
    reports.update({f: grade_in_process(prob, path=f) for f in HOSTILE if f.stem in IN_PROCESS})
    print(f"{len(HOSTILE)} hostile files graded in {time.monotonic() - t0:.1f} s")
    assert {f: digest(f) for f in HOSTILE} == before, "the judge must never write to a learner's file"
    return reports


def shown(report, lang="en"):
    """The report as the learner sees it."""
    lines = []
    Printer(lang, lines.append).report(report, "file.py", "again", "progress.json")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_file_gets_its_verdict(hostile_reports, path):
    report = hostile_reports[path]
    assert isinstance(report, Report), f"the judge {'hung' if report == 'hung' else 'raised ' + repr(report)}"
    words = path.read_text().splitlines()[0].split(":", 1)[1].split()
    verdict, marks = words[0], words[1:]
    assert report.verdict == verdict, (report.verdict, report.outcome, report.failure)
    failure = report.failure
    for mark in marks:
        if mark == "case=1":
            assert failure is report.results[0]
        elif mark == "load":
            assert failure is None and report.outcome is not None
        elif mark == "died":
            assert failure.outcome.kind == "died"
        else:
            assert mark in failure.hints
    assert len(report.output) <= OUTPUT_CAP


@pytest.mark.slow
def test_hostile_details(hostile_reports):
    r = {p.stem: rep for p, rep in hostile_reports.items()}
    # the traceback is cut to the learner's own frames
    tb = r["raises"].failure.outcome.detail
    assert 'File "raises.py", line' in tb and "in _scale" in tb and "runner.py" not in tb and "ValueError" in tb
    # a killed case stops the run: the later cases are not run, never wrongly accepted
    assert r["loops"].failure.time is None and all(x.verdict is None for x in r["loops"].results[1:])
    assert r["loops"].seconds < 60, "stopped after its 1 s limit (plus the runner's start, slow on a busy machine)"
    # a case over its limit that still returns is judged by its own clock
    assert r["slow"].failure.time > 1.0 and r["slow"].results[1].verdict == "AC"
    # sys.exit inside a case is an ordinary Runtime Error: the other functions' cases still run and pass
    assert r["sys_exit"].failure.outcome.exit == "3" and r["sys_exit"].passed == 13
    assert r["segfault"].failure.outcome == Outcome("died", -int(signal.SIGSEGV))
    assert r["os_exit"].failure.outcome == Outcome("died", 0)
    # printed output: kept up to the cap, counted beyond it
    assert r["loops"].output_bytes > 10 * OUTPUT_CAP and len(r["loops"].output) == OUTPUT_CAP
    assert r["prints_megabytes"].output_bytes > 10_000_000
    # garbage results are described, not crashed on
    got = {x.case.fn: x.mismatch.info["got"] for x in r["returns_garbage"].results if x.mismatch}
    assert got == {"rms_norm": "a generator", "gated_rms_norm": "'a tensor, honestly'", "l2norm": "a numpy.ndarray"}
    assert r["returns_nan"].failure.mismatch.info["nan"] == 4
    assert r["mutates_input"].failure.mutated and r["mutates_input"].failure.mismatch is None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look at processes")
def test_processes_started_by_learner_code_are_killed(hostile_reports):
    report = hostile_reports[HOSTILE_DIR / "spawns_child.py"]
    assert report.verdict == "AC"
    pid = int(report.output.decode().split("child pid ")[1].split()[0])
    time.sleep(0.2)
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] in ("Z", "X"), "the grandchild survived"


def _alive(pid):
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look at processes")
def test_daemons_started_by_learner_code_are_killed(hostile_reports):
    """A process in a new session and a double-forked daemon both escape a process-group kill; the runner is a
    child subreaper, so the judge sees them and kills them before the verdict."""
    report = hostile_reports[HOSTILE_DIR / "daemon.py"]
    assert report.verdict == "AC"
    pids = [int(w.split()[0]) for w in report.output.decode().split("daemon pid ")[1:]]
    assert len(pids) == 2
    time.sleep(0.2)
    assert not [p for p in pids if _alive(p)], "a daemon outlived the verdict"


@pytest.mark.slow
def test_crash_at_import_is_the_learners_runtime_error(hostile_reports):
    """os._exit, a segfault, SIGKILL (the out-of-memory killer) or closed pipes while the file is imported: a
    Runtime Error with the reason, recorded like any other; not the judge's own error."""
    r = {p.stem: rep for p, rep in hostile_reports.items()}
    reasons = {"os_exit_at_import": "exit code 0", "segfault_at_import": "SIGSEGV",
               "killed_at_import": "SIGKILL", "closes_fds_at_import": ""}
    for name, reason in reasons.items():
        report = r[name]
        assert report.verdict == "RE" and report.failure is None, (name, report.verdict, report.outcome)
        text = shown(report)
        assert "while your file was being imported" in text and reason in text, text
        assert "not your code's fault" not in text
    assert "out of memory?" in shown(r["killed_at_import"])


@pytest.mark.slow
def test_collapsed_and_capped_traceback(hostile_reports):
    """Mutual recursion 200,000 deep: the repeated frames are collapsed into one line, and the report stays short."""
    report = hostile_reports[HOSTILE_DIR / "recursion.py"]
    text = shown(report)
    assert "RecursionError" in text and "the same 4 lines repeated" in text, text[:3000]
    assert len(text.splitlines()) < 60 and len(text) < 8000, (len(text.splitlines()), len(text))


@pytest.mark.slow
def test_memory_limit(hostile_reports):
    """Asking for more memory than the judge allows is a Runtime Error that says "out of memory"."""
    report = hostile_reports[HOSTILE_DIR / "hogs_memory.py"]
    assert report.verdict == "RE" and "out_of_memory" in report.failure.hints
    assert "out of memory" in shown(report)


@pytest.mark.slow
def test_a_replaced_clock_does_not_hide_a_slow_case(hostile_reports):
    report = hostile_reports[HOSTILE_DIR / "replaces_clock.py"]
    assert report.verdict == "TLE" and report.failure is report.results[0] and report.failure.time >= 1.5


@pytest.mark.slow
def test_hostile_pipes_and_files_end_the_run(hostile_reports):
    """A named pipe in place of a saved result, a forged event whose time is not a number, an endless stream of
    keep-alive events: each is the learner's Runtime Error, and the judge ends soon after."""
    r = {p.stem: rep for p, rep in hostile_reports.items()}
    assert "not a regular file" in r["fifo_result"].failure.outcome.detail
    for name in ("forges_events", "keeps_alive"):
        assert "garbled" in shown(r[name]), shown(r[name])
    assert r["keeps_alive"].seconds < 60


@pytest.mark.slow
def test_terminal_escapes_are_shown_escaped(hostile_reports):
    report = hostile_reports[HOSTILE_DIR / "escapes.py"]
    report.output = "\x1b[8A\x1b[2K\rVerdict   Accepted\x1b[0m\n".encode()  # what a child process would have kept
    report.output_bytes = len(report.output)
    text = shown(report)
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b[8A" in text and "\\x1b[2J" in text


@pytest.mark.slow
def test_any_return_value_is_judged(hostile_reports):
    """A sparse tensor, a meta tensor, a numpy array, a list: Wrong Answer that says what came back. A tensor
    subclass (nn.Parameter) is compared as the plain tensor it is."""
    report = hostile_reports[HOSTILE_DIR / "odd_returns.py"]
    got = [shown_got(r) for r in report.results if r.case.fn == "rms_norm"]
    assert "sparse" in got[0] and "meta" in got[1] and "numpy" in got[2] and got[3].startswith("[")
    assert [r.verdict for r in report.results if r.case.fn == "rms_norm"][4:] == ["AC"] * 7
    text = shown(report)
    assert "expected a dense torch.Tensor" in text


def shown_got(result):
    from practice.grading import describe
    return describe(result.got)


@pytest.mark.slow
def test_solutions_through_the_child_process():
    """The end-to-end path for every problem (inputs and results cross the process boundary); the starters and
    the wrong solutions are graded in tests/test_practice.py, and a starter through the command line below. The
    runner gives the learner's code one thread (test_learner_code_runs_on_one_thread), so a loaded machine's thread
    pool cannot eat a case's time: 210's reference takes under 10 % of its limit on every case."""
    for p in PROBLEMS.values():
        _ = p.module  # import each cases.py before the threads share it
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda p: run_file(p, p.folder / "solution.py"), PROBLEMS.values()))
    for p, rep in zip(PROBLEMS.values(), reports):
        assert rep.verdict == "AC", (p.number, rep.failure, rep.outcome)
        assert all(r.time is not None and r.time < p.time_limit for r in rep.results)
    report = reports[list(PROBLEMS).index(210)]
    slowest = max(r.time for r in report.results)
    assert report.verdict == "AC" and slowest < 0.1 * PROBLEMS[210].time_limit, shown(report)


# ---------------------------------------------------------------- the command line

@pytest.mark.slow
def test_help_and_bad_commands(env):
    out = judge("--help")
    assert out.returncode == 0 and "start N" in out.stdout and "--lang" in out.stdout
    unknown = judge("999")
    assert unknown.returncode == 2 and "No problem 999" in unknown.stderr
    assert judge("frobnicate").returncode == 2
    missing = judge("204", "--file", env / "nope.py")
    assert missing.returncode == 2 and "judge.py start 204" in missing.stderr


@pytest.mark.slow
def test_list_show_and_languages(env):
    out = judge("list")
    assert out.returncode == 0
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("  ")]
    assert [ln.split()[1] for ln in rows] == [str(n) for n in sorted(problems())] and all("–" in ln for ln in rows)
    en, zh = judge("show", "204"), judge("show", "204", "--lang", "zh")
    assert "def rms_norm(x: torch.Tensor" in en.stdout and "Tolerances" in en.stdout
    assert "零中心" in zh.stdout and "容差" in zh.stdout
    assert "练习题" in judge("list", env_extra={"QWEN_LANG": "", "LANG": "zh_CN.UTF-8"}).stdout
    assert "Practice problems" in judge("list", env_extra={"QWEN_LANG": "", "LANG": "zh_CN.UTF-8",
                                                           "LC_ALL": "en_US.UTF-8"}).stdout


@pytest.mark.slow
def test_start_never_overwrites(env):
    out = judge("start", "204")
    work = env / "work" / "204_rmsnorm.py"
    assert out.returncode == 0 and "work/204_rmsnorm.py" in out.stdout.replace(os.sep, "/")
    assert work.read_text() == (PRACTICE / "204_rmsnorm" / "starter.py").read_text()
    work.write_text("# my own work\n")
    again = judge("start", "204")
    assert again.returncode == 0 and "already exists" in again.stdout
    assert work.read_text() == "# my own work\n"


@pytest.mark.slow
def test_grade_the_working_file(env):
    """start -> Runtime Error (the starter) -> write the solution -> Accepted; progress and list follow."""
    judge("start", "204")
    work = env / "work" / "204_rmsnorm.py"
    before = digest(work)
    out = judge("204")
    assert out.returncode == 1 and "Verdict   Runtime Error on case 1" in out.stdout
    assert "NotImplementedError" in out.stdout and digest(work) == before
    assert json.loads((env / "progress.json").read_text())["problems"]["204"]["accepted"] is False
    shutil.copy(PRACTICE / "204_rmsnorm" / "solution.py", work)
    out = judge("test", "204")
    assert out.returncode == 0 and "Verdict   Accepted" in out.stdout and "All 24 cases passed" in out.stdout
    assert [ln for ln in judge("list").stdout.splitlines() if " 204 " in ln][0].strip().startswith("✓")


@pytest.mark.slow
def test_wrong_answer_report(env, tmp_path):
    out = judge("204", "--file", mistake_file(204, "plain_weight", tmp_path), "--lang", "en")
    print(out.stdout)
    assert out.returncode == 1
    for line in ("Verdict   Wrong Answer on case 1 (example 1)", "Call      rms_norm(x=fp32[1, 4]",
                 "Max |Δ|   1.46059; 4 of 4 elements outside the tolerance",
                 "First bad index (0, 0): expected 0.365148, got 0",
                 "Tolerance |Δ| <= 1e-06·max(1, max|y|) + 1e-05·|y|", "Hint      looks like x̂ · w"):
        assert line in out.stdout, line

    crash = judge("204", "--file", HOSTILE_DIR / "os_exit.py")
    assert crash.returncode == 1 and crash.stderr == "" and "the process ended during this case" in crash.stdout


@pytest.mark.slow
def test_reports_in_chinese(hostile_reports):
    lines = []
    Printer("zh", lines.append).report(hostile_reports[HOSTILE_DIR / "loops.py"], "loops.py", "again", "p")
    text = "\n".join(lines)
    assert "结果      用例 1（样例 1）：超出时间限制" in text and "评测器已终止运行" in text, text


# ---------------------------------------------------------------- progress

@pytest.mark.slow
def test_corrupt_progress_is_a_warning_not_a_crash(env, capsys):
    path = env / "progress.json"
    for bad in ("{not json", '{"version": 1, "problems": ', '["a list"]', "\x00\xff"):
        path.write_text(bad, encoding="latin-1")
        assert load_progress() == {}
        assert "corrupt" in capsys.readouterr().err
        out = judge("list")
        assert out.returncode == 0 and "corrupt" in out.stderr
    record(Report(PROBLEMS[204], Path("x.py"), verdict="WA"), "en")
    assert json.loads(path.read_text())["problems"]["204"]["accepted"] is False


def _kill_during_save(env, where):
    """Save progress in a child that kills itself with SIGKILL at `where`; return the file's text afterwards."""
    script = f"""
import os, signal, sys
sys.path.insert(0, {str(REPO)!r})
import practice.store as j
die = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
if {where!r} == "replace":
    os.replace = die          # the new file is written and flushed, not yet in place
elif {where!r} == "write":
    os.fsync = die            # the temporary file is half-way
j.save_progress({{"204": {{"accepted": True}}}})
"""
    proc = subprocess.run([sys.executable, "-c", script], env=os.environ, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return (env / "progress.json").read_text()


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_progress_survives_a_judge_killed_while_saving(env):
    save_progress({"201": {"accepted": True}})
    old = (env / "progress.json").read_text()
    for where in ("write", "replace"):
        assert _kill_during_save(env, where) == old  # still the old, whole file
        assert json.loads(old)["problems"]["201"]["accepted"] is True


# ---------------------------------------------------------------- notebooks and languages

def _solution(number):
    prob = PROBLEMS[number]
    spec = importlib.util.spec_from_file_location(f"solution_{number}", prob.folder / "solution.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_check_in_a_notebook(env, capsys):
    sol = _notebook((PROBLEMS[204].folder / "solution.py").read_text())  # the learner's own cell: recorded
    assert check(204, sol.rms_norm, sol.gated_rms_norm, sol.l2norm) is True
    assert "Verdict   Accepted" in capsys.readouterr().out
    assert load_progress()["204"]["accepted"] is True
    assert check(204, vars(sol), rms_norm=lambda x, w, eps=1e-6: sol.rms_norm(x, w - 1, eps), save=False) is False
    out = capsys.readouterr().out
    assert "Wrong Answer" in out and "(1 + w)" in out
    assert check(204, sol.rms_norm) is False and "does not define gated_rms_norm, l2norm" in capsys.readouterr().out
    assert check(203, _solution(203), lang="zh") is True and "通过" in capsys.readouterr().out
    assert check(999) is False


@pytest.mark.slow
def test_importable_from_the_notebooks_folder(tmp_path):
    code = "from practice.judge import check; print(check.__name__)"  # installed with the package, no path tricks
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO / "notebooks", capture_output=True, text=True)
    assert out.stdout.strip() == "check", out.stderr


def test_language_from_flag_qwen_lang_or_locale(monkeypatch):
    """The judge follows the course's switch: --lang, else QWEN_LANG, else the locale."""
    for var in ("QWEN_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert detect_lang() == "zh" and detect_lang("en") == "en"
    monkeypatch.setenv("LC_ALL", "en_GB.UTF-8")
    assert detect_lang() == "en"
    monkeypatch.setenv("QWEN_LANG", "zh")
    assert detect_lang() == "zh" and detect_lang("en") == "en"


@pytest.mark.slow
def test_qwen_lang_makes_the_judge_speak_chinese(tmp_path):
    env = dict(os.environ, QWEN_LANG="zh", LANG="en_US.UTF-8")
    r = subprocess.run([sys.executable, str(REPO / "practice" / "judge.py"), "list"], capture_output=True, text=True,
                       env=env, cwd=REPO, timeout=60)
    assert r.returncode == 0 and "零中心的 RMSNorm" in r.stdout, r.stdout + r.stderr


ENGLISH = re.compile(r"\b[a-z]{2,}(?: [a-z]{2,}){4,}\b")  # five English words in a row: a sentence left English


def test_the_judge_speaks_chinese_from_its_help_on(env, capsys, tmp_path):
    """--lang zh: the help (argparse's own words too), a mistyped command and a report are Chinese, with Chinese
    punctuation; the language this process spoke before is kept afterwards."""
    from practice.judge import main
    from qwen import lang

    before = lang.language()
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("用法：") and "位置参数：" in out and "显示本帮助并退出" in out and "  命令  " in out
    assert "✓ 已通过，✗ 做过但未通过，– 还没做" in out and "--plug-in：接入模型" in out
    assert [line for line in out.splitlines() if ENGLISH.search(line)] == []
    assert main(["--lang", "zh", "999"]) == 2 and main(["--lang", "zh", "show"]) == 2
    err = capsys.readouterr().err
    assert "没有第 999 题。现有的题目：201、202、" in err and "show 后面要写题号" in err
    assert lang.language() == before
    prob = PROBLEMS[204]
    cases = prob.cases(tmp_path)
    events = [{"ev": "ready"}, {"ev": "loaded"}, {"ev": "begin", "i": 0}, {"ev": "ret", "i": 0, "t": 0.0},
              {"ev": "end", "i": 0, "ok": True, "mutated": False}]
    report = grade_events(prob, cases, events, lambda i: cases[i].expected * 2, Report(prob, Path("x.py"), 3.0, 10.0))
    text = shown(report, "zh")
    assert "结果      用例 1（样例 1）：答案错误" in text and "个超出容差" in text and "；" in text, text
    assert [line for line in text.splitlines() if ENGLISH.search(line)] == [], text


@pytest.mark.slow
def test_time_limit_is_validated(env):
    for bad in ("0", "-1", "nan", "inf", "1e9"):
        out = judge("204", "--file", PRACTICE / "204_rmsnorm" / "solution.py", "--time-limit", bad)
        assert out.returncode == 2 and "--time-limit" in out.stderr, (bad, out.returncode, out.stdout[-300:])


# ---------------------------------------------------------------- check() in a notebook, more ways to pass functions

def test_check_accepts_partials_modules_and_objects(env, capsys):
    import functools

    import torch

    sol = _solution(204)
    assert check(204, functools.partial(sol.rms_norm), sol.gated_rms_norm, sol.l2norm, save=False) is True
    out = capsys.readouterr().out
    assert "case 24/24" in out and "interrupt the kernel" in out

    class Norms(torch.nn.Module):  # an nn.Module instance whose methods are the problem's functions
        rms_norm, gated_rms_norm, l2norm = (staticmethod(sol.rms_norm), staticmethod(sol.gated_rms_norm),
                                            staticmethod(sol.l2norm))
    assert check(204, Norms(), save=False) is True
    capsys.readouterr()
    assert check(204, sol, save=False) is True  # a module
    capsys.readouterr()
    assert check(204, 42, save=False) is False
    out = capsys.readouterr().out
    assert "check() takes" in out and len(out.strip().splitlines()) == 1
    assert check(204, sol.rms_norm, sol.gated_rms_norm, my_norm=sol.l2norm, save=False) is False
    assert "my_norm is not one of" in capsys.readouterr().out


@pytest.mark.slow
def test_problems_ship_with_a_non_editable_install(tmp_path):
    """Build the wheel from a copy of the sources, unpack it as pip would, and grade from there: the problem folders
    and the checksums the build writes are in it (with no git, they decide: an edited qwen/norm.py stops 204), and
    progress goes to the user's home, not into site-packages."""
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "work", ".progress.json", "checksums.json")
    for pkg in ("qwen", "practice", "book", "app"):  # the packages pyproject.toml lists
        shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
    build = subprocess.run([sys.executable, "-c", "from setuptools.build_meta import build_wheel; "
                            f"print(build_wheel({str(tmp_path / 'dist')!r}))"], cwd=src, capture_output=True,
                           text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = tmp_path / "dist" / build.stdout.split()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    for prob in PROBLEMS.values():
        for name in ("meta.json", "cases.py", "mistakes.toml", "README.md", "README.zh.md", "starter.py",
                     "solution.py"):
            assert f"practice/{prob.folder.name}/{name}" in names
    assert "practice/checksums.json" in names and "practice/runner.py" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import importlib.util, practice.judge as j\n"
            "spec = importlib.util.spec_from_file_location('s', j.HERE / '204_rmsnorm' / 'solution.py')\n"
            "s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)\n"
            "c = {}; exec(compile((j.HERE / '202_param_count' / 'solution.py').read_text(), '<cell>', 'exec'), c)\n"
            "print(j.HERE); print(j.check(202, c) and j.check(204, s))\n"
            "open(j.HERE.parent / 'qwen' / 'norm.py', 'a').write('# edited')\n"
            "print(j.check(204, s), j.check(202, c))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRACTICE_")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == str(site / "practice") and "True" in lines and lines[-1] == "False True", out.stdout
    assert "differ from the installed course (practice/checksums.json): qwen/norm.py" in out.stderr, out.stderr
    assert (tmp_path / "home" / ".qwen-by-hand" / "progress.json").is_file()
    assert not list((site / "practice").glob("*progress*"))


# ---------------------------------------------------------------- progress: concurrent judges, killed judges

@pytest.mark.slow
def test_concurrent_judges_keep_every_record(env):
    """Six judges record at once, each a different problem, each slow between reading and writing the file: with
    the lock, no record is lost."""
    script = f"""
import sys, time, types
sys.path.insert(0, {str(REPO)!r})
import practice.judge as j
import practice.store as store
n = int(sys.argv[1])
slow = store.save_progress
def save(records, lang="en"):
    time.sleep(0.3)
    slow(records, lang)
store.save_progress = save  # record() lives in practice/store.py
rep = types.SimpleNamespace(problem=types.SimpleNamespace(number=n), verdict="WA", passed=0, results=[], file="x")
j.record(rep, "en")
"""
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(300, 306)]
    assert [p.wait(timeout=60) for p in procs] == [0] * 6
    assert sorted(load_progress()) == [str(n) for n in range(300, 306)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the runner")
def test_kill_9_leaves_no_processes_and_no_temporary_folders(env, monkeypatch):
    """kill -9 the judge while learner code runs: the runner and everything it started stop, and the temporary
    folder it leaves is removed by the next judge that starts."""
    save_progress({"201": {"accepted": True}})
    old = (env / "progress.json").read_text()
    tmp = env / "tmp"
    tmp.mkdir()
    learner = env / "loops_forever.py"
    learner.write_text("import subprocess, sys\n"
                       "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
                       " start_new_session=True)\n"
                       "open('started', 'w').close()\n"
                       "def rms_norm(x, weight, eps=1e-6):\n    while True:\n        pass\n"
                       "gated_rms_norm = l2norm = rms_norm\n")
    proc = subprocess.Popen([sys.executable, str(PRACTICE / "judge.py"), "204", "--file", learner,
                             "--time-limit", "60"], cwd=REPO, env=dict(os.environ, TMPDIR=str(tmp)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 100
    while not list(tmp.glob("*/cwd/started")):
        assert time.monotonic() < deadline and proc.poll() is None, "the runner never imported the file"
        time.sleep(0.1)
    time.sleep(0.5)  # the runner is now inside the learner's endless loop
    tree = _descendants(proc.pid)
    proc.kill()
    proc.wait()
    assert (env / "progress.json").read_text() == old
    deadline = time.monotonic() + 5
    while [p for p in tree if _alive(p)]:
        assert time.monotonic() < deadline, "a process outlived its judge"
        time.sleep(0.1)
    assert [p.name for p in tmp.iterdir()], "the killed judge left its temporary folder (as it must)"
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    grade_in_process(PROBLEMS[204], path=PRACTICE / "204_rmsnorm" / "solution.py")
    assert list(tmp.iterdir()) == [], "the next judge did not clean it up"


def _descendants(pid):
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(c) for t in Path(f"/proc/{p}/task").iterdir()
                    for c in (t / "children").read_text().split()]
        except OSError:
            kids = []
        found += kids
        todo += kids
    return found


MLP_BODY = ("import torch.nn.functional as F\n\n\ndef silu(x):\n    return F.silu(x)\n\n\n"
            "def swiglu_mlp(x, gate_weight, up_weight, down_weight):\n{extra}"
            "    return F.linear(F.silu(F.linear(x, gate_weight)) * F.linear(x, up_weight), down_weight)\n")


@pytest.mark.slow
def test_a_file_that_imports_the_answer_is_not_graded(env):
    """Importing the module the exercise asks for (207: qwen.mlp), at the top or inside a function, or loading a
    problem's solution.py by path, is refused with one line saying so, in a child process and in this one, and
    never recorded as solved; 208 may use qwen.rope's apply_rope. The command line grades the first file (its exit
    code, its report, its record); the others go through the same child process, started here by run_file."""
    files = {"top.py": "import qwen.mlp  # noqa: F401\n" + MLP_BODY.format(extra=""),
             "lazy.py": MLP_BODY.format(extra="    from qwen.mlp import MLP  # noqa: F401\n"),
             "by_path.py": f"import importlib.util\nsolution = {str(PROBLEMS[207].folder / 'solution.py')!r}\n"
                           "spec = importlib.util.spec_from_file_location('s', solution)\n"
                           "s = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(s)\n"
                           "silu, swiglu_mlp = s.silu, s.swiglu_mlp\n"}
    for name, text in files.items():
        (env / name).write_text(text)
        imported = "practice/207_swiglu/solution.py" if name == "by_path.py" else "qwen.mlp"
        said = f"this exercise asks you to write silu, swiglu_mlp; your file imports {imported}, which is the answer"
        if name == "top.py":
            out = judge(207, "--file", env / name)
            assert out.returncode == 1 and "Not graded" in out.stdout, out
            assert said in out.stdout, out.stdout
        else:
            report = run_file(PROBLEMS[207], env / name)
            assert report.verdict == "NG" and report.outcome == Outcome("answer", (imported,)), (name, report.outcome)
            assert "Not graded" in shown(report) and said in shown(report), shown(report)
        report = grade_in_process(PROBLEMS[207], path=env / name)
        assert report.verdict == "NG" and report.outcome == Outcome("answer", (imported,)), (name, report.outcome)
    assert load_progress()["207"]["accepted"] is False
    (env / "honest.py").write_text(MLP_BODY.format(extra=""))
    assert grade_in_process(PROBLEMS[207], path=env / "honest.py").verdict == "AC"
    allowed = env / "rope_given.py"
    allowed.write_text("from qwen.rope import apply_rope  # noqa: F401\n"
                       + (PROBLEMS[208].folder / "solution.py").read_text())
    assert grade_in_process(PROBLEMS[208], path=allowed).verdict == "AC"


def test_a_notebooks_default_dtype_does_not_change_the_cases():
    """A notebook that set fp64 as torch's default dtype still gets fp32 cases: the reference is Accepted."""
    import torch

    torch.set_default_dtype(torch.float64)
    try:
        report = grade_in_process(PROBLEMS[207], path=PROBLEMS[207].folder / "solution.py")
        assert torch.get_default_dtype() == torch.float64, "the notebook's setting is given back"
    finally:
        torch.set_default_dtype(torch.float32)
    assert report.verdict == "AC", shown(report)


def test_a_huge_wrong_string_is_shown_around_its_first_difference(tmp_path):
    """A 24 MiB wrong answer to 215 prints in under 1 kB: about 200 characters around the first difference, with
    its index; a "/" in a result is text, not a path."""
    learner = tmp_path / "huge.py"
    learner.write_text("def render(messages, add_generation_prompt=True, thinking=False):\n"
                       "    return 'a/b ' + 'x' * (24 * 2 ** 20)\n")
    report = grade_in_process(PROBLEMS[215], path=learner)
    text = shown(report)
    result = [ln for ln in text.splitlines() if ln.startswith(("Expected", "Got", "First bad"))]
    assert report.verdict == "WA" and len(result) == 3 and len("\n".join(result).encode()) < 1024, text[:3000]
    assert len(text.encode()) < 3000 and "'a/b xxx" in text, text[:3000]
    assert "First bad character 0 (the expected text has 71" in text, text[:3000]


def test_long_lists_and_close_numbers_are_shown_in_short():
    """A list that differs in length shows the items around its first difference; two numbers that differ past
    the 6th digit get the digits that tell them apart; a dtype is named as the statements name it."""
    import torch

    from practice.grading import Case, compare, describe
    from practice.report import _pair

    m = compare(list(range(10 ** 5)) + [7], list(range(10 ** 5)))
    assert m.kind == "len" and m.info["first"] == 10 ** 5 and len(m.info["got_at"]) < 250, m.info
    m = compare(list(range(10)) + [5] + list(range(10 ** 5)), list(range(10 ** 5)))
    assert m.info["first"] == 10 and "8, 9, 5, 0, 1" in m.info["got_at"], m.info
    assert _pair(1.0, 1.0000001) == ("1", "1.0000001")
    assert describe(torch.bfloat16) == "bf16"
    case = Case("hidden 1", "f", [("path", "/data/model.safetensors"), ("n", 3)], "x")
    assert case.call_text() == "f(path='model.safetensors', n=3)" and describe("a/b") == "'a/b'"


@pytest.mark.slow
def test_a_total_time_limit_for_all_cases(tmp_path):
    """A file just under the limit on every case runs out of the problem's total (here 3 s for 204's 24 cases at
    0.5 s each, 11 of them sleeping 0.4 s): Time Limit Exceeded on the case that crosses it."""
    prob = PROBLEMS[204]
    learner = tmp_path / "sleepy.py"
    learner.write_text((prob.folder / "solution.py").read_text() + "\n\nimport time\n_norm = rms_norm\n\n\n"
                       "def rms_norm(x, weight, eps):\n    time.sleep(0.4)\n    return _norm(x, weight, eps)\n")
    report = run_file(prob, learner, time_limit=0.5)
    assert report.total_limit == 3.0 and report.verdict == "TLE", shown(report)
    assert report.failure.outcome == Outcome("total"), shown(report)
    assert "took over 3 s together, the limit for all 24 cases" in shown(report)
    assert sum(r.time for r in report.results if r.time is not None) < 3.0 + 0.5 + GRACE


@pytest.mark.slow
def test_learner_code_runs_on_one_thread(tmp_path):
    """The runner gives the learner's code one thread, so a loaded machine's thread pool cannot eat a case's time
    (what that buys, 210's reference well inside its limit, is checked on its run through the child process in
    test_solutions_through_the_child_process)."""
    learner = tmp_path / "threads.py"
    learner.write_text("import torch\n\n\ndef rms_norm(x, weight, eps):\n"
                       "    raise RuntimeError(f'threads={torch.get_num_threads()}')\n\n\n"
                       "gated_rms_norm = l2norm = rms_norm\n")
    report = run_file(PROBLEMS[204], learner)
    assert report.verdict == "RE" and "threads=1" in report.failure.outcome.detail, shown(report)


@pytest.mark.slow
def test_json_verdict_for_tools(env, tmp_path):
    """--json prints one JSON object: the verdict, each case with its time, the failing case, its hints, and the
    report's text; the exit code is the same as without it."""
    out = judge(204, "--file", mistake_file(204, "plain_weight", tmp_path), "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["verdict"] == "WA" and data["problem"] == 204, out
    assert data["total"] == len(data["cases"]) and data["cases"][data["failed_case"] - 1]["verdict"] == "WA"
    assert data["cases"][data["failed_case"] - 1]["hints"] and "Wrong Answer" in data["report"]
    out = judge(204, "--file", PROBLEMS[204].folder / "solution.py", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["verdict"] == "AC", out


def test_the_judges_own_clock_overrules_the_runners(tmp_path):
    """The runner says case 1 took no time; the judge saw 5 s pass between its begin and its return: too slow."""
    prob = PROBLEMS[204]
    cases = prob.cases(tmp_path)
    events = [{"ev": "ready"}, {"ev": "loaded"}, {"ev": "begin", "i": 0, "_at": 100.0},
              {"ev": "ret", "i": 0, "t": 0.0, "_at": 105.0}, {"ev": "end", "i": 0, "ok": True, "mutated": False}]
    report = grade_events(prob, cases, events, lambda i: cases[i].expected, Report(prob, Path("x.py"), 3.0, 10.0))
    assert report.results[0].verdict == "TLE" and report.results[0].time == 5.0
    events[3]["_at"] = 100.5  # within the limit by both clocks
    report = grade_events(prob, cases, events, lambda i: cases[i].expected, Report(prob, Path("x.py"), 3.0, 10.0))
    assert report.results[0].verdict == "AC" and report.results[0].time == 0.0


def test_how_a_run_ended_is_a_value_said_by_its_kind(tmp_path):
    """The runner's events cut short where a file dies, stalls or garbles them: each ending is an Outcome (the exit
    status as a number, negative for a signal), and the report says it by kind, in English and in Chinese."""
    prob = PROBLEMS[204]
    cases = prob.cases(tmp_path)
    start, case0 = [{"ev": "ready"}, {"ev": "loaded"}], [{"ev": "begin", "i": 0}, {"ev": "ret", "i": 0, "t": 0.0}]
    done0 = [{"ev": "end", "i": 0, "ok": True, "mutated": False}]
    ends = {  # (events, how the run ended: stopped, rc, garbled) -> (the outcome, where it is kept, a line it gives)
        "killed": (start + case0, (None, -int(signal.SIGKILL), None), Outcome("died", -int(signal.SIGKILL)), "case",
                   ("signal SIGKILL: killed from outside; out of memory?", "信号 SIGKILL：被外部强制终止")),
        "exit_3": (start[:1], (None, 3, None), Outcome("died_load", 3), "report",
                   ("while your file was being imported, before any case ran (exit code 3)", "导入你的文件时进程结束")),
        "between": (start + case0 + done0, (None, -int(signal.SIGSEGV), None), Outcome("died_between", -signal.SIGSEGV),
                    "report", ("between two cases (signal SIGSEGV)", "进程在两个用例之间结束了（信号 SIGSEGV）")),
        "stalled": (start + case0, ("returned", 0, None), Outcome("stalled", "returned"), "case",
                    ("your function returned, but its result could not be saved", "结果没能及时保存")),
        "garbled": (start + case0 + done0, (None, 0, "a line that is not an event"),
                    Outcome("garbled", "a line that is not an event"), "report",
                    ("messages to the judge were garbled (a line that is not an event)", "消息被破坏了")),
        "slow_load": (start[:1], ("ready", -9, None), Outcome("load_time"), "report",
                      ("importing your file took more than 10 s", "导入你的文件超过 10 秒")),
    }
    for name, (events, (stopped, rc, garbled), outcome, where, (en, zh)) in ends.items():
        report = grade_events(prob, cases, events, lambda i: cases[i].expected, Report(prob, Path("x.py"), 3.0, 10.0),
                              stopped, rc, garbled)
        kept = report.outcome if where == "report" else report.results[0].outcome
        assert kept == outcome and report.verdict == ("TLE" if name == "slow_load" else "RE"), (name, report)
        assert en in shown(report) and zh in shown(report, "zh"), (name, shown(report), shown(report, "zh"))


def test_protocol_accepts_only_the_runners_own_order():
    """What the judge accepts on its private pipe: the runner's events in their one order, well-formed; anything
    a learner's code could forge out of order or malformed is Garbled (their Runtime Error, never a crash)."""
    from practice.events import Garbled, Protocol

    good = [{"ev": "ready"}, {"ev": "loaded"}, {"ev": "begin", "i": 0}, {"ev": "ret", "i": 0, "t": 0.25},
            {"ev": "end", "i": 0, "ok": True, "mutated": False, "extra": "dropped"}, {"ev": "done"}]
    proto = Protocol(1)
    assert [proto.accept(ev) for ev in good][4] == {"ev": "end", "i": 0, "ok": True, "mutated": False,
                                                     "exc": None, "tb": None, "code": None}
    assert proto.state == "over"
    bad_at = {3: [{"ev": "ret", "i": 0, "t": t} for t in ("soon", float("nan"), float("inf"), -1.0, True, None)],
              2: [{"ev": "begin", "i": i} for i in (1, -1, True, 0.0, "0")] + [{"ev": "done"}, {"ev": "ready"}],
              4: [{"ev": "end", "i": 0, "ok": "yes"}, {"ev": "end", "i": 0, "ok": True, "tb": 5},
                  {"ev": "begin", "i": 0}, {"ev": "ret", "i": 0, "t": 1.0}],
              0: [{"ev": "loaded"}, [], "ready", {"ev": "begin", "i": 0}]}
    for at, forged in bad_at.items():
        for ev in forged:
            proto = Protocol(1)
            for ok in good[:at]:
                proto.accept(ok)
            with pytest.raises(Garbled):
                proto.accept(ev)


@pytest.mark.slow
def test_clumsy_commands_say_what_to_type(env, tmp_path):
    """What a learner types by mistake gets one line with the command they meant, not 'unknown command'."""
    for word in ("show", "start", "test"):
        out = judge(word)
        assert out.returncode == 2 and f"python practice/judge.py {word} N" in out.stderr and "201" in out.stderr
    judge("start", "204")
    work = env / "work" / "204_rmsnorm.py"
    out = judge(work)  # a file where the problem number goes
    assert out.returncode == 2 and f"python practice/judge.py 204 --file {work}" in out.stderr, out.stderr
    for name in ("204.py", "practice/work/204_no_such_file.py"):  # no such file: the problem was meant
        out = judge(name)
        assert out.returncode == 2 and "did you mean: python practice/judge.py 204\n" in out.stderr, out.stderr
    out = judge("201", "202")
    assert out.returncode == 2 and "one problem at a time" in out.stderr
    folder = judge("204", "--file", tmp_path)
    assert folder.returncode == 2 and "is a folder" in folder.stderr
    notebook = tmp_path / "ch03_norm.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    out = judge("204", "--file", notebook)
    assert out.returncode == 2 and "check(204" in out.stderr and "NameError" not in out.stdout + out.stderr
    assert notebook.read_text().startswith('{"cells"')  # never written


@pytest.mark.slow
def test_a_closed_pipe_is_not_a_traceback(env):
    """python practice/judge.py show 204 | head -1: the reader leaves early; the judge ends quietly."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the judge writes a byte
    try:
        out = subprocess.run([sys.executable, str(PRACTICE / "judge.py"), "show", "204"], cwd=REPO, stdout=write,
                             stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert out.stderr == "" and out.returncode != 0, out.stderr


def test_sizes_are_binary_units_said_so():
    from practice.report import size_text

    assert size_text(4096 * 2 ** 20) == "4 GiB" and size_text(64 * 1024) == "64 KiB"
    assert size_text(3 * 2 ** 20) == "3.0 MiB" and size_text(10) == "10 bytes"


def test_a_file_saved_as_utf16_is_told_to_save_as_utf8(tmp_path):
    """Some Windows editors save UTF-16: Python sees null bytes; the learner needs to hear the encoding."""
    sol = (PRACTICE / "202_param_count" / "solution.py").read_text(encoding="utf-8")
    path = tmp_path / "202_param_count.py"
    path.write_bytes(sol.encode("utf-16"))
    report = grade_in_process(PROBLEMS[202], path=path)
    assert report.verdict == "CE" and "UTF-16" in report.outcome.detail and "UTF-8" in report.outcome.detail, report


# ---------------------------------------------------------------- the chapters' exercise stubs

def _stub_signatures(tree):
    """{name: (parameters with annotations, defaults, return annotation, keyword-only)} of the top-level functions
    of a parsed file whose body only raises NotImplementedError (a docstring aside)."""
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0]):
            a = node.args
            out[node.name] = ([(x.arg, ast.unparse(x.annotation) if x.annotation else None)
                               for x in a.posonlyargs + a.args], [ast.unparse(d) for d in a.defaults],
                              ast.unparse(node.returns) if node.returns else None,
                              [(x.arg, ast.unparse(x.annotation) if x.annotation else None) for x in a.kwonlyargs])
    return out


def _attempts(tree):
    """[(problem number, {the starter's name: the chapter's function})] of each book.attempt(N, f, g=h, ...) call."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "book.attempt" and node.args \
                and isinstance(node.args[0], ast.Constant):
            given = {a.id: a.id for a in node.args[1:] if isinstance(a, ast.Name)}
            given.update({k.arg: k.value.id for k in node.keywords if isinstance(k.value, ast.Name)})
            found.append((node.args[0].value, given))
    return found


def _fits(stub, starter):
    """The same parameters, defaults and keyword-only names; the same annotations where the stub has them (the
    first chapters leave them out)."""
    def plain(sig):
        return [a for a, _ in sig[0]], sig[1], [a for a, _ in sig[3]]
    annotated = [ann for _, ann in stub[0]] + [stub[2]]
    return plain(stub) == plain(starter) and (not any(annotated) or stub == starter)


def test_chapter_stubs_match_the_starters():
    """Where a chapter defines the stub a learner fills in and grades with book.attempt(N, ...), the stub is given
    under the starter's name with the starter's parameters and defaults, so an answer written in the notebook fits
    the judge (check() matches functions by name)."""
    checked = 0
    for chapter in sorted((REPO / "chapters").glob("ch*.py")):
        tree = ast.parse(chapter.read_text(encoding="utf-8"))
        stubs = _stub_signatures(tree)
        for number, given in _attempts(tree):
            if not given:
                continue
            starter = _stub_signatures(ast.parse((PROBLEMS[number].folder / "starter.py").read_text("utf-8")))
            assert sorted(given) == sorted(PROBLEMS[number].functions), (chapter.name, number, given)
            for name, fn in given.items():
                assert fn in stubs, f"{chapter.name}: {fn} for exercise {number} is not a stub"
                assert _fits(stubs[fn], starter[name]), f"{chapter.name}: stub {fn} differs from the starter's " \
                                                        f"{name} of {number}:\n{stubs[fn]}\n{starter[name]}"
                checked += 1
    assert checked >= 20, checked


# ---------------------------------------------------------------- the answer, reached any way: one verdict both ways

def _grid(call):
    """A 216 answer that hands the work to `call` (the course's qwen.image.patchify, or a stand-in)."""
    return ("import functools\nimport types\n\nimport torch\n\nimport qwen.image\n\n\n"
            "def _grid(pixels, patch_size, merge_size, temporal_patch_size, impl):\n"
            "    s = types.SimpleNamespace(patch_size=patch_size, merge_size=merge_size, "
            "temporal_patch_size=temporal_patch_size)\n"
            "    x, gh, gw = impl(pixels, s)\n    return x, torch.tensor([[1, gh, gw]])\n\n\n" + call)


# the same use of the course's own patchify, written the ways a learner might wrap a function
WRAPPED = {
    "decorated": "@torch.no_grad()\ndef patchify(p, P, m, Tp):\n    return _grid(p, P, m, Tp, qwen.image.patchify)\n",
    "closure": "def _make(impl):\n    def patchify(p, P, m, Tp):\n        return _grid(p, P, m, Tp, impl)\n"
               "    return patchify\n\n\npatchify = _make(qwen.image.patchify)\n",
    "method": "class _Cutter:\n    def __init__(self, impl):\n        self.impl = impl\n\n"
              "    def patchify(self, p, P, m, Tp):\n        return _grid(p, P, m, Tp, self.impl)\n\n\n"
              "patchify = _Cutter(qwen.image.patchify).patchify\n",
    "lambda": "patchify = lambda p, P, m, Tp, impl=qwen.image.patchify: _grid(p, P, m, Tp, impl)  # noqa: E731\n",
    "partial": "patchify = functools.partial(_grid, impl=qwen.image.patchify)\n",
    "module": "class Patchify(torch.nn.Module):\n    def __init__(self, impl):\n        super().__init__()\n"
              "        self.impl = impl\n\n    def forward(self, p, P, m, Tp):\n"
              "        return _grid(p, P, m, Tp, self.impl)\n\n\npatchify = Patchify(qwen.image.patchify)\n",
    "nested": "def patchify(p, P, m, Tp):\n    def outer():\n        def inner():\n"
              "            return qwen.image.patchify\n        return inner()\n\n"
              "    return _grid(p, P, m, Tp, outer())\n",
}

MERGE_ORDER = """import torch

from qwen.vision import merge_order


def patchify(pixels, patch_size, merge_size, temporal_patch_size):
    C, H, W = pixels.shape
    P, m, Tp = patch_size, merge_size, temporal_patch_size
    gh, gw = H // P, W // P
    x = merge_order(pixels.reshape(C, gh, P, gw, P).permute(1, 3, 0, 2, 4), m)  # (gh·gw, C, P, P), merge order
    return x.unsqueeze(2).expand(-1, -1, Tp, -1, -1).reshape(gh * gw, C * Tp * P * P), torch.tensor([[1, gh, gw]])
"""

HF_PATCHIFY = """import torch
from transformers import Qwen2VLImageProcessorPil


def patchify(pixels, patch_size, merge_size, temporal_patch_size):
    x, gh, gw = Qwen2VLImageProcessorPil.patchify(None, pixels.numpy(), patch_size, merge_size, temporal_patch_size)
    return torch.from_numpy(x.copy()).to(pixels.dtype), torch.tensor([[1, gh, gw]])
"""

HF_MERGER = """import types

import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionPatchMerger


def patch_merger(x, image_grid_thw, weights):
    if x.shape[0] != int(image_grid_thw.prod(-1).sum()):
        raise ValueError("x does not hold the patches of image_grid_thw")
    config = types.SimpleNamespace(hidden_size=x.shape[1], spatial_merge_size=2,
                                   out_hidden_size=weights["linear_fc2.weight"].shape[0])
    merger = Qwen3_5VisionPatchMerger(config).to(x.dtype)
    merger.load_state_dict(weights)
    with torch.no_grad():
        return merger(x)
"""


def _notebook(source):
    """What a notebook cell holding `source` defines: its code run in a fresh namespace, as a kernel runs a cell."""
    cell = types.ModuleType("notebook")
    exec(compile(source, "<cell>", "exec"), vars(cell))
    return cell


def _graded(number, source, folder, child="run_file"):
    """{way: (verdict, what the learner reads)}: the file graded in a child process (child="command line": the real
    judge, python practice/judge.py --json; "run_file": the child process that judge grades in, started from this
    one; None: not at all), the file graded in this process, and the file's functions handed to the notebook's
    grading (nothing of the file but them)."""
    prob, path = PROBLEMS[number], folder / f"{number}_answer.py"
    path.write_text(source)
    out = {}
    if child == "command line":
        data = json.loads(judge(number, "--file", path, "--json").stdout)
        out["command line"] = data["verdict"], data["report"]
    elif child:
        report = run_file(prob, path)
        out["child process"] = report.verdict, shown(report)
    report = grade_in_process(prob, path=path)
    out["file in process"] = report.verdict, shown(report)
    cell = _notebook(source)
    report = grade_in_process(prob, {n: getattr(cell, n) for n in prob.functions})
    out["notebook"] = report.verdict, shown(report)
    return out


def _all_not_graded(graded, said):
    for way, (verdict, text) in graded.items():
        assert verdict == "NG" and said in text, (way, verdict, text)


@pytest.mark.slow
def test_the_courses_answer_through_a_decorator_is_not_graded_either_way(env):
    """216: qwen.image.patchify called inside a @torch.no_grad() function: the child process the command line
    grades in saw the import; the notebook's grading must see it too, through the decorator's __wrapped__."""
    graded = _graded(216, _grid(WRAPPED["decorated"]), env)
    _all_not_graded(graded, "your file imports qwen.image, which is the answer")


@pytest.mark.slow
@pytest.mark.parametrize("style", sorted(WRAPPED))
def test_the_answer_is_seen_however_the_function_is_wrapped(env, style):
    """A closure's cell, a bound method's object, a lambda's default, a partial's keyword, an nn.Module's attribute,
    a function nested two deep: each holds qwen.image.patchify, and each is Not graded in this process, from the
    file and from a notebook, as the command line's child process grades it (its import is seen as the file
    loads)."""
    graded = _graded(216, _grid(WRAPPED[style]), env, child=None)
    _all_not_graded(graded, "qwen.image, which is the answer")


@pytest.mark.slow
@pytest.mark.parametrize("number, source, module", [(216, MERGE_ORDER, "qwen.vision"),
                                                    (217, "from qwen.mrope import position_ids\n", "qwen.mrope")],
                         ids=["216 merge_order", "217 position_ids"])
def test_the_courses_own_code_for_the_step_is_the_answer(env, number, source, module):
    """qwen.vision.merge_order is the course's code for 216's block order, qwen.mrope.position_ids 217's answer:
    Not graded both ways (in the child process and in this one), the message naming the module the file imports,
    never one it did not."""
    graded = _graded(number, source, env)
    _all_not_graded(graded, f"your file imports {module}, which is the answer")
    assert not any("qwen.image" in text for _, text in graded.values()), graded


@pytest.mark.slow
@pytest.mark.parametrize("number, source", [(216, HF_PATCHIFY), (218, HF_MERGER)], ids=["216", "218"])
def test_transformers_own_implementation_is_not_your_own_work(env, number, source):
    """transformers is the reference the judge checks against: a file that calls its patchify or its patch merger is
    Not graded (both ways: the command line itself, and in this process), told so, and nothing is recorded as
    solved."""
    graded = _graded(number, source, env, child="command line")
    _all_not_graded(graded, "transformers is the reference the judge checks answers against")
    assert str(number) not in load_progress() or load_progress()[str(number)]["accepted"] is False


@pytest.mark.slow
def test_a_module_that_imports_the_answer_is_named_as_the_file_imported_it(env):
    """207: qwen.model imports qwen.mlp (the answer). A file that imports qwen.model is Not graded both ways (in the
    child process and in this one), and told what it imported (qwen.model) and why that counts (it imports
    qwen.mlp)."""
    source = "from qwen.model import MLP\n" + MLP_BODY.format(extra="    assert MLP\n")
    graded = _graded(207, source, env)
    said = "your file imports qwen.model, which imports qwen.mlp, the answer"
    _all_not_graded({way: graded[way] for way in ("child process", "file in process")}, said)
    _all_not_graded({"notebook": graded["notebook"]}, "qwen.mlp")


HONEST_216 = """import math
import types

import numpy as np
import torch

import qwen.config


def _blocks(pixels, m, P):
    C, H, W = pixels.shape
    return pixels.reshape(C, H // P // m, m, P, W // P // m, m, P).permute(1, 4, 2, 5, 0, 3, 6)


class _Cutter(torch.nn.Module):
    def forward(self, pixels, patch_size, merge_size, temporal_patch_size):
        x = _blocks(pixels, merge_size, patch_size).unsqueeze(5)
        x = x.expand(-1, -1, -1, -1, -1, temporal_patch_size, -1, -1)
        gh, gw = pixels.shape[1] // patch_size, pixels.shape[2] // patch_size
        assert math.isfinite(float(np.float32(gh))) and qwen.config and types
        return x.reshape(gh * gw, -1), torch.tensor([[1, gh, gw]])


_cut = _Cutter()


@torch.no_grad()
def patchify(pixels, patch_size, merge_size, temporal_patch_size):
    return (lambda f=_cut: f(pixels, patch_size, merge_size, temporal_patch_size))()
"""


@pytest.mark.slow
def test_a_right_answer_that_imports_what_is_yours_to_use_is_accepted_both_ways(env):
    """torch, numpy, math and the course's modules that are not the answer (qwen.config), reached through a
    decorator, a lambda's default and an nn.Module: Accepted both ways (in the child process and in this one). 208
    may import qwen.rope; the judge's process has qwen.attention imported already, and a helper of the learner's
    named `attention` is not it."""
    for way, (verdict, text) in _graded(216, HONEST_216, env).items():
        assert verdict == "AC", (way, text)
    solution = (PROBLEMS[208].folder / "solution.py").read_text()
    source = "import qwen.rope\n" + solution.replace("out = attend(", "out = qwen.rope.apply_rope and attention(") + (
        "\n\ndef attention(q, k, v, mask):\n    return attend(q, k, v, mask)\n")
    for way, (verdict, text) in _graded(208, source, env, child=None).items():
        assert verdict == "AC", (way, text)


def test_the_runner_stops_at_the_first_answer_it_sees_as_the_file_loads(tmp_path):
    """Nothing a file does after importing the answer is graded, so the runner does not wait for it (importing
    transformers takes seconds): Not graded, not "took too long to import"."""
    path = tmp_path / "slow.py"
    path.write_text("import time\n\nimport qwen.image  # noqa: F401\n\ntime.sleep(60)\n")
    report = run_file(PROBLEMS[216], path, load_limit=5.0)
    assert report.verdict == "NG" and report.outcome == Outcome("answer", ("qwen.image",)), report


def test_what_the_file_used_is_said_in_both_languages():
    """The three kinds of answer a file may use, each told in English and Chinese: the answer itself, a module that
    imports it, transformers (the reference); the first hit's kind is the message."""
    said = {("qwen.mlp",): ("your file imports qwen.mlp, which is the answer", "你的文件导入了 qwen.mlp，那就是答案"),
            ("qwen.model>qwen.mlp",): ("your file imports qwen.model, which imports qwen.mlp, the answer",
                                       "你的文件导入了 qwen.model，它又导入了 qwen.mlp，那就是答案"),
            ("transformers", "qwen.mlp"): ("your file uses transformers: transformers is the reference",
                                           "你的文件用了 transformers：transformers 是评测器核对答案用的")}
    for hits, (en, zh) in said.items():
        report = Report(PROBLEMS[207], Path("x.py"), 3.0, 10.0)
        report.verdict, report.outcome = "NG", Outcome("answer", hits)
        assert en in shown(report) and zh in shown(report, "zh"), hits


# ---------------------------------------------------------------- gguf is a reference, like transformers

GGUF_VALUES = ("\n\ndef q8_0_values(block):\n    d = block[:2].clone().view(torch.float16).float()\n"
               "    return d * block[2:].clone().view(torch.int8).float()\n")
GGUF = {"quantize": "import torch\nfrom gguf import GGMLQuantizationType\nfrom gguf.quants import quantize\n\n\n"
                    "def q8_0_block(x):\n"
                    "    q = quantize(x.float().numpy().reshape(1, 32), GGMLQuantizationType.Q8_0)\n"
                    "    return torch.from_numpy(q.reshape(-1).copy())\n" + GGUF_VALUES,
        "quantize_blocks, imported in the body": "import torch\n\n\ndef q8_0_block(x):\n    import gguf.quants\n"
                    "    q = gguf.quants.Q8_0.quantize_blocks(x.float().numpy().reshape(1, 32))\n"
                    "    return torch.from_numpy(q.reshape(-1).copy())\n" + GGUF_VALUES}


@pytest.mark.slow
@pytest.mark.parametrize("style", sorted(GGUF))
def test_gguf_is_the_reference_for_llama_cpps_blocks(env, style):
    """222 solved by gguf's own quantizer (gguf.quants.quantize, or Q8_0.quantize_blocks imported inside the
    function): Not graded in the child process the command line grades in, from the file in this process and from
    a notebook's cell, the line naming gguf; nothing recorded as solved. The same file is right: with gguf no
    reference it would be Accepted."""
    graded = _graded(222, GGUF[style], env)
    _all_not_graded(graded, "gguf is the reference the judge checks answers against")
    record(run_file(PROBLEMS[222], env / "222_answer.py"))
    assert load_progress()["222"]["accepted"] is False


@pytest.mark.slow
def test_gguf_reached_through_a_helper_module_is_the_reference(env, monkeypatch):
    """A helper next to the file imports gguf, and the file calls gguf's quantizer through it: Not graded in the
    child process (the runner puts the file's folder on the path; it names the helper, which imported gguf) and in
    this one (where gguf was imported before, so it names what the function reaches: gguf)."""
    (env / "q8_helper.py").write_text("import gguf  # noqa: F401\n")
    source = ("import torch\n\nimport q8_helper\n\n\ndef q8_0_block(x):\n"
              "    g = q8_helper.gguf\n"
              "    q = g.quants.quantize(x.float().numpy().reshape(1, 32), g.GGMLQuantizationType.Q8_0)\n"
              "    return torch.from_numpy(q.reshape(-1).copy())\n" + GGUF_VALUES)
    monkeypatch.syspath_prepend(str(env))
    graded = _graded(222, source, env)
    _all_not_graded({"child process": graded["child process"]},
                    "your file imports q8_helper, which imports gguf: gguf is the reference")
    _all_not_graded(graded, "gguf")


# ---------------------------------------------------------------- the problem's own reference in a notebook

def test_the_problems_own_reference_is_graded_in_a_notebook_but_not_recorded(env, capsys):
    """A notebook that checks 204's solution.py, imported by module name, or a cell's function that calls it: the
    verdict is shown (Accepted) and one line says it is not recorded, in both languages, and the progress stays
    empty. The same code run in a cell of its own is the learner's, and recorded. From the command line, a file
    that imports the reference by module name is Not graded."""
    import importlib

    sol = importlib.import_module("practice.204_rmsnorm.solution")

    def rms_norm(x, weight, eps=1e-6):  # a cell's own function that calls the reference
        return sol.rms_norm(x, weight, eps)

    for functions, lang, said in [((sol.rms_norm, sol.gated_rms_norm, sol.l2norm), "en",
                                   "Not recorded as solved: what was graded is practice/204_rmsnorm/solution.py, "
                                   "this problem's own reference solution"),
                                  ((rms_norm, sol.gated_rms_norm, sol.l2norm), "zh",
                                   "不记为通过：这次评测的是 practice/204_rmsnorm/solution.py，即本题自带的参考答案")]:
        assert check(204, *functions, lang=lang) is True
        out = capsys.readouterr().out
        assert ("Verdict   Accepted" if lang == "en" else "结果      通过") in out and said in out, out[-1500:]
        assert "Progress saved" not in out and "进度已保存" not in out, out[-600:]
        assert load_progress() == {}
    cell = _notebook((PROBLEMS[204].folder / "solution.py").read_text())
    assert check(204, cell) is True
    out = capsys.readouterr().out
    assert "Not recorded" not in out and "Progress saved in" in out, out[-600:]
    assert load_progress()["204"]["accepted"] is True
    path = env / "by_name.py"
    path.write_text("import importlib\n\nsol = importlib.import_module('practice.204_rmsnorm.solution')\n"
                    "rms_norm, gated_rms_norm, l2norm = sol.rms_norm, sol.gated_rms_norm, sol.l2norm\n")
    for report in (run_file(PROBLEMS[204], path), grade_in_process(PROBLEMS[204], path=path)):
        assert report.verdict == "NG" and "practice/204_rmsnorm/solution.py" in report.outcome.detail[0], report


# ---------------------------------------------------------------- memory in memory-backed files

SMALL = 512  # MiB: the limit these tests grade under (torch itself takes about 250 of it)
IN_MEMORY = {  # one file grown to 1 GiB in a case, and four of 200 MiB as the file loads (each under the limit)
    "memfd": ("fd = os.memfd_create('learner')\n", "    os.ftruncate(fd, 2 ** 30)\n",
              "fds = [os.memfd_create('learner') for _ in range(4)]\n"
              "for fd in fds:\n    for _ in range(200):\n        os.write(fd, bytes(2 ** 20))\n"),
    "/dev/shm": ("fd = os.open('{name}-one', os.O_CREAT | os.O_RDWR)\n", "    os.ftruncate(fd, 2 ** 30)\n",
                 "for k in range(4):\n    with open(f'{name}-{{k}}', 'wb') as f:\n"
                 "        for _ in range(200):\n            f.write(bytes(2 ** 20))\n")}
NORMS = "\n\ndef rms_norm(x, weight, eps=1e-6):\n{grown}    return x\n\n\ngated_rms_norm = l2norm = rms_norm\n"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox counts memory-backed files from /proc")
def test_memory_in_memory_backed_files_counts_against_the_limit(env):
    """A memfd or a file in /dev/shm is memory the data-segment limit does not see. One file grown past the limit
    in a case is refused (File too large: an out-of-memory hint); four files, each under it and all of them over,
    are killed by the sandbox as they pass it (out of memory?), held open or closed. A notebook's grading holds no
    memory limit: the scope note says so in both languages. The kinds run one after the other, in one test: a file
    another program writes in /dev/shm during a run counts against that run (the scope note says so too)."""
    for kind in sorted(IN_MEMORY):
        _memory_backed(env, kind)


def _memory_backed(env, kind):
    import dataclasses

    prob = PROBLEMS[204]
    prob = dataclasses.replace(prob, meta={**prob.meta, "memory_limit": SMALL})
    name = f"/dev/shm/qwen-judge-test-{os.getpid()}-{env.name}"
    opened, grown, many = (text.format(name=name) for text in IN_MEMORY[kind])
    try:
        (env / "one.py").write_text("import os\n\n" + opened + NORMS.format(grown=grown))
        report = run_file(prob, env / "one.py")
        text = shown(report)
        assert report.failure is report.results[0] and report.failure.verdict == "RE", text
        assert "File too large" in text and "out of memory: your code asked for more than the judge allows" in text
        (env / "many.py").write_text("import os\n\n" + many + NORMS.format(grown=""))
        report = run_file(prob, env / "many.py")
        assert report.verdict == "RE" and report.outcome == Outcome("died_load", -signal.SIGKILL), report
        assert "out of memory" in shown(report) and "内存耗尽" in shown(report, "zh"), shown(report)
    finally:
        for f in Path("/dev/shm").glob(Path(name).name + "*"):
            f.unlink()
    for readme, said in (("README.md", "Nor does a notebook's grading hold your code to the memory limit"),
                         ("README.zh.md", "笔记本里的评测也不受内存上限约束")):
        assert said in " ".join((PRACTICE / readme).read_text(encoding="utf-8").split()), readme
