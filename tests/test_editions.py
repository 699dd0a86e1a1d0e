"""The two editions, English and Chinese, are one course: every markdown cell of a chapter has its Chinese cell, the
Chinese notebook holds the same code cells and the same sections, a chapter run in Chinese prints the same numbers
and no untranslated sentence, every `tr(en, zh)` pair is complete (tests/test_chinese.py holds the Chinese to
docs/glossary.md). The language switch itself: --lang, QWEN_LANG, the locale."""
import ast
import re
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from helpers import ROOT, TIMING, as_the_script_prints, english_left
from qwen import lang

sys.path.insert(0, str(ROOT / "notebooks"))
import sync  # noqa: E402  (notebooks/sync.py: the one way notebooks are written)

SCRIPTS = [s.name for s in sync.scripts()]
CJK = re.compile(r"[\u4e00-\u9fff]")
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*(?:e[+-]?\d+)?")
CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def markdown_pairs(script):
    """(English, Chinese) for every markdown cell of a chapter script that has its Chinese cell."""
    nb = nbformat.reads(sync.jupytext.writes(sync.jupytext.reads(Path(script).read_text(encoding="utf-8"),
                                                                  fmt="py:percent"), fmt="ipynb"), as_version=4)
    cells = nb.cells
    return [(a.source, b.source) for a, b in zip(cells, cells[1:])
            if a.cell_type == "markdown" and "lang" not in a.metadata and b.metadata.get("lang") == "zh"]


