"""The Chinese edition is written in one vocabulary and one style (docs/glossary.md): every Chinese text the course
ships — the chapters' Chinese cells, every tr(en, zh) pair (printed lines, figure labels, the judge, the chat, the
errors), the exercise statements and hints, the READMEs — keeps the glossary's renderings and none it rules out,
quotes with “”, uses full-width punctuation in a Chinese sentence and one space between Chinese and Latin."""
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
import tomllib
from test_editions import SCRIPTS, SOURCES, markdown_pairs, tr_pairs

from helpers import ROOT, english_left
from qwen import lang

GLOSSARY = ROOT / "docs" / "glossary.md"
DOCUMENTS = [("README.md", "README.zh.md"), ("CONTRIBUTING.md", "CONTRIBUTING.zh.md"),
             ("practice/README.md", "practice/README.zh.md")]
FENCED = re.compile(r"```.*?```|\$\$.*?\$\$", re.S)  # a code block, a display formula
CODE = re.compile(r"`[^`\n]*`|\$[^$\n]+\$|https?://[^\s)）]+|[(\[][^()\[\]\n]*,[^()\[\]\n]*[)\]]")
# inline code, an inline formula, an address, a tuple or a shape written as notation: (通道, 帧, 行, 列)
MARKUP = re.compile(r"<[^>\n]*>|(?<=\])\([^)\s]*\)")  # an HTML tag, a link's target
CJK = "\u4e00-\u9fff"


def parse(cell: str) -> list[str | re.Pattern]:
    """A table cell's words, comma-separated: plain text, or `/regex/`."""
    words = [w.strip() for w in cell.split(", ") if w.strip()]
    return [re.compile(w[1:-1]) if len(w) > 2 and w.startswith("/") and w.endswith("/") else w for w in words]


def glossary() -> tuple[list[tuple[str, str]], list[tuple[re.Pattern | str, str]]]:
    """The checked table: [(english, chinese)] to pair, and every word no Chinese text may hold, with the rendering to
    use instead (the checked table's avoid column and the table of metaphors and calques under it)."""
    section = GLOSSARY.read_text(encoding="utf-8").split("## Checked")[1].split("\n## ")[0]
    pairs: list[tuple[str, str]] = []
    avoid: list[tuple[re.Pattern | str, str]] = []
    kind = None
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip()[1:-1].split("|")]
        if cells[0] in ("English", "不用 (avoid)"):
            kind = cells[0]
        elif kind == "English":
            english, chinese, words = cells
            pairs.append((english, chinese))
            avoid += [(w, chinese) for w in parse(words)]
        else:
            avoid += [(w, cells[1]) for w in parse(cells[0])]
    return pairs, avoid


def plain(text: str) -> str:
    """A Chinese text as read for its words: code, TeX, markup and addresses left out, a wrapped line joined."""
    return MARKUP.sub("", CODE.sub("C", FENCED.sub("\n", lang.unwrap(text))))


def texts() -> list[tuple[str, str, str]]:
    """(where, English, Chinese) for every text the course ships in both languages: chapter cells, tr pairs (the
    exercises' case notes too), exercise titles, statements and hints, the READMEs."""
    out = [(f"chapters/{s}", a, b) for s in SCRIPTS for a, b in markdown_pairs(ROOT / "chapters" / s)]
    out += [(f"{p.relative_to(ROOT)}:{n}", a, b) for p in SOURCES for a, b, n in tr_pairs(p) if a and b]
    for folder in sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*")):
        hints = folder / "mistakes.toml"
        if hints.is_file():
            out += [(f"practice/{folder.name}/mistakes.toml:{key}", entry["en"], entry["zh"])
                    for key, entry in tomllib.loads(hints.read_text(encoding="utf-8")).items()
                    if isinstance(entry, dict) and entry.get("en") and entry.get("zh")]
        title = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["title"]
        out.append((f"practice/{folder.name}/meta.json", title["en"], title["zh"]))
        out.append((f"practice/{folder.name}/README.zh.md", (folder / "README.md").read_text(encoding="utf-8"),
                    (folder / "README.zh.md").read_text(encoding="utf-8")))
    out += [(zh, (ROOT / en).read_text(encoding="utf-8"), (ROOT / zh).read_text(encoding="utf-8"))
            for en, zh in DOCUMENTS if (ROOT / zh).is_file()]
    return out


def departures(where: str, en: str, zh: str, pairs, avoid) -> list[str]:
    """What a Chinese text (and its English) do against the glossary."""
    problems = []
    prose, words = " ".join(plain(en).split()), " ".join(plain(zh).split())
    for english, chinese in pairs:
        if english != "—" and re.search(rf"\b{re.escape(english)}\b", prose, re.I) \
                and not any(c in words for c in chinese.split(" / ")):
            problems.append(f"{where}: '{english}' without '{chinese}'")
    for word, instead in avoid:
        found = word.search(words) if isinstance(word, re.Pattern) else (word if word in words else None)
        if found:
            said = found.group(0) if isinstance(found, re.Match) else found
            problems.append(f"{where}: '{said}' (the glossary says '{instead}')")
    return problems


