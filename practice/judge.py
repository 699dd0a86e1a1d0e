"""The local judge for the course's exercises: it grades a learner's file the way an online judge does.

Run from the repository root: python practice/judge.py --help. In a notebook: from practice.judge import check.
The learner's file runs in a separate process (practice/runner.py) with a time limit per case. Its results come
back as data and are compared here with expected values from an oracle that is always installed (the `qwen`
package, torch, hand math); tests/test_practice.py proves those oracles equal transformers.

This file is the command line. The judge's parts are modules beside it, one job each: problems.py (the problem
registry), pinned.py (the files that decide a verdict, which must be the committed ones), imports.py (what a file
imports, read without running it), grading.py (cases and comparison), mistakes.py (the known mistakes and which one
a result looks like), guard.py (the answer a file may not use), limits.py (every limit), child.py (grading a file
in a child process) and notebook.py (grading in this process), events.py (the runner's events and the Report they
give), supervise.py (the supervision loop, for grading and for the plug-in), runner.py and sandbox.py (the child
process), messages.py (the texts) and report.py (how a report is shown),
store.py (what the judge writes), and plugin.py (the whole model with a learner's part: its child, and the judge's
side of it).
"""
import argparse
import json
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `python practice/judge.py` puts practice/ on the path, not the repo root
    sys.path.insert(0, str(HERE.parent))

# the judge's parts, one module each; check, grade_in_process and problems are the names notebooks and tools
# import from here
from practice import messages as say  # noqa: E402
from practice.child import run_file  # noqa: E402
from practice.limits import MAX_TIME_LIMIT  # noqa: E402
from practice.messages import cmd, detect_lang, speaking  # noqa: E402
from practice.notebook import check, grade_in_process  # noqa: E402,F401
from practice.plugin import PLUGGABLE, plug_in_allowed, plug_in_file  # noqa: E402
from practice.problems import find_problem, problems, verified  # noqa: E402
from practice.report import Printer, shown_path  # noqa: E402
from practice.store import load_progress, progress_path, record, work_dir  # noqa: E402
from qwen.lang import columns, from_command_line, tr, use  # noqa: E402

# ---------------------------------------------------------------- commands

def cmd_list(lang):
    records = load_progress(lang)
    print(say.list_head())
    column = 2 + max(columns(prob.title(lang)) for prob in problems().values())
    for number, prob in problems().items():
        rec = records.get(str(number))
        mark = "–" if not rec else "✓" if rec.get("accepted") else "✗"
        chapter = prob.meta.get("chapter")
        where = say.chapter(chapter) if chapter else ""
        title, level = prob.title(lang), prob.meta.get("level", {}).get(lang, "")
        pad = " " * (column - columns(title))
        print(f"  {mark} {number}  {title}{pad}{level:<7}{where}")
    print(say.list_foot(cmd("show", "N"), cmd("start", "N")))
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
        print(say.exists(shown_path(target), cmd(prob.number)))
        return 0
    print(say.created(shown_path(target), cmd(prob.number)))
    return 0


def verdict_json(report, text):
    """The verdict as data, for tools: --json prints this object (one line) instead of the report."""
    failure = report.failure
    return {"problem": report.problem.number, "file": str(report.file), "verdict": report.verdict,
            "passed": report.passed, "total": len(report.results), "seconds": round(report.seconds, 3),
            "time_limit": report.time_limit, "total_limit": report.total_limit,
            "cases": [{"label": r.case.label, "fn": r.case.fn, "verdict": r.verdict,
                       "time": None if r.time is None else round(r.time, 6), "hints": list(r.hints)}
                      for r in report.results],
            "failed_case": None if failure is None else report.results.index(failure) + 1,
            "outcome": None if report.outcome is None else {"kind": report.outcome.kind,
                                                            "detail": report.outcome.detail},
            "report": text}


