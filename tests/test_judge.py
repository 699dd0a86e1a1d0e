"""The judge as a learner meets it: the command line, the child process that runs learner code (hostile files
included), the progress file, and check() for notebooks."""
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from practice.judge import (check, detect_lang, grade_in_process, load_progress, problems, record, run_file,
                            save_progress)
from practice.report import OUTPUT_CAP, Printer, Report

REPO = Path(__file__).resolve().parent.parent
PRACTICE = REPO / "practice"
HOSTILE = sorted((PRACTICE / "hostile").glob("*.py"))
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
              "mutates_input", "raises", "sys_exit", "exits_at_import"}


@pytest.fixture(scope="module")
def hostile_reports():
    """Every hostile file graded, the dangerous ones through the real child process, two at a time, with 1 s per
    case and 2 s to import."""
    prob = PROBLEMS[204]
    prob.module  # import cases.py once, before the threads share it
    before = {f: digest(f) for f in HOSTILE}
    t0 = time.monotonic()
    child = [f for f in HOSTILE if f.stem not in IN_PROCESS]
    with ThreadPoolExecutor(2) as pool:
        reports = dict(zip(child, pool.map(lambda f: run_file(prob, f, time_limit=1.0, load_limit=2.0), child)))
    reports.update({f: grade_in_process(prob, path=f) for f in HOSTILE if f.stem in IN_PROCESS})
    print(f"{len(HOSTILE)} hostile files graded in {time.monotonic() - t0:.1f} s")
    assert {f: digest(f) for f in HOSTILE} == before, "the judge must never write to a learner's file"
    return reports


@pytest.mark.parametrize("path", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_file_gets_its_verdict(hostile_reports, path):
    report = hostile_reports[path]
    words = path.read_text().splitlines()[0].split(":", 1)[1].split()
    verdict, marks = words[0], words[1:]
    assert report.verdict == verdict, (report.verdict, report.message, report.failure)
    failure = report.failure
    for mark in marks:
        if mark == "case=1":
            assert failure is report.results[0]
        elif mark == "load":
            assert failure is None and report.message
        elif mark == "died":
            assert failure.error.startswith("died:")
        else:
            assert mark in failure.hints
    assert len(report.output) <= OUTPUT_CAP


def test_hostile_details(hostile_reports):
    r = {p.stem: rep for p, rep in hostile_reports.items()}
    # the traceback is cut to the learner's own frames
    tb = r["raises"].failure.error
    assert 'File "raises.py", line' in tb and "in _scale" in tb and "runner.py" not in tb and "ValueError" in tb
    # a killed case stops the run: the later cases are not run, never wrongly accepted
    assert r["loops"].failure.time is None and all(x.verdict is None for x in r["loops"].results[1:])
    assert r["loops"].seconds < 12, "stopped soon after its 1 s limit (plus the runner's start)"
    # a case over its limit that still returns is judged by its own clock
    assert r["slow"].failure.time > 1.0 and r["slow"].results[1].verdict == "AC"
    # sys.exit inside a case is an ordinary Runtime Error: the other functions' cases still run and pass
    assert "sysexit:3" in r["sys_exit"].failure.error and r["sys_exit"].passed == 13
    assert r["segfault"].failure.error == f"died:signal:{int(signal.SIGSEGV)}"
    assert r["os_exit"].failure.error == "died:exit:0"
    # printed output: kept up to the cap, counted beyond it
    assert r["loops"].output_bytes > 10 * OUTPUT_CAP and len(r["loops"].output) == OUTPUT_CAP
    assert r["prints_megabytes"].output_bytes > 10_000_000
    # garbage results are described, not crashed on
    got = {x.case.fn: x.mismatch.info["got"] for x in r["returns_garbage"].results if x.mismatch}
    assert got == {"rms_norm": "a generator", "gated_rms_norm": "'a tensor, honestly'", "l2norm": "a numpy.ndarray"}
    assert r["returns_nan"].failure.mismatch.info["nan"] == 4
    assert r["mutates_input"].failure.mutated and r["mutates_input"].failure.mismatch is None


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look at processes")
def test_processes_started_by_learner_code_are_killed(hostile_reports):
    report = hostile_reports[PRACTICE / "hostile" / "spawns_child.py"]
    assert report.verdict == "AC"
    pid = int(report.output.decode().split("child pid ")[1].split()[0])
    time.sleep(0.2)
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] in ("Z", "X"), "the grandchild survived"


def test_solutions_through_the_child_process():
    """The end-to-end path for every problem (inputs and results cross the process boundary); the starters and
    the wrong solutions are graded in tests/test_practice.py, and a starter through the command line below."""
    for p in PROBLEMS.values():
        p.module
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda p: run_file(p, p.folder / "solution.py"), PROBLEMS.values()))
    for p, rep in zip(PROBLEMS.values(), reports):
        assert rep.verdict == "AC", (p.number, rep.failure, rep.message)
        assert all(r.time is not None and r.time < p.time_limit for r in rep.results)


# ---------------------------------------------------------------- the command line

def test_help_and_bad_commands(env):
    out = judge("--help")
    assert out.returncode == 0 and "start N" in out.stdout and "--lang" in out.stdout
    assert judge("999").returncode == 2 and "No problem 999" in judge("999").stderr
    assert judge("frobnicate").returncode == 2
    missing = judge("204", "--file", env / "nope.py")
    assert missing.returncode == 2 and "judge.py start 204" in missing.stderr


