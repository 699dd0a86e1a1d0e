"""What the judge prints: short, labelled lines, in English or Chinese. No torch at import (list/show stay fast).

Every line goes through `safe`: the learner's output and messages can hold terminal escape sequences, which are
shown escaped (\\x1b[8A), so no file can move the cursor and rewrite the verdict on screen."""
import locale
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

VERDICT = {
    "en": {"AC": "Accepted", "WA": "Wrong Answer", "RE": "Runtime Error", "TLE": "Time Limit Exceeded",
           "CE": "Compile Error", "NG": "Not graded", None: "not run"},
    "zh": {"AC": "通过", "WA": "答案错误", "RE": "运行错误", "TLE": "超出时间限制", "CE": "编译错误", "NG": "不予评测",
           None: "未运行"},
}

MSG = {
    "en": {
        "problem": "Problem", "file": "File", "verdict": "Verdict", "call": "Call", "expected": "Expected",
        "got": "Got", "where": "At", "maxdiff": "Max |Δ|", "first": "First bad", "tol": "Tolerance",
        "hint": "Hint", "error": "Error", "output": "Output", "passed": "Passed", "limit": "Limit",
        "on_case": "on case {i} ({label})", "seed": "seed {seed}",
        "n_bad": "{n_bad} of {n} elements outside the tolerance", "nan": "{nan} NaN",
        "index": "index {idx}: expected {e}, got {g}",
        "char": "character {idx} (the expected text has {n_exp} characters, yours {n_got})",
        "item": "item {idx}: expected {e}, got {g}",
        "keys_missing": "missing keys: {keys}", "keys_extra": "unexpected keys: {keys}",
        "shape": "shape {v}", "dtype": "dtype {v}", "len": "{v} items", "type": "{v}",
        "mutated": "your function changed its input in place; leave the caller's tensors and dicts alone "
                   "(work on a copy, or build a new result)",
        "tle_killed": "still running after {t:g} s; the judge stopped it", "tle_slow": "took {t:.2f} s",
        "tle_total": "the cases up to this one took over {t:g} s together, the limit for all {n} cases",
        "limits": "{t:g} s per case, {total:g} s for all together",
        "tle_load": "importing your file took more than {t:g} s; the judge stopped it",
        "died": "the process ended during this case ({how}): os._exit, a crash, or out of memory",
        "exit_code": "exit code {rc}", "signal": "signal {sig}",
        "sysexit": "your code called sys.exit({code}); return a value instead of exiting",
        "load_error": "your file raised an error while being imported, before any case ran:",
        "missing": "your file does not define {names} (keep the starter's names and signatures)",
        "summary": "{k} of {n} cases · {t:.2f} s",
        "all_passed": "All {n} cases passed. Progress saved in {path}.",
        "again": "Fix it and run again: {cmd}",
        "printed": "(your code printed {size}; the judge kept the first {cap})",
        "no_file": "No file at {path}. Start one with: {cmd}",
        "no_file_given": "No file at {path}: check the path after --file (or start the exercise: {cmd})",
        "is_folder": "{path} is a folder: give --file the path of your .py file",
        "is_notebook": "{path} is a notebook: the judge grades a .py file. In the notebook, run the exercise's "
                       "grading cell, or: from practice.judge import check; check({n}, {functions})",
        "needs_number": "{word} needs a problem number: {cmd}   (the problems: {all})",
        "file_as_command": "to grade a file, give the problem number and the file: {cmd}",
        "one_at_a_time": "one problem at a time: {cmd}",
        "did_you_mean": "did you mean: {cmd}",
        "created": "Created {path} from the starter. Edit it, then grade it with: {cmd}",
        "exists": "{path} already exists; it was left as it is. Grade it with: {cmd}",
        "unknown": "No problem {n}. The problems are: {all}",
        "list_head": "Practice problems (✓ accepted · ✗ tried, not accepted yet · – not tried)",
        "list_foot": "Read one: {show}    Start one: {start}",
        "bad_progress": "warning: {path} is unreadable or corrupt ({why}); treating your progress as empty. "
                        "It will be rewritten at the next grading.",
        "save_failed": "warning: could not save progress to {path} ({why})",
        "judge_error": "The judge could not run your file ({why}). This is not your code's fault; details:",
        "interrupted": "Interrupted: the judge stopped your code. Nothing was recorded.",
        "in_process": "(graded in this process: a case that hangs cannot be stopped; interrupt the kernel)",
        "hint_not_implemented": "this function still raises NotImplementedError: replace the starter's body",
        "hint_wrong_dtype": "the numbers are right but the dtype is not: return {dtype} (cast the result back)",
        "died_load": "the process ended while your file was being imported, before any case ran ({how})",
        "died_between": "the process ended between two cases ({how}): a thread or process of yours?",
        "oom_kill": "signal SIGKILL: killed from outside; out of memory?",
        "garbled": "the runner's messages to the judge were garbled ({why}): your code wrote to the judge's private "
                   "pipe or closed it",
        "stalled_returned": "your function returned, but its result could not be saved in time (did your code "
                            "touch the judge's files?)",
        "stalled_between": "the process stopped responding between two cases (a thread of yours keeping it busy?)",
        "not_dense": "expected a dense torch.Tensor, got {got}",
        "running": "case {i}/{n} · {label} · {fn} …",
        "tampered": "The problem's reference files differ from the course's copy: {files}. Was one edited by "
                    "accident? Restore them: git checkout -- {folder}   (developers who changed a problem on "
                    "purpose: {cmd})",
        "hint_out_of_memory": "out of memory: your code asked for more than the judge allows ({limit}); these "
                              "inputs need far less, so look for a tensor much larger than them",
        "plug_banner": "plug-in: exercise {n} in the whole model, in a child process under the judge's limits …",
        "plug_not_part": "--plug-in puts a part of the model in the whole model; exercise {n} is not one (the parts: "
                         "{parts}). Grade it without --plug-in: {cmd}",
        "plug_stopped": "plug-in stopped: {why}",
        "plug_start": "Python, torch and the model took over {t:g} s to start",
        "plug_ready": "importing your file took over {t:g} s",
        "plug_loaded": "the course's model ran over {t:g} s before calling your functions",
        "plug_returned": "the course's model ran over {t:g} s between two calls of your functions",
        "plug_inside": "one call of your {fn} inside the model ran over {limit:g} s, exercise {n}'s time limit",
        "plug_died": "the child process ended by {how}",
        "answer": "this exercise asks you to write {functions}; your file imports {names}, which is the answer. "
                  "Write it yourself (torch and the standard library are yours to use); nothing was recorded as "
                  "solved",
        "answer_via": "this exercise asks you to write {functions}; your file imports {names}, which imports "
                      "{answers}, the answer. Write it yourself (torch and the standard library are yours to use); "
                      "nothing was recorded as solved",
        "answer_reference": "this exercise asks you to write {functions}; your file uses {names}: transformers is "
                            "the reference the judge checks answers against, not your own work. Write it yourself "
                            "(torch and the standard library are yours to use); nothing was recorded as solved",
    },
    "zh": {
        "problem": "题目", "file": "文件", "verdict": "结果", "call": "调用", "expected": "期望", "got": "实际",
        "where": "位置", "maxdiff": "最大 |Δ|", "first": "首个错误", "tol": "容差", "hint": "提示",
        "error": "错误", "output": "输出", "passed": "合计", "limit": "时限",
        "on_case": "于用例 {i}（{label}）", "seed": "种子 {seed}",
        "n_bad": "{n} 个元素中有 {n_bad} 个超出容差", "nan": "{nan} 个 NaN",
        "index": "下标 {idx}：期望 {e}，实际 {g}",
        "char": "第 {idx} 个字符（期望的文本有 {n_exp} 个字符，你的有 {n_got} 个）",
        "item": "第 {idx} 项：期望 {e}，实际 {g}",
        "keys_missing": "缺少的键：{keys}", "keys_extra": "多出的键：{keys}",
        "shape": "形状 {v}", "dtype": "dtype {v}", "len": "{v} 项", "type": "{v}",
        "mutated": "你的函数原地修改了输入；不要改动调用者的张量和字典（在副本上算，或新建结果）",
        "tle_killed": "运行 {t:g} 秒仍未结束，评测已终止它", "tle_slow": "用时 {t:.2f} 秒",
        "tle_total": "到这个用例为止，各用例合计用时超过 {t:g} 秒，即全部 {n} 个用例的总时限",
        "limits": "每个用例 {t:g} 秒，全部合计 {total:g} 秒",
        "tle_load": "导入你的文件超过 {t:g} 秒，评测已终止它",
        "died": "进程在这个用例中途结束（{how}）：可能调用了 os._exit、崩溃或内存耗尽",
        "exit_code": "退出码 {rc}", "signal": "信号 {sig}",
        "sysexit": "你的代码调用了 sys.exit({code})；请返回结果，不要退出",
        "load_error": "导入你的文件时出错，还没有运行任何用例：",
        "missing": "你的文件没有定义 {names}（请保留起始文件里的函数名和签名）",
        "summary": "{n} 个用例通过 {k} 个 · {t:.2f} 秒",
        "all_passed": "全部 {n} 个用例通过。进度已保存到 {path}。",
        "again": "改好后再运行：{cmd}",
        "printed": "（你的代码打印了 {size}；评测只保留前 {cap}）",
        "no_file": "{path} 不存在。先用这条命令创建：{cmd}",
        "no_file_given": "{path} 不存在：请检查 --file 后面的路径（或者开始这道题：{cmd}）",
        "is_folder": "{path} 是文件夹：--file 后面要写你的 .py 文件的路径",
        "is_notebook": "{path} 是 notebook：评测只评 .py 文件。在 notebook 里运行这道题的评测单元，或："
                       "from practice.judge import check; check({n}, {functions})",
        "needs_number": "{word} 需要题号：{cmd}   （现有题目：{all}）",
        "file_as_command": "要评测一个文件，请写出题号和文件：{cmd}",
        "one_at_a_time": "一次评测一道题：{cmd}",
        "did_you_mean": "你是想运行：{cmd}",
        "created": "已从起始文件创建 {path}。编辑它，然后评测：{cmd}",
        "exists": "{path} 已存在，未做改动。评测它：{cmd}",
        "unknown": "没有第 {n} 题。现有题目：{all}",
        "list_head": "练习题（✓ 已通过 · ✗ 做过但未通过 · – 未做）",
        "list_foot": "看题：{show}    开始：{start}",
        "bad_progress": "警告：{path} 无法读取或已损坏（{why}），进度按空处理；下次评测时会重写。",
        "save_failed": "警告：无法把进度保存到 {path}（{why}）",
        "judge_error": "评测无法运行你的文件（{why}）。这不是你代码的问题；详情：",
        "interrupted": "已中断：评测终止了你的代码，没有记录结果。",
        "in_process": "（在当前进程内评测：卡住的用例无法被终止，请中断内核）",
        "hint_not_implemented": "这个函数仍然抛出 NotImplementedError：把起始文件里的函数体换成你的实现",
        "hint_wrong_dtype": "数值对了但 dtype 不对：应返回 {dtype}（把结果转回去）",
        "died_load": "导入你的文件时进程结束了，还没有运行任何用例（{how}）",
        "died_between": "进程在两个用例之间结束了（{how}）：是你启动的线程或进程吗？",
        "oom_kill": "信号 SIGKILL：被外部终止；内存耗尽？",
        "garbled": "运行器发给评测的消息被破坏了（{why}）：你的代码写入或关闭了评测的私有管道",
        "stalled_returned": "你的函数返回了，但结果没能及时保存（你的代码动了评测的文件吗？）",
        "stalled_between": "进程在两个用例之间停止响应（你的线程占住了它？）",
        "not_dense": "期望一个稠密的 torch.Tensor，实际是 {got}",
        "running": "用例 {i}/{n} · {label} · {fn} …",
        "tampered": "题目的参考文件与课程中的不一致：{files}。是不小心改了吗？恢复：git checkout -- {folder}   "
                    "（有意修改题目的开发者：{cmd}）",
        "hint_out_of_memory": "内存耗尽：你的代码申请的内存超过了评测允许的上限（{limit}）；这些输入远用不了这么多，"
                              "找找比输入大得多的张量",
        "plug_banner": "plug-in：把第 {n} 题放进整个模型，在子进程中按评测的限制运行 …",
        "plug_not_part": "--plug-in 把模型的一个部件放进整个模型；第 {n} 题不是部件（部件：{parts}）。不加 --plug-in "
                         "评测它：{cmd}",
        "plug_stopped": "plug-in 已停止：{why}",
        "plug_start": "Python、torch 和模型启动超过 {t:g} 秒",
        "plug_ready": "导入你的文件超过 {t:g} 秒",
        "plug_loaded": "课程的模型在调用你的函数之前运行超过 {t:g} 秒",
        "plug_returned": "课程的模型在两次调用你的函数之间运行超过 {t:g} 秒",
        "plug_inside": "模型里对你的 {fn} 的一次调用超过 {limit:g} 秒，即第 {n} 题的时限",
        "plug_died": "子进程被{how}结束",
        "answer": "这道题要你自己写 {functions}；你的文件导入了 {names}，那就是答案。"
                  "请自己实现（torch 和标准库可以用）；没有记为通过",
        "answer_via": "这道题要你自己写 {functions}；你的文件导入了 {names}，而它导入了 {answers}，那就是答案。"
                      "请自己实现（torch 和标准库可以用）；没有记为通过",
        "answer_reference": "这道题要你自己写 {functions}；你的文件用了 {names}：transformers 是判题器核对答案时"
                            "所依据的参考实现，用它不算你自己的作品。请自己实现（torch 和标准库可以用）；没有记为通过",
    },
}