STYLE = [
    (re.compile(f'"(?! )[^"\\n]*[{CJK}][^"\\n]*(?<! )"'), "ASCII quotes around Chinese: use “”"),
    (re.compile(f"[{CJK}][,;:?!](?=\\s|$|[{CJK}])"), "a half-width mark in a Chinese sentence: use ，；：？！"),
    (re.compile(f"[{CJK}][A-Za-z0-9]|[A-Za-z0-9][{CJK}]"), "Chinese and Latin without a space between them"),
    (re.compile(f"[{CJK}]  +[A-Za-z0-9]|[A-Za-z0-9]  +[{CJK}]"), "more than one space between Chinese and Latin"),
]


def style(where: str, zh: str) -> list[str]:
    problems = []
    for line in plain(zh).splitlines():
        if line.lstrip().startswith("|") or "{}" in line:
            continue  # a table's padding and a value filled in at run time are laid out on purpose
        for pattern, why in STYLE:
            problems += [f"{where}: {why}: …{line[max(0, m.start() - 12):m.end() + 12].strip()}…"
                         for m in pattern.finditer(line)]
    return problems


def test_the_glossary_reads_as_a_table():
    """The checked table's rows come out whole: its terms, the regular expressions and the metaphors under it."""
    pairs, avoid = glossary()
    assert ("KV cache", "键值缓存") in pairs and ("recurrent", "递推") in pairs
    assert ("KV 缓存", "键值缓存") in avoid and ("墙", "内存带宽上限、瓶颈") in avoid
    pattern = next(w for w, _ in avoid if isinstance(w, re.Pattern) and "个词" in w.pattern)
    assert pattern.search("每个词") and not pattern.search("一个词表")


def test_the_glossary_is_kept():
    pairs, avoid = glossary()
    problems = [p for where, en, zh in texts() for p in departures(where, en, zh, pairs, avoid)]
    assert problems == [], f"{len(problems)} departures from docs/glossary.md:\n" + "\n".join(problems[:40])


def test_the_style_is_kept():
    problems = [p for where, _, zh in texts() for p in style(where, zh)]
    assert problems == [], f"{len(problems)} slips of the style in docs/glossary.md:\n" + "\n".join(problems[:40])


@pytest.mark.parametrize("text, found", [
    ("温度 T 去除 logits，得到新的分布", "去除 logits"),
    ("递归形式要走 T 个串行步骤", "递归"),
    ("逐词计算的门控 delta 规则", "词"),
    ("这里读不到墙", "墙"),
    ("已证明它与递推形式相等", "相等"),
    ("每个权重 8.5 位", "位"),
    ("int8，每个输出通道一个 scale", "scale"),
])
def test_a_planted_rendering_is_caught(text, found):
    pairs, avoid = glossary()
    problems = departures("planted", "", text, pairs, avoid)
    assert problems and found in problems[0], problems


@pytest.mark.parametrize("text", ['他说"你好"', "结果正确;下一步", "第3章", "用F.linear 计算"])
def test_a_planted_slip_of_style_is_caught(text):
    assert style("planted", text), text


def test_a_kept_term_and_a_clean_line_pass():
    pairs, avoid = glossary()
    clean = "逐 token 计算递推形式，与 transformers 逐位一致；每个权重 8.5 比特，32 位浮点数，一个词表。"
    assert departures("clean", "", clean, pairs, avoid) == [] and style("clean", clean) == []
    assert departures("pair", "the KV cache grows", "缓存变大", pairs, avoid) == ["pair: 'KV cache' without '键值缓存'"]


# Nothing English in a Chinese run: each command a learner types, with --lang zh, its help and one short session.
# The chapters' own runs are checked where they run in Chinese (tests/test_editions.py, tests/test_chapters.py).
HELPS = [["main.py", "--help"], ["main.py", "chat", "--help"], ["practice/judge.py", "--help"]] + [
    pytest.param([f"chapters/{s}", "--help"], marks=[pytest.mark.slow] if i else [])  # one parser: one in the fast run
    for i, s in enumerate(SCRIPTS)]
SESSIONS = [["practice/judge.py", "list"], ["practice/judge.py", "show", "223"], ["practice/judge.py", "999"],
            ["practice/judge.py", "204", "--file", "practice/204_rmsnorm/starter.py"]]