def cmd_test(n, lang, file=None, time_limit=None, as_json=False):
    prob = find_problem(n, lang)
    if prob is None:
        return 2
    if not verified(prob, lang):
        return 2
    default = work_dir() / prob.work_name
    path = Path(file) if file else default
    if not path.is_file():
        start = cmd("start", prob.number)
        print(say.is_folder(shown_path(path)) if path.is_dir() else say.no_file_given(shown_path(path), start)
              if file else say.no_file(shown_path(path), start), file=sys.stderr)
        return 2
    if path.suffix == ".ipynb":  # JSON, not Python: importing it would only say "name 'null' is not defined"
        print(say.is_notebook(shown_path(path), prob.number, prob.functions), file=sys.stderr)
        return 2
    try:
        report = run_file(prob, path, time_limit)
    except KeyboardInterrupt:
        print("\n" + say.interrupted(), file=sys.stderr)
        return 130
    except Exception:  # a bug in the judge itself: say so, with its traceback, rather than blame the learner
        import traceback
        print(say.judge_error(tr("an internal error", "评测器内部出错")), file=sys.stderr)
        traceback.print_exc()
        return 3
    again = cmd(prob.number) if path.resolve() == default.resolve() else cmd(prob.number, "--file", shown_path(path))
    if as_json:
        lines = []
        Printer(lang, lines.append).report(report, shown_path(path), again, shown_path(progress_path()))
        print(json.dumps(verdict_json(report, "\n".join(lines)), ensure_ascii=False))
    else:
        Printer(lang).report(report, shown_path(path), again, shown_path(progress_path()))
    if report.verdict == "JE":
        return 3
    record(report, lang)
    return 0 if report.verdict == "AC" else 1


def grade(n, lang, args):
    """`N` and `test N`: grade the file; with --plug-in, after Accepted, the whole model with it (an exercise that
    is not a part of the model is refused before grading)."""
    if args.plug_in:
        prob = find_problem(n, lang)
        if prob is None or not plug_in_allowed(prob, lang):
            return 2
    code = cmd_test(n, lang, args.file, args.time_limit, args.json)
    if args.plug_in and code == 0:
        code = plug_in_file(n, args.file, lang)
    return code


def _meant(words):
    """For a command typed by mistake: the line that gives the command the learner meant, or None."""
    if len(words) == 1 and words[0] in ("show", "start", "test"):
        return say.needs_number(words[0], cmd(words[0], "N"), problems())
    if len(words) == 1 and (words[0].endswith(".py") or os.sep in words[0] or "/" in words[0]):
        number = re.match(r"(\d{3})(_|\.py$)", os.path.basename(words[0]))
        if Path(words[0]).is_file():
            return say.file_as_command(cmd(number.group(1) if number else "N", "--file", words[0]))
        if number:  # no such file: they meant the problem, whose working file is practice/work/NNN_slug.py
            return say.did_you_mean(cmd(number.group(1)))
    if len(words) > 1 and all(w.split("_")[0].isdigit() for w in words):
        return say.one_at_a_time(cmd(words[0]))
    return None


