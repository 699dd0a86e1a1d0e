"""Every text the judge prints, each written once with its English and its Chinese side by side (`tr("English",
"中文")`, as everywhere in the course: qwen/lang.py), and chosen when it is printed by the language the learner asked
for: --lang, else QWEN_LANG, else the locale (detect_lang). A caller that is given a language speaks it for a block
(`speaking`); the judge's command line speaks it from its first line (judge.main). Also the commands the messages
suggest (cmd). It imports only qwen.lang (the standard library's argparse, locale and os), so that `list` and `show`
start fast."""
from contextlib import contextmanager

from qwen.lang import from_environment, language, tr, use


def detect_lang(explicit=None):
    """--lang wins; else QWEN_LANG, else the locale, as everywhere in the course (qwen/lang.py)."""
    return explicit or from_environment()


@contextmanager
def speaking(lang=None):
    """The judge's texts in `lang` inside the block (None: the language already chosen), the earlier choice after it,
    so that check(..., lang="zh") in a notebook does not switch the rest of the notebook."""
    before = language()
    use(lang)
    try:
        yield
    finally:
        use(before)


def cmd(*words):
    return " ".join(["python practice/judge.py", *map(str, words)])


def joined(items):
    """Names or numbers in a line: "a, b" in English, "a、b" in Chinese."""
    return tr(", ", "、").join(map(str, items))


# ---------------------------------------------------------------- verdicts and the report's labels

def verdict(code):
    """A verdict's name: AC, WA, RE, TLE, CE, NG (not graded: the file used the answer) or None (the case never ran)."""
    return {"AC": tr("Accepted", "通过"), "WA": tr("Wrong Answer", "答案错误"), "RE": tr("Runtime Error", "运行错误"),
            "TLE": tr("Time Limit Exceeded", "超出时间限制"), "CE": tr("Compile Error", "编译错误"),
            "NG": tr("Not graded", "不予评测"), None: tr("not run", "未运行")}[code]


def label(key):
    """The label of a report line (report.Printer pads it to one column)."""
    return {"problem": tr("Problem", "题目"), "file": tr("File", "文件"), "verdict": tr("Verdict", "结果"),
            "call": tr("Call", "调用"), "expected": tr("Expected", "期望"), "got": tr("Got", "实际"),
            "where": tr("At", "位置"), "maxdiff": tr("Max |Δ|", "最大 |Δ|"), "first": tr("First bad", "首个出错"),
            "tol": tr("Tolerance", "容差"), "hint": tr("Hint", "提示"), "error": tr("Error", "错误"),
            "output": tr("Output", "输出"), "passed": tr("Passed", "合计"), "limit": tr("Limit", "时限")}[key]


def case_label(text):
    """A case's label ("example 1", "hidden 4", "hidden layer 2") as the learner reads it."""
    text = text.replace("example", tr("example", "样例")).replace("hidden layer", tr("hidden layer", "隐藏层"))
    return text.replace("hidden", tr("hidden", "隐藏"))


def case_name(label, seed=None, note=""):
    """A case named in the verdict line: its label, its seed when it has one, and its note."""
    text = label + (tr(f", seed {seed}", f"，种子 {seed}") if seed is not None else "")
    return text + (tr(f": {note}", f"：{note}") if note else "")


def on_case(name, i, case):
    """The verdict line of a failed case: 'Runtime Error on case 1 (example 1)'."""
    return tr(f"{name} on case {i} ({case})", f"用例 {i}（{case}）：{name}")


def summary(k, n, t):
    return tr(f"{k} of {n} cases · {t:.2f} s", f"通过 {k}/{n} 个用例 · {t:.2f} 秒")


def all_passed(n, path):
    """Every case passed; `path` is where the progress was saved (None: it was not saved)."""
    if path is None:
        return tr(f"All {n} cases passed.", f"全部 {n} 个用例通过。")
    return tr(f"All {n} cases passed. Progress saved in {path}.", f"全部 {n} 个用例通过，进度已保存到 {path}。")