def in_chinese(args, stdin=None, timeout=120):
    """What a command prints (stdout and stderr) when the learner asks for Chinese with --lang zh, in an English
    locale (so --lang alone decides)."""
    env = {k: v for k, v in os.environ.items() if k not in ("QWEN_LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE")}
    r = subprocess.run([sys.executable, *args, "--lang", "zh"], input=stdin, capture_output=True, text=True,
                       cwd=ROOT, env=dict(env, LANG="C.UTF-8"), timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def test_english_left_is_found():
    """The detector itself: a planted English sentence, and English words between Chinese ones, are found; code,
    quotes, names, numbers and the kept terms are not."""
    assert english_left("第 0 层（int8, group 32, packed kernel）")
    assert english_left("评测器：the judge stopped it") and english_left("一个 batch 里的序列数")
    clean = ("用 `F.linear` 计算 top-k 的 logits；token id 从 0 到 255；Q8_0 块：10 18 ab cd；'You are helpful.' 是"
             "例子；运行 python main.py chat --lang zh；DeltaNet 的 kernel；from practice.judge import check；"
             "先 pip install transformers")
    assert english_left(clean) == []


@pytest.mark.parametrize("args", HELPS, ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_a_chinese_help_is_chinese(args):
    rc, out = in_chinese(args)
    assert rc == 0 and "用法：" in out and "选项：" in out, out[-2000:]
    assert english_left(out) == [], f"`{' '.join(args)} --lang zh`:\n" + "\n".join(map(str, english_left(out)))


@pytest.mark.parametrize("args", SESSIONS, ids=lambda a: " ".join(a))
def test_a_chinese_judge_session_is_chinese(args):
    _, out = in_chinese(args)
    assert re.search(f"[{CJK}]", out), out
    assert english_left(out) == [], f"`{' '.join(args)} --lang zh`:\n" + "\n".join(map(str, english_left(out)))


def test_a_chinese_chat_session_is_chinese():
    """/help, one message (its reply cut to 4 tokens) and /quit on the synthetic checkpoint: every line the chat
    writes is Chinese; the model's reply, random tokens on these weights, is left out."""
    session = "/limit 4\n/help\n你好\n/quit\n"
    rc, out = in_chinese(["main.py", "chat", "--model", "synthetic"], stdin=session, timeout=300)
    assert rc == 0, out[-2000:]
    said = re.sub(r"qwen>.*", "qwen>", out)  # the reply runs from the prompt mark to the end of its line
    assert "命令" in said and english_left(said) == [], "\n".join(map(str, english_left(said)))


def test_the_chinese_readme_holds_the_speed_numbers():
    """README.zh.md is complete in itself: its speed section holds every number of the English one (the measured
    speeds, the bounds, the commands' settings), not a pointer to the English README."""
    number = re.compile(r"(?<![A-Za-z_\d.])-?\d+(?:[.,]\d+)*")
    en = (ROOT / "README.md").read_text(encoding="utf-8").split("## Speed")[1].split("\n## ")[0]
    zh = (ROOT / "README.zh.md").read_text(encoding="utf-8").split("## 速度")[1].split("\n## ")[0]
    assert Counter(number.findall(zh)) == Counter(number.findall(en))
    assert "README.md" not in zh


def test_no_chinese_markdown_breaks_a_line_between_two_chinese_characters():
    """A markdown viewer (GitHub, an editor's preview) shows a line break inside a paragraph as a space, which
    Chinese text does not have: the Chinese documents break lines only where a space belongs (at Latin, at code) or
    between paragraphs, which is what lang.unwrap leaves."""
    names = ("README.zh.md", "CONTRIBUTING.zh.md", "practice/README.zh.md", "docs/glossary.md")
    files = [ROOT / name for name in names]
    files += sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*/README.zh.md"))
    wrapped = [f.relative_to(ROOT).as_posix() for f in files
               if lang.unwrap(text := f.read_text(encoding="utf-8")) != text]
    assert wrapped == [], f"lines broken between two Chinese characters (join them: lang.unwrap) in {wrapped}"


def test_a_chinese_help_fits_the_terminal():
    """argparse wraps help by characters, and a Chinese character takes two columns: the course wraps a Chinese
    help by columns (lang.columns), so an 80-column terminal shows `main.py chat --help` unbroken."""
    env = dict(os.environ, COLUMNS="80")
    r = subprocess.run([sys.executable, "main.py", "chat", "--help", "--lang", "zh"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    wide = [line for line in r.stdout.splitlines() if lang.columns(line) > 80]
    assert r.returncode == 0 and wide == [], "\n".join(wide)


def test_a_chinese_help_line_never_starts_with_a_closing_mark():
    """A Chinese help wrapped by terminal columns keeps 、，。）… with the piece before them: no line starts with
    one, and none is wider than asked."""
    import argparse

    spoken = lang.language()
    try:
        lang.use("zh")
        text = "其他情况（fp32、cuda、mps）每次都先反量化。" * 4
        for width in range(20, 41):
            lines = lang._wrap_by_columns(argparse.HelpFormatter("x"), text, width)
            assert lines and all(line[0] not in lang.CLOSING and lang.columns(line) <= width for line in lines), lines
    finally:
        lang.use(spoken)