OUTPUT_CAP = 64 * 1024  # bytes of the learner's printed output the judge keeps; the rest is counted and dropped
SHOW_OUTPUT = 20  # lines of it shown with a verdict that is not Accepted
BLOCK_LINES = 60  # lines of a traceback or compile error shown (the runner already collapses repeated frames)
LINE_CHARS = 300  # characters of one such line

# C0 and C1 control characters (but tab), DEL, and the bidirectional overrides that reorder what a line shows
UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text):
    """`text` with every control character shown as an escape: '\x1b[8A' prints as the 7 characters \\x1b[8A."""
    return UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                      else f"\\u{ord(m.group()):04x}", text)


@dataclass
class CaseResult:
    case: object
    verdict: str | None = None  # AC, WA, RE, TLE; None: not run
    time: float | None = None  # seconds inside the learner's function
    got: object = None
    mismatch: object = None
    mutated: bool = False
    error: str = ""  # traceback, or "died:exit:N" / "died:signal:N"
    hints: list = field(default_factory=list)


@dataclass
class Report:
    problem: object
    file: object  # a Path, or "notebook"
    time_limit: float = 0.0  # seconds per case
    load_limit: float = 0.0  # seconds to import the learner's file
    verdict: str = "AC"  # AC, WA, RE, TLE, CE; JE when the judge itself could not run
    results: list = field(default_factory=list)
    message: str = ""  # for verdicts before any case: compile error text, load traceback, "missing:…", "load"
    output: bytes = b""  # the head of what the learner printed
    output_bytes: int = 0
    seconds: float = 0.0
    in_process: bool = False
    memory_limit: int = 0  # MiB
    total_limit: float = 0.0  # seconds for all cases together

    @property
    def passed(self):
        return sum(r.verdict == "AC" for r in self.results)

    @property
    def failure(self):
        return next((r for r in self.results if r.verdict not in ("AC", None)), None)