def reference_not_recorded(name):
    return tr(f"Not recorded as solved: what was graded is {name}, this problem's own reference solution, not your "
              f"work; define the functions yourself in the notebook and check them again",
              f"不记为通过：这次评测的是 {name}，即本题自带的参考答案，不是你自己写的；请在笔记本里自己定义这些函数，"
              f"再评测一次")


def again(command):
    return tr(f"Fix it and run again: {command}", f"改好后再运行：{command}")


def running(i, n, label, fn):
    """The line a notebook shows while a case runs."""
    return tr(f"case {i}/{n} · {label} · {fn} …", f"用例 {i}/{n} · {label} · {fn} …")


def in_process():
    return tr("(graded in this process: a case that hangs cannot be stopped; interrupt the kernel)",
              "（在当前进程中评测：卡住的用例没法强行停止，只能中断 Jupyter kernel）")


def more_lines(n):
    return tr(f"… ({n} more lines)", f"……（还有 {n} 行）")


def printed(size, cap):
    return tr(f"(your code printed {size}; the judge kept the first {cap})",
              f"（你的代码打印了 {size}，评测器只保留了前 {cap}）")


# ---------------------------------------------------------------- what went wrong in a case

def max_diff(worst, nan, n_bad, n):
    """The Max |Δ| line: the largest difference, the NaNs among them, and how many elements are out of tolerance."""
    if nan:
        return tr(f"{worst} ({nan} NaN); {n_bad} of {n} elements outside the tolerance",
                  f"{worst}（含 {nan} 个 NaN）；{n} 个元素中有 {n_bad} 个超出容差")
    return tr(f"{worst}; {n_bad} of {n} elements outside the tolerance", f"{worst}；{n} 个元素中有 {n_bad} 个超出容差")


def first_index(idx, e, g):
    return tr(f"index {idx}: expected {e}, got {g}", f"下标 {idx}：期望 {e}，实际 {g}")


def first_char(idx, n_exp, n_got):
    return tr(f"character {idx} (the expected text has {n_exp} characters, yours {n_got})",
              f"第 {idx} 个字符（期望的文本共 {n_exp} 个字符，你的共 {n_got} 个）")


def first_item(idx, e, g):
    return tr(f"item {idx}: expected {e}, got {g}", f"第 {idx} 项：期望 {e}，实际 {g}")


def keys_missing(keys):
    return tr(f"missing keys: {keys}", f"缺少键：{keys}")


def keys_extra(keys):
    return tr(f"unexpected keys: {keys}", f"多出的键：{keys}")


def value_of(kind, v):
    """An expected or returned value's shape, dtype, length or type, as a mismatch of that kind shows it."""
    return {"shape": tr(f"shape {v}", f"形状 {v}"), "dtype": f"dtype {v}", "len": tr(f"{v} items", f"{v} 项"),
            "type": f"{v}"}[kind]


def not_dense(got):
    return tr(f"expected a dense torch.Tensor, got {got}", f"应为稠密的 torch.Tensor，实际是 {got}")


def mutated():
    return tr("your function changed its input in place; leave the caller's tensors and dicts alone (work on a copy, "
              "or build a new result)",
              "你的函数原地修改了输入。调用方传进来的张量和字典不能动：请在副本上计算，或者另建一个结果")


def tle_killed(t):
    return tr(f"still running after {t:g} s; the judge stopped it", f"运行 {t:g} 秒仍未结束，评测器已终止运行")


def tle_slow(t):
    return tr(f"took {t:.2f} s", f"用时 {t:.2f} 秒")


def seconds(t):
    """A time limit: '3 s'."""
    return tr(f"{t:g} s", f"{t:g} 秒")


def tle_total(t, n):
    return tr(f"the cases up to this one took over {t:g} s together, the limit for all {n} cases",
              f"算上这个用例，累计用时已超过 {t:g} 秒，这是全部 {n} 个用例的总时限")