def tr_pairs(path):
    """(English, Chinese) of every tr(en, zh) call in a Python file; f-strings with their placeholders as {}."""
    def text(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        return None

    pairs = []
    for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "tr":
            if len(node.args) == 2:
                pairs.append((text(node.args[0]), text(node.args[1]), node.lineno))
    return pairs


SOURCES = sorted([p for folder in ("chapters", "book", "app", "qwen", "practice", "web") for p in
                  (ROOT / folder).glob("*.py")] + list((ROOT / "practice").glob("[0-9][0-9][0-9]_*/cases.py"))
                 + list(ROOT.glob("*.py")))  # main.py, setup.py


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_markdown_cell_has_its_chinese(script):
    missing = sync.untranslated(ROOT / "chapters" / script)
    assert missing == [], f"{len(missing)} untranslated:\n" + "\n".join(missing[:20])


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_chinese_notebook_has_the_same_code_and_sections(script):
    path = ROOT / "chapters" / script
    en = nbformat.reads(sync.render(path, "en"), as_version=4)
    zh = nbformat.reads(sync.render(path, "zh"), as_version=4)
    code = lambda nb: [c.source for c in nb.cells if c.cell_type == "code" and c.source != sync.SPEAK_CHINESE]  # noqa: E731
    assert code(en) == code(zh)
    assert [c.cell_type for c in en.cells] == [c.cell_type for c in zh.cells if c.source != sync.SPEAK_CHINESE]
    for a, b in markdown_pairs(path):
        heads = lambda text: [len(h) for h in re.findall(r"^(#+) ", CODE_SPAN.sub("", text), re.M)]  # noqa: E731
        assert heads(a) == heads(b), f"the sections differ:\n{a[:200]}\n---\n{b[:200]}"
        assert CJK.search(b), f"a Chinese cell without Chinese: {b[:200]}"


def numbers(text):
    """The numbers a run prints, timings aside (the cells a script runs too: an exercise's title may spell a number
    out, "3-D", 三维, and is left out with the other cells a script shows as one NOTE line), and the lines only the
    Chinese edition prints (lang.zh_only) left out."""
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(lang.ZH_ONLY))
    return Counter(NUMBER.findall(TIMING.sub("", text)))


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_the_chinese_run_prints_the_same_numbers_in_chinese(executed, script):
    """The same numbers (timings aside) in either language, and no English left in the Chinese run: the
    two notebooks' runs, read as the script prints them (tests/test_notebooks.py holds the script to its notebook,
    tests/test_chapters.py runs every script in Chinese)."""
    name = Path(script).stem
    (en_nb, en_error), (zh_nb, zh_error) = executed(name), executed(name, "zh")
    assert en_error is None and zh_error is None, en_error or zh_error
    en, zh = as_the_script_prints(en_nb, "en"), as_the_script_prints(zh_nb, "zh")
    assert numbers(zh) == numbers(en), (numbers(zh) - numbers(en), numbers(en) - numbers(zh))
    left = english_left(zh)
    assert left == [], "English left in the Chinese run:\n" + "\n".join(map(str, left[:10]))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_tr_pair_is_complete(path):
    for en, zh, line in tr_pairs(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        assert en is not None and zh is not None, f"{where}: tr() takes two literal texts, English then Chinese"
        assert (CJK.search(zh) is not None) or not re.search(r"[A-Za-z]{3,}", zh), f"{where}: {zh!r} is not Chinese"
        assert NUMBER.findall(en) == [] or Counter(NUMBER.findall(en)) == Counter(NUMBER.findall(zh)), \
            f"{where}: the two texts hold different numbers: {en!r} / {zh!r}"
        assert en.count("{}") == zh.count("{}"), f"{where}: the two texts show different values: {en!r} / {zh!r}"


LONGEST_HEADING = 60  # characters: a Chinese heading longer than this has swallowed the paragraph under it
HEADING = re.compile(r"^#{1,6} .*$", re.M)


def test_unwrap_joins_a_paragraph_and_nothing_else():
    """The join of Chinese lines wrapped in the source, by hand: a paragraph's lines join where both sides are
    Chinese (Chinese quotes, dashes and ellipses included); a heading, a blank line, a list item and code stay where
    they are."""
    source = ("## 1. 配置\n真实的配置描述\n  多模态模型，ok\nLatin 结尾\n\n第二段\n- 列表项\n- 第二项\n  续行\n"
              "\n引号里的“词”\n——破折号，省略……\n“开头\n```\n代码\n里\n```\n")
    joined = ("## 1. 配置\n真实的配置描述多模态模型，ok\nLatin 结尾\n\n第二段\n- 列表项\n- 第二项续行\n"
              "\n引号里的“词”——破折号，省略……“开头\n```\n代码\n里\n```\n")
    assert lang.unwrap(source) == joined


def test_no_chinese_heading_swallows_its_paragraph():
    """Every heading of the Chinese notebooks (what the Chinese chapter pages show) and of the exercise statements
    as their pages show them is a heading, not a heading run into the paragraph under it."""
    texts = [(f"notebooks/zh/{s.stem}.ipynb", c.source) for s in sync.scripts()
             for c in nbformat.reads(sync.render(s, "zh"), as_version=4).cells if c.cell_type == "markdown"]
    texts += [(f"practice/{f.parent.name}/README.zh.md", lang.unwrap(f.read_text(encoding="utf-8")))
              for f in sorted((ROOT / "practice").glob("[0-9][0-9][0-9]_*/README.zh.md"))]
    long = [f"{where}: {heading[:80]}…" for where, text in texts for heading in HEADING.findall(CODE_SPAN.sub("", text))
            if len(heading) > LONGEST_HEADING]
    assert long == [], f"{len(long)} headings over {LONGEST_HEADING} characters:\n" + "\n".join(long[:10])


def test_the_language_follows_the_learner(monkeypatch):
    """--lang (lang.use) wins; else QWEN_LANG; else the locale; else English. A wrong QWEN_LANG says so."""
    for var in ("QWEN_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert lang.from_environment() == "zh"
    monkeypatch.setenv("QWEN_LANG", "en")
    assert lang.from_environment() == "en"
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.setenv("QWEN_LANG", "zh")
    assert lang.from_environment() == "zh"
    monkeypatch.setenv("QWEN_LANG", "fr")
    assert lang.from_environment() == "en"
    saved = lang.language()
    try:
        lang.use("zh")
        assert lang.tr("a", "甲") == "甲"
        with pytest.raises(ValueError, match="en and zh"):
            lang.use("fr")
    finally:
        lang.use(saved)
