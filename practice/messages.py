"""Every text the judge prints, in English and Chinese (VERDICT, MSG), the language it prints in (detect_lang) and
the commands its messages suggest (cmd). It imports only qwen.lang (the standard library's locale and os), so that
`list` and `show` start fast."""
from qwen.lang import from_environment

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
        "tampered": "Problem {n} is not graded: files its verdicts come from differ from the last commit: {files}. "
                    "Edited by accident? Restore: git checkout -- {restore}   Changed on purpose? Commit the change.",
        "tampered_build": "Problem {n} is not graded: files its verdicts come from differ from the installed course "
                          "(practice/checksums.json): {files}. Restore them, or reinstall the course.",
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
        "tampered": "第 {n} 题不予评测：决定其评测结果的文件与最近一次提交不一致：{files}。不小心改的？"
                    "恢复：git checkout -- {restore}   有意修改的？请提交改动。",
        "tampered_build": "第 {n} 题不予评测：决定其评测结果的文件与安装的课程不一致（practice/checksums.json）："
                          "{files}。请恢复这些文件，或重新安装课程。",
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


def detect_lang(explicit=None):
    """--lang wins; else QWEN_LANG, else the locale, as everywhere in the course (qwen/lang.py)."""
    return explicit or from_environment()


def cmd(*words):
    return " ".join(["python practice/judge.py", *map(str, words)])