def limits(t, total):
    return tr(f"{t:g} s per case, {total:g} s for all together", f"每个用例 {t:g} 秒，全部用例合计 {total:g} 秒")


def tle_load(t):
    return tr(f"importing your file took more than {t:g} s; the judge stopped it",
              f"导入你的文件超过 {t:g} 秒，评测器已终止运行")


def died(kind, how):
    """The process ended: in a case (died), while the file was imported (died_load), between two cases."""
    return {"died": tr(f"the process ended during this case ({how}): os._exit, a crash, or out of memory",
                       f"进程在这个用例运行时结束了（{how}）：可能调用了 os._exit，也可能是崩溃或内存耗尽"),
            "died_load": tr(f"the process ended while your file was being imported, before any case ran ({how})",
                            f"导入你的文件时进程结束了（{how}），还没有运行任何用例"),
            "died_between": tr(f"the process ended between two cases ({how}): a thread or process of yours?",
                               f"进程在两个用例之间结束了（{how}）：是你启动的线程或进程造成的吗？")}[kind]


def exit_code(rc):
    return tr(f"exit code {rc}", f"退出码 {rc}")


def signal_name(sig):
    return tr(f"signal {sig}", f"信号 {sig}")


def oom_kill():
    return tr("signal SIGKILL: killed from outside; out of memory?", "信号 SIGKILL：被外部强制终止，可能是内存耗尽")


def garbled(why):
    return tr(f"the runner's messages to the judge were garbled ({why}): your code wrote to the judge's private pipe "
              f"or closed it",
              f"运行器发给评测器的消息被破坏了（{why}）：你的代码往评测器专用的管道里写了东西，或者把它关掉了")


def stalled(returned):
    """The run stalled where no code of the learner's was running: after a function returned, or between cases."""
    if returned:
        return tr("your function returned, but its result could not be saved in time (did your code touch the "
                  "judge's files?)", "你的函数返回了，但结果没能及时保存（你的代码动过评测器的文件吗？）")
    return tr("the process stopped responding between two cases (a thread of yours keeping it busy?)",
              "进程在两个用例之间停止了响应（是你的线程一直占着它吗？）")


def sysexit(code):
    return tr(f"your code called sys.exit({code}); return a value instead of exiting",
              f"你的代码调用了 sys.exit({code})：函数应当返回结果，而不是退出进程")


def load_error():
    return tr("your file raised an error while being imported, before any case ran:",
              "导入你的文件时出错，还没有运行任何用例：")


def missing(names):
    return tr(f"your file does not define {joined(names)} (keep the starter's names and signatures)",
              f"你的文件没有定义 {joined(names)}（请保留起始代码里的函数名和签名）")


def hint_not_implemented():
    return tr("this function still raises NotImplementedError: replace the starter's body",
              "这个函数还在抛出 NotImplementedError：把起始代码里的函数体换成你自己的实现")


def hint_wrong_dtype(dtype):
    return tr(f"the numbers are right but the dtype is not: return {dtype} (cast the result back)",
              f"数值对了，dtype 不对：应当返回 {dtype}（把结果转换回来）")


def hint_out_of_memory(limit):
    return tr(f"out of memory: your code asked for more than the judge allows ({limit}); these inputs need far less, "
              f"so look for a tensor much larger than them",
              f"内存耗尽：你的代码申请的内存超过了评测器的上限（{limit}）。这些输入远用不了这么多内存，"
              f"找找有没有比输入大得多的张量")