def test_list_show_and_languages(env):
    out = judge("list")
    assert out.returncode == 0
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("  ")]
    assert [ln.split()[1] for ln in rows] == ["201", "202", "203", "204", "205"] and all("–" in ln for ln in rows)
    en, zh = judge("show", "204"), judge("show", "204", "--lang", "zh")
    assert "def rms_norm(x: torch.Tensor" in en.stdout and "Tolerances" in en.stdout
    assert "零中心" in zh.stdout and "容差" in zh.stdout
    assert "练习题" in judge("list", env_extra={"LANG": "zh_CN.UTF-8"}).stdout
    assert "Practice problems" in judge("list", env_extra={"LANG": "zh_CN.UTF-8", "LC_ALL": "en_US.UTF-8"}).stdout


def test_start_never_overwrites(env):
    out = judge("start", "204")
    work = env / "work" / "204_rmsnorm.py"
    assert out.returncode == 0 and "work/204_rmsnorm.py" in out.stdout.replace(os.sep, "/")
    assert work.read_text() == (PRACTICE / "204_rmsnorm" / "starter.py").read_text()
    work.write_text("# my own work\n")
    again = judge("start", "204")
    assert again.returncode == 0 and "already exists" in again.stdout
    assert work.read_text() == "# my own work\n"


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


def test_wrong_answer_report(env):
    out = judge("204", "--file", PRACTICE / "204_rmsnorm" / "wrong" / "plain_weight.py", "--lang", "en")
    print(out.stdout)
    assert out.returncode == 1
    for line in ("Verdict   Wrong Answer on case 1 (example 1)", "Call      rms_norm(x=fp32[1, 4]",
                 "Max |Δ|   1.46059; 4 of 4 elements outside the tolerance",
                 "First bad index (0, 0): expected 0.365148, got 0", "Tolerance |Δ| <= 1e-06·max(1, max|y|) + 1e-05·|y|", "Hint      looks like x̂ · w"):
        assert line in out.stdout, line

    crash = judge("204", "--file", PRACTICE / "hostile" / "os_exit.py")
    assert crash.returncode == 1 and crash.stderr == "" and "the process ended during this case" in crash.stdout


def test_reports_in_chinese(hostile_reports):
    lines = []
    Printer("zh", lines.append).report(hostile_reports[PRACTICE / "hostile" / "loops.py"], "loops.py", "again", "p")
    text = "\n".join(lines)
    assert "结果      超出时间限制 于用例 1（样例 1）" in text and "评测已终止它" in text


# ---------------------------------------------------------------- progress

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
import practice.judge as j
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


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_progress_survives_a_judge_killed_while_saving(env):
    save_progress({"201": {"accepted": True}})
    old = (env / "progress.json").read_text()
    for where in ("write", "replace"):
        assert _kill_during_save(env, where) == old  # still the old, whole file
        assert json.loads(old)["problems"]["201"]["accepted"] is True


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the runner")
def test_kill_9_the_judge_mid_run(env):
    """kill -9 the judge while learner code runs: the progress file stays valid, and the runner (whose learner code
    loops forever) notices its judge is gone and exits."""
    save_progress({"201": {"accepted": True}})
    old = (env / "progress.json").read_text()
    proc = subprocess.Popen([sys.executable, str(PRACTICE / "judge.py"), "204", "--file",
                             PRACTICE / "hostile" / "loops.py", "--time-limit", "60"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children, deadline = [], time.monotonic() + 60
    while not children and time.monotonic() < deadline:
        time.sleep(0.2)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert children, "the judge never started its runner"
    time.sleep(1.0)  # the runner is now inside the learner's endless loop
    proc.kill()
    proc.wait()
    assert (env / "progress.json").read_text() == old
    runner = Path(f"/proc/{children[0]}/stat")
    deadline = time.monotonic() + 5
    while runner.exists() and runner.read_text().split(")")[1].split()[0] not in ("Z", "X"):
        assert time.monotonic() < deadline, "the runner outlived its judge"
        time.sleep(0.1)


# ---------------------------------------------------------------- notebooks and languages

def _solution(number):
    prob = PROBLEMS[number]
    spec = importlib.util.spec_from_file_location(f"solution_{number}", prob.folder / "solution.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_check_in_a_notebook(env, capsys):
    sol = _solution(204)
    assert check(204, sol.rms_norm, sol.gated_rms_norm, sol.l2norm) is True
    assert "Verdict   Accepted" in capsys.readouterr().out
    assert load_progress()["204"]["accepted"] is True
    assert check(204, vars(sol), rms_norm=lambda x, w, eps=1e-6: sol.rms_norm(x, w - 1, eps), save=False) is False
    out = capsys.readouterr().out
    assert "Wrong Answer" in out and "(1 + w)" in out
    assert check(204, sol.rms_norm) is False and "does not define gated_rms_norm, l2norm" in capsys.readouterr().out
    assert check(203, _solution(203), lang="zh") is True and "通过" in capsys.readouterr().out
    assert check(999) is False


def test_importable_from_the_notebooks_folder(tmp_path):
    code = "from practice.judge import check; print(check.__name__)"  # installed with the package, no path tricks
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO / "notebooks", capture_output=True, text=True)
    assert out.stdout.strip() == "check", out.stderr


def test_language_from_flag_or_locale(monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert detect_lang() == "zh" and detect_lang("en") == "en"
    monkeypatch.setenv("LC_ALL", "en_GB.UTF-8")
    assert detect_lang() == "en"