def epilog():
    """The end of --help: the commands, the verdicts, examples, and where things are."""
    return tr("""\
commands:
  list             the problems and your status: ✓ accepted, ✗ tried, – not tried
  show N           the statement of problem N (--lang zh: in Chinese)
  start N          copy problem N's starter to practice/work/ (an existing file is never overwritten)
  N  or  test N    grade your file practice/work/N_*.py; exit code 0 only when Accepted
                   (--file PATH: grade another file; --time-limit S: seconds per case; --json: the
                   verdict as one JSON object, for tools; --plug-in: after Accepted on a part of the model,
                   the whole model with your part)

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
A problem whose cases, or the course modules that compute its expected values, differ from the last commit is
not graded: git checkout -- FILE restores one (practice/README.md).
Language: --lang, else QWEN_LANG, else the locale (LANG=zh_CN.UTF-8 gives Chinese).
""", """\
命令：
  list
      列出所有题目和你的进度：✓ 已通过，✗ 做过但未通过，– 还没做
  show N
      显示第 N 题的题面（--lang en：看英文题面）
  start N
      把第 N 题的起始代码复制到 practice/work/（已有的文件绝不覆盖）
  N 或 test N
      评测你的文件 practice/work/N_*.py；只有通过时退出码才是 0。--file PATH：评测别的文件；
      --time-limit S：每个用例的秒数；--json：把结果输出为一个 JSON 对象，供工具读取；
      --plug-in：接入模型，即模型部件的题目通过后，把你的部件装进整个模型再跑一遍

评测结果：
  通过；答案错误（列出出错的用例、期望值与实际值、最大 |Δ|、容差和第一个出错的下标，你的答案与某个常见错误
  吻合时还会给出提示）；运行错误（附上你的 traceback）；超出时间限制；编译错误。

示例：
  python practice/judge.py list
  python practice/judge.py show 204 --lang en
  python practice/judge.py start 204
  python practice/judge.py 204
  python practice/judge.py 204 --file my_norm.py

你的代码在单独的进程里运行，每个用例都有时限；评测器从不改写你的文件。
进度保存在 practice/.progress.json（git 已忽略它）。在笔记本里评测：from practice.judge import check。
如果某道题的用例或计算其期望值的课程模块与最近一次提交不一致，这道题不予评测；用 git checkout -- FILE
恢复（见 practice/README.md）。
语言：先看 --lang，其次是 QWEN_LANG，最后是系统的 locale（LANG=zh_CN.UTF-8 即为中文）。
""")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse lines up the help column by characters; a Chinese metavar (命令) takes two columns a character."""

    def _format_action(self, action):
        text, name = super()._format_action(action), self._format_action_invocation(action)
        wide = columns(name) - len(name)
        return text.replace(name + " " * (wide + 2), name + "  ", 1) if wide else text


def main(argv=None):
    for stream in (sys.stdout, sys.stderr):  # a console that cannot show ✓ or Chinese gets '?', not a crash
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):
            pass
    argv = sys.argv[1:] if argv is None else argv
    with speaking(detect_lang(from_command_line(argv))):  # set before the parser exists: --help speaks it too
        return _main(argv)


def _main(argv):
    parser = argparse.ArgumentParser(prog="python practice/judge.py", epilog=epilog(),
                                     formatter_class=_Formatter,
                                     description=tr("Grade your solutions to the course's exercises, like an online "
                                                    "judge.", "评测器像在线评测系统（OJ）一样评测你写的练习答案。"))
    parser.add_argument("words", nargs="*", metavar=tr("command", "命令"), help="list | show N | start N | N | test N")
    parser.add_argument("--lang", choices=["en", "zh"], help=tr("language of messages and statements",
                                                                "提示信息和题面的语言"))
    parser.add_argument("--file", metavar="PATH", help=tr("grade this file instead of practice/work/N_*.py",
                                                          "评测这个文件，而不是 practice/work/N_*.py"))
    parser.add_argument("--time-limit", type=float, metavar="S", help=tr("seconds per case (default: the problem's)",
                                                                         "每个用例的秒数（默认用题目自己的时限）"))
    parser.add_argument("--plug-in", action="store_true", help=tr(
        f"after Accepted on a model part ({say.joined(PLUGGABLE)}), run the whole model with your part and compare "
        f"the next-token prediction",
        f"模型部件（{say.joined(PLUGGABLE)}）的题目通过后，把你的部件装进整个模型，比较下一个 token 的预测"))
    parser.add_argument("--json", action="store_true", help=tr(
        "print the verdict as one JSON object (for tools): verdict, cases, times, hints and the report's text",
        "把结果输出为一个 JSON 对象（供工具读取）：结果、用例、用时、提示和报告全文"))
    args = parser.parse_args(argv)
    if args.time_limit is not None and not 0 < args.time_limit <= MAX_TIME_LIMIT:  # NaN fails both
        parser.error(tr(f"--time-limit must be a number of seconds above 0 and at most {MAX_TIME_LIMIT:g}",
                        f"--time-limit 要写秒数：大于 0，最多 {MAX_TIME_LIMIT:g}"))
    lang = use(detect_lang(args.lang))  # argparse may have read an abbreviation (--la zh) that --lang's look missed
    words = args.words
    if words in ([], ["list"]):
        return cmd_list(lang)
    if len(words) == 2 and words[0] in ("show", "start", "test"):
        if words[0] == "show":
            return cmd_show(words[1], lang)
        if words[0] == "start":
            return cmd_start(words[1], lang)
        return grade(words[1], lang, args)
    if len(words) == 1 and words[0].split("_")[0].isdigit() and not words[0].endswith(".py") \
            and "/" not in words[0] and os.sep not in words[0]:
        return grade(words[0], lang, args)
    mistaken = _meant(words)
    if mistaken:
        print(mistaken, file=sys.stderr)
        return 2
    parser.print_usage(sys.stderr)
    typed = " ".join(words)
    print(tr(f"{parser.prog}: error: unknown command {typed!r} (see --help)",
             f"{parser.prog}：错误：没有 {typed!r} 这个命令（见 --help）"), file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (judge.py show 204 | head): nothing left to say, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        code = 1
    sys.exit(code)