def answer(kind, functions, names, answers):
    """The file used the answer: imported it (answer), imported a module that imports it (answer_via), or used a
    reference library, transformers or gguf (answer_reference; `answers` names it). Nothing was recorded as
    solved."""
    via = names != answers  # a module of the learner's imports the reference (answer_reference)
    functions, names, answers = joined(functions), joined(names), joined(answers)
    uses = tr(f"imports {names}, which imports {answers}", f"导入了 {names}，它又导入了 {answers}") if via else \
        tr(f"uses {names}", f"用了 {names}")
    return {"answer": tr(f"this exercise asks you to write {functions}; your file imports {names}, which is the "
                         f"answer. Write it yourself (torch and the standard library are yours to use); nothing was "
                         f"recorded as solved",
                         f"这道题要你自己写 {functions}，而你的文件导入了 {names}，那就是答案。请自己实现"
                         f"（可以用 torch 和标准库）；本次不记为通过"),
            "answer_via": tr(f"this exercise asks you to write {functions}; your file imports {names}, which imports "
                             f"{answers}, the answer. Write it yourself (torch and the standard library are yours to "
                             f"use); nothing was recorded as solved",
                             f"这道题要你自己写 {functions}，而你的文件导入了 {names}，它又导入了 {answers}，那就是"
                             f"答案。请自己实现（可以用 torch 和标准库）；本次不记为通过"),
            "answer_reference": tr(f"this exercise asks you to write {functions}; your file {uses}: "
                                   f"{answers} is the reference the judge checks answers against, not your own "
                                   f"work. Write it yourself (torch and the standard library are yours to use); "
                                   f"nothing was recorded as solved",
                                   f"这道题要你自己写 {functions}，而你的文件{uses}：{answers} 是评测器"
                                   f"核对答案用的参考实现，用它不算你自己写的。请自己实现（可以用 torch 和标准库）；"
                                   f"本次不记为通过")}[kind]


def judge_error(why):
    return tr(f"The judge could not run your file ({why}). This is not your code's fault; details:",
              f"评测器没能运行你的文件（{why}）。问题不在你的代码；详情如下：")


# ---------------------------------------------------------------- the command line

def list_head():
    return tr("Practice problems (✓ accepted · ✗ tried, not accepted yet · – not tried)",
              "练习题（✓ 已通过 · ✗ 做过但未通过 · – 还没做）")


def list_foot(show, start):
    return tr(f"Read one: {show}    Start one: {start}", f"看题：{show}    开始做题：{start}")


def chapter(n):
    return tr(f"ch{n}", f"第 {n} 章")


def unknown(n, numbers):
    return tr(f"No problem {n}. The problems are: {joined(numbers)}", f"没有第 {n} 题。现有的题目：{joined(numbers)}")


def created(path, command):
    return tr(f"Created {path} from the starter. Edit it, then grade it with: {command}",
              f"已用起始代码创建 {path}。写好后这样评测：{command}")


def exists(path, command):
    return tr(f"{path} already exists; it was left as it is. Grade it with: {command}",
              f"{path} 已经存在，没有改动它。这样评测：{command}")


def no_file(path, command):
    return tr(f"No file at {path}. Start one with: {command}", f"找不到 {path}。先用这条命令创建：{command}")


def no_file_given(path, command):
    return tr(f"No file at {path}: check the path after --file (or start the exercise: {command})",
              f"找不到 {path}：请检查 --file 后面的路径（或者先开始这道题：{command}）")


def is_folder(path):
    return tr(f"{path} is a folder: give --file the path of your .py file",
              f"{path} 是文件夹：--file 后面要写你的 .py 文件的路径")


def is_notebook(path, n, functions):
    call = f"check({n}, {', '.join(functions)})"  # code: its commas stay commas
    return tr(f"{path} is a notebook: the judge grades a .py file. In the notebook, run the exercise's grading cell, "
              f"or: from practice.judge import check; {call}",
              f"{path} 是笔记本文件：评测器只评测 .py 文件。请在笔记本里运行这道题的评测单元格，或者运行："
              f"from practice.judge import check; {call}")


def needs_number(word, command, numbers):
    return tr(f"{word} needs a problem number: {command}   (the problems: {joined(numbers)})",
              f"{word} 后面要写题号：{command}   （现有的题目：{joined(numbers)}）")