def width(s):
    return sum(2 if ord(ch) >= 0x2E80 else 1 for ch in s)  # CJK characters take two columns


def size_text(n):
    """Binary units, named as such (the course's MB and GB elsewhere are 10**6 and 10**9 bytes)."""
    if n >= 2 ** 30:
        return f"{n / 2 ** 30:.3g} GiB"
    return f"{n / 2 ** 20:.1f} MiB" if n >= 2 ** 20 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


class Printer:
    def __init__(self, lang, out=print):
        self.lang, self.m, self.v = lang, MSG[lang], VERDICT[lang]
        self.out = lambda text: out("\n".join(safe(ln) for ln in str(text).split("\n")))

    def line(self, key, value=""):
        label = self.m[key]
        self.out(f"{label}{' ' * max(1, 10 - width(label))}{value}".rstrip())

    def block(self, text):
        lines = text.splitlines()
        for ln in lines[:BLOCK_LINES]:
            self.out("  " + (ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + " …"))
        if len(lines) > BLOCK_LINES:
            self.out(f"  … ({len(lines) - BLOCK_LINES} more lines)")

    def report(self, rep, shown_file, again_cmd, progress_file):
        prob = rep.problem
        self.line("problem", f"{prob.number} · {prob.title(self.lang)}")
        self.line("file", shown_file)
        if rep.verdict == "JE":
            self.out(self.m["judge_error"].format(why=rep.message))
            self.block(rep.output.decode("utf-8", "replace")[-3000:])
            return
        if rep.message:  # decided before any case ran
            self.line("verdict", self.v[rep.verdict])
            self._message(rep)
        else:
            self._cases(rep)
            failure = rep.failure
            if failure is None:
                self.line("verdict", self.v["AC"])
            else:
                self._failure(rep, failure)
            self.line("passed", self.m["summary"].format(k=rep.passed, n=len(rep.results), t=rep.seconds))
        self._output(rep)
        if rep.verdict == "AC":
            self.out(self.m["all_passed"].format(n=len(rep.results), path=progress_file))
        elif again_cmd:
            self.out(self.m["again"].format(cmd=again_cmd))

    def label(self, case):
        if self.lang == "zh":
            return case.label.replace("example", "样例").replace("hidden", "隐藏")
        return case.label

    def _cases(self, rep):
        """One row a case; each column as wide as its longest entry (212's chunked_delta_rule, 213's hidden layer 1)."""
        def pad(text, column):
            return text + " " * (column - width(text))
        rows = [(r, self.label(r.case), r.case.fn, self.v[r.verdict]) for r in rep.results]
        labels, fns, verdicts = (max((width(row[k]) for row in rows), default=0) + 2 for k in (1, 2, 3))
        for i, (r, label, fn, verdict) in enumerate(rows, 1):
            mark = {"AC": "✓", None: "·"}.get(r.verdict, "✗")
            t = f"{r.time * 1000:9.2f} ms" if r.time is not None else ""
            self.out(f"  {mark} {i:>2}  {pad(label, labels)}{pad(fn, fns)}{pad(verdict, verdicts)}{t}".rstrip())

    def _message(self, rep):
        msg = rep.message
        if msg.startswith("missing:"):
            self.line("error", self.m["missing"].format(names=msg[len("missing:"):]))
        elif msg.startswith("answer:"):
            self.line("error", self._answer(msg[len("answer:"):].split(", "), rep.problem.functions))
        elif msg == "load":
            self.line("error", self.m["tle_load"].format(t=rep.load_limit))
        elif msg.startswith(("died_load:", "died_between:", "garbled:", "stalled:")):
            self.line("error", self._why(msg))
        elif rep.verdict == "CE":
            self.line("error")
            self.block(msg)
        else:  # an error at import time
            body, _, code = msg.partition("\nsysexit:")
            self.line("error", self.m["load_error"])
            self.block(body)
            if code:
                self.line("hint", self.m["sysexit"].format(code=code))

    def _how(self, how):
        kind, _, val = how.partition(":")
        if kind == "signal":
            if val == str(int(signal.SIGKILL)):
                return self.m["oom_kill"]
            try:
                val = signal.Signals(int(val)).name
            except (ValueError, AttributeError):
                pass
            return self.m["signal"].format(sig=val)
        return self.m["exit_code"].format(rc=val)

    def _answer(self, hits, functions):
        """What the file used: transformers (the reference), the answer, or a module that imports the answer
        ("qwen.model>qwen.mlp"); the kind of the first hit says which, and each hit of that kind is named."""
        kinds = ["answer_reference" if h.split(">")[-1].split(".")[0] == "transformers" else
                 "answer_via" if ">" in h else "answer" for h in hits]
        same = [h.split(">") for h, k in zip(hits, kinds) if k == kinds[0]]
        return self.m[kinds[0]].format(functions=", ".join(functions), names=", ".join(h[0] for h in same),
                                       answers=", ".join(h[-1] for h in same))

    def _why(self, error):
        """The line for a run that ended abnormally: died:HOW, died_load:HOW, died_between:HOW, garbled:WHY,
        stalled:STATE."""
        kind, _, rest = error.partition(":")
        if kind == "garbled":
            return self.m["garbled"].format(why=rest)
        if kind == "stalled":
            return self.m["stalled_returned" if rest == "returned" else "stalled_between"]
        return self.m[kind].format(how=self._how(rest))

    def _failure(self, rep, r):
        from practice.grading import describe  # grading imports torch: only when a case failed

        m, case = self.m, r.case
        idx = rep.results.index(r) + 1
        label = self.label(case) + (", " + m["seed"].format(seed=case.seed) if case.seed is not None else "")
        label += f": {case.note}" if case.note else ""
        self.line("verdict", f"{self.v[r.verdict]} {m['on_case'].format(i=idx, label=label)}")
        self.line("call", case.call_text())
        if r.verdict == "TLE":
            if r.error == "total":
                self.line("error", m["tle_total"].format(t=rep.total_limit, n=len(rep.results)))
                self.line("limit", m["limits"].format(t=rep.time_limit, total=rep.total_limit))
            else:
                self.line("error", m["tle_slow"].format(t=r.time) if r.time is not None
                          else m["tle_killed"].format(t=rep.time_limit))
                self.line("limit", f"{rep.time_limit:g} s")
        elif r.verdict == "RE":
            if r.error.startswith(("died:", "garbled:", "stalled:")):
                self.line("error", self._why(r.error))
            else:
                body, _, code = r.error.partition("\nsysexit:")
                self.line("error")
                self.block(body)
                if code:
                    self.line("hint", m["sysexit"].format(code=code))
        elif r.mismatch is None:  # the right answer, but the input was changed in place
            self.line("error", m["mutated"])
        else:
            mm, info = r.mismatch, r.mismatch.info
            if mm.kind == "text":  # a string: where it first differs, and the text around it in both
                if mm.where != "output":
                    self.line("where", mm.where)
                self.line("first", m["char"].format(idx=info["first"], n_exp=info["n_exp"], n_got=info["n_got"]))
                self.line("expected", info["expected"])
                self.line("got", info["got"])
            elif mm.where == "output":
                self.line("expected", describe(case.expected))
                self.line("got", describe(r.got))
            else:  # inside a dict or tuple: say where, then what differs there
                self.line("where", mm.where)
            if mm.kind == "value":
                worst = _num(info["max_abs"]) + (f" ({m['nan'].format(nan=info['nan'])})" if info["nan"] else "")
                self.line("maxdiff", f"{worst}; " + m["n_bad"].format(n_bad=info["n_bad"], n=info["n"]))
                e, g = _pair(info["exp_at"], info["got_at"])
                self.line("first", m["index"].format(idx=tuple(info["first"]), e=e, g=g))
                self.line("tol", info["tol"])
            elif mm.kind == "keys":
                if info["missing"]:
                    self.line("error", m["keys_missing"].format(keys=_keys(info["missing"])))
                if info["extra"]:
                    self.line("error", m["keys_extra"].format(keys=_keys(info["extra"])))
            elif mm.kind == "type" and info.get("expected") == "torch.Tensor":
                self.line("error", m["not_dense"].format(got=info["got"]))
            elif mm.kind in ("shape", "dtype", "len", "type"):
                if mm.where != "output" or mm.kind == "len":  # at the top the two lines above said it
                    self.line("expected", m[mm.kind].format(v=info["expected"]))
                    self.line("got", m[mm.kind].format(v=info["got"]))
                if mm.kind == "len" and "first" in info:  # a list: the items around its first difference
                    self.line("first", m["item"].format(idx=info["first"], e=info["exp_at"], g=info["got_at"]))
            elif mm.kind == "text":
                pass
            else:
                self.line("expected", info["expected"])
                self.line("got", info["got"])
            if r.mutated:
                self.line("error", m["mutated"])
        for key in r.hints:
            if key == "not_implemented":
                text = m["hint_not_implemented"]
            elif key == "out_of_memory":
                text = m["hint_out_of_memory"].format(limit=size_text(rep.memory_limit * 2 ** 20))
            elif key == "wrong_dtype":
                mm = r.mismatch
                dtype = mm.info["expected"] if mm is not None and mm.kind == "dtype" else \
                    describe(case.expected).split("[")[0]
                text = m["hint_wrong_dtype"].format(dtype=dtype)
            else:
                text = rep.problem.hint_text(key, self.lang) or key
            self.line("hint", text)

    def _output(self, rep):
        if not rep.output_bytes:
            return
        cut = rep.output_bytes > len(rep.output)
        if rep.verdict != "AC":
            lines = rep.output.decode("utf-8", "replace").splitlines()
            self.line("output")
            for ln in lines[:SHOW_OUTPUT]:
                self.out("  | " + ln[:200])
            cut = cut or len(lines) > SHOW_OUTPUT
        if cut:
            self.out(self.m["printed"].format(size=size_text(rep.output_bytes), cap=size_text(len(rep.output))))


def _pair(e, g):
    """Two numbers with enough significant digits to tell them apart (6 unless they need more, at most 17)."""
    if not (isinstance(e, float) and isinstance(g, float)) or e != e or g != g:
        return _num(e), _num(g)
    for digits in range(6, 18):
        a, b = f"{e:.{digits}g}", f"{g:.{digits}g}"
        if a != b:
            return a, b
    return a, b


def _num(x):
    if isinstance(x, float):
        return "nan" if x != x else f"{x:.6g}"
    return str(x)


def _keys(keys):
    shown = ", ".join(repr(k) for k in keys[:4])
    return shown + (f" … (+{len(keys) - 4})" if len(keys) > 4 else "")


def shown_path(path):
    """The path relative to the current folder when it lies inside it, else absolute."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


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