def file_as_command(command):
    return tr(f"to grade a file, give the problem number and the file: {command}",
              f"评测一个文件要同时给出题号和文件：{command}")


def one_at_a_time(command):
    return tr(f"one problem at a time: {command}", f"一次只能评测一道题：{command}")


def did_you_mean(command):
    return tr(f"did you mean: {command}", f"你是不是想运行：{command}")


def interrupted():
    return tr("Interrupted: the judge stopped your code. Nothing was recorded.",
              "已中断：评测器停止了你的代码，本次不记录结果。")


def tampered(n, files, restore):
    """The files that decide problem n's verdict differ from the last commit."""
    return tr(f"Problem {n} is not graded: files its verdicts come from differ from the last commit: {joined(files)}. "
              f"Edited by accident? Restore: git checkout -- {restore}   Changed on purpose? Commit the change.",
              f"第 {n} 题不予评测：决定评测结果的文件与最近一次提交不一致：{joined(files)}。"
              f"如果是不小心改的，用 git checkout -- {restore} 恢复；如果是有意修改，请提交改动。")


def tampered_build(n, files):
    """The files that decide problem n's verdict differ from the installed course."""
    return tr(f"Problem {n} is not graded: files its verdicts come from differ from the installed course "
              f"(practice/checksums.json): {joined(files)}. Restore them, or reinstall the course.",
              f"第 {n} 题不予评测：决定评测结果的文件与安装的课程不一致（practice/checksums.json）：{joined(files)}。"
              f"请恢复这些文件，或者重新安装课程。")


# ---------------------------------------------------------------- progress

def bad_progress(path, why):
    return tr(f"warning: {path} is unreadable or corrupt ({why}); treating your progress as empty. It will be "
              f"rewritten at the next grading.",
              f"警告：{path} 无法读取或已损坏（{why}），暂且当作没有进度；下次评测时会重新写入。")


def save_failed(path, why):
    return tr(f"warning: could not save progress to {path} ({why})", f"警告：无法把进度保存到 {path}（{why}）")


# ---------------------------------------------------------------- the plug-in (plugin.py): the judge's side

def plug_banner(n):
    return tr(f"plug-in: exercise {n} in the whole model, in a child process under the judge's limits …",
              f"接入模型：把第 {n} 题装进整个模型，在子进程中按评测器的限制运行……")


def plug_not_part(n, parts, command):
    return tr(f"--plug-in puts a part of the model in the whole model; exercise {n} is not one (the parts: "
              f"{joined(parts)}). Grade it without --plug-in: {command}",
              f"--plug-in（接入模型）会把你写的模型部件装进整个模型，而第 {n} 题不是模型部件"
              f"（部件有：{joined(parts)}）。去掉 --plug-in 评测：{command}")


def plug_stopped(why):
    return tr(f"plug-in stopped: {why}", f"接入模型已停止：{why}")


def plug_over(stopped, t, fn, n, limit):
    """A wait of the plug-in's child past its deadline, by what the judge waited for (PlugProtocol's state)."""
    return {"start": tr(f"Python, torch and the model took over {t:g} s to start",
                        f"启动 Python、torch 和模型用了 {t:g} 秒以上"),
            "ready": tr(f"importing your file took over {t:g} s", f"导入你的文件超过了 {t:g} 秒"),
            "loaded": tr(f"the course's model ran over {t:g} s before calling your functions",
                         f"课程的模型在调用你的函数之前已运行超过 {t:g} 秒"),
            "returned": tr(f"the course's model ran over {t:g} s between two calls of your functions",
                           f"课程的模型在两次调用你的函数之间运行超过 {t:g} 秒"),
            "inside": tr(f"one call of your {fn} inside the model ran over {limit:g} s, exercise {n}'s time limit",
                         f"模型里有一次调用你的 {fn} 超过了 {limit:g} 秒（第 {n} 题的时限）")}[stopped]


def plug_died(how):
    return tr(f"the child process ended by {how}", f"子进程已结束（{how}）")
