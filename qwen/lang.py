"""The language the course speaks to you, English or Chinese, and the one way a text carries both.

Every text a learner reads is written in both languages side by side in the source, so the two can never drift
apart unnoticed: `tr("the English", "中文")` in code (a printed line, a figure's title, the chat's help), and, in a
chapter's prose, a markdown cell followed by its Chinese cell (notebooks/sync.py writes one notebook per language).
The code itself is written once.

argparse's own words ("usage:", "options", "show this help message and exit", its error lines) come from the
standard library in English; the course gives them the Chinese below, through the hook argparse itself calls for each
such word (gettext's `_`), so that a Chinese `--help` or a mistyped option is Chinese from its first line; and a
Chinese help is wrapped by terminal columns (a Chinese character takes two), where argparse counts characters.

Which language: `--lang en|zh` on the command line (chapters, main.py, the judge, the chat), else the environment
variable QWEN_LANG (notebooks, scripts), else the locale (LC_ALL, LC_MESSAGES, LANG, LANGUAGE: zh_* -> Chinese),
else English.
"""
import argparse
import locale
import os
import re
import sys
import unicodedata

LANGUAGES = ("en", "zh")


def from_environment() -> str:
    """QWEN_LANG when it names a language, else the locale: "zh" or "en"."""
    asked = os.environ.get("QWEN_LANG", "").strip().lower()
    if asked:
        if asked in LANGUAGES:
            return asked
        print(f"(QWEN_LANG={asked!r} is not a language of the course: en or zh; using the locale's)", file=sys.stderr)
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        if os.environ.get(var):
            return "zh" if os.environ[var].lower().startswith("zh") else "en"
    try:
        name = (locale.getlocale()[0] or "").lower()
    except ValueError:
        name = ""
    return "zh" if name.startswith(("zh", "chinese")) else "en"


def from_command_line(argv: list[str]) -> str | None:
    """--lang X (or --lang=X) in `argv`, read before a parser exists, so that its --help speaks X; None if absent."""
    for i, word in enumerate(argv):
        value = argv[i + 1] if word == "--lang" and i + 1 < len(argv) else word.partition("=")[2] \
            if word.startswith("--lang=") else None
        if value is not None:
            return value if value in LANGUAGES else None
    return None


_current = from_environment()


def use(lang: str | None) -> str:
    """Speak `lang` from now on (what --lang sets); None keeps the current choice."""
    global _current
    if lang is None:
        return _current
    if lang not in LANGUAGES:
        raise ValueError(f"the course speaks {' and '.join(LANGUAGES)}, not {lang!r}")
    _current = lang
    return _current


def language() -> str:
    return _current


def tr(en: str, zh: str) -> str:
    """The text in the language the course speaks now."""
    return zh if _current == "zh" else en


ZH_ONLY = "〔中文版〕"  # opens a line only the Chinese edition prints: its numbers are its own, not the English run's


def zh_only(line: str) -> None:
    """Print a line the Chinese edition adds (a Chinese example beside the English one); the English run prints
    nothing. The mark lets the check that both runs print the same numbers leave such lines out."""
    if _current == "zh":
        print(f"{ZH_ONLY} {line}")


WIDE = re.compile("[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef“”‘’—…·]")  # a CJK character or Chinese punctuation
FENCE = re.compile(r"(```.*?```)", re.S)
HEADING = re.compile(r"#{1,6}[ \t]")  # a markdown heading: one line, never joined to the next


def unwrap(markdown: str) -> str:
    """Chinese markdown wrapped in the source, joined back where a line break falls between two Chinese characters:
    markdown shows such a break as a space, which Chinese text does not have. Only a paragraph's own lines are joined:
    a heading is one line (the text under it starts a paragraph), a blank line ends a paragraph, and a list item or
    a table row starts with its mark, not a Chinese character. Code blocks are left as written."""
    pieces = FENCE.split(markdown)
    return "".join(p if i % 2 else _join_lines(p) for i, p in enumerate(pieces))


def _join_lines(text: str) -> str:
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        above, below = out[-1], line.lstrip(" \t")
        if WIDE.fullmatch(above[-1:]) and WIDE.match(below) and not HEADING.match(above):
            out[-1] += below  # the same paragraph, wrapped between two Chinese characters
        else:
            out.append(line)
    return "\n".join(out)


ARGPARSE_ZH = {  # argparse's words, as its source spells them, and how the Chinese edition says them
    "usage: ": "用法：",
    "options": "选项",
    "optional arguments": "选项",
    "positional arguments": "位置参数",
    "show this help message and exit": "显示本帮助并退出",
    "show program's version number and exit": "显示版本号并退出",
    "%(prog)s: error: %(message)s\n": "%(prog)s：错误：%(message)s\n",
    "argument %(argument_name)s: %(message)s": "参数 %(argument_name)s：%(message)s",
    "unrecognized arguments: %s": "无法识别的参数：%s",
    "the following arguments are required: %s": "缺少必需的参数：%s",
    "one of the arguments %s is required": "参数 %s 必须给出其中一个",
    "not allowed with argument %s": "不能与参数 %s 一起使用",
    "expected one argument": "需要一个值",
    "expected at most one argument": "最多需要一个值",
    "expected at least one argument": "至少需要一个值",
    "expected %s argument": "需要 %s 个值",
    "expected %s arguments": "需要 %s 个值",
    "invalid choice: %(value)r (choose from %(choices)s)": "无效的选择：%(value)r（可选：%(choices)s）",
    "invalid %(type)s value: %(value)r": "无效的 %(type)s 值：%(value)r",
    "ambiguous option: %(option)s could match %(matches)s": "有歧义的选项：%(option)s 可能是 %(matches)s",
    "ignored explicit argument %r": "忽略了显式给出的参数 %r",
    "can't open '%(filename)s': %(error)s": "无法打开 '%(filename)s'：%(error)s",
}
_gettext, _ngettext = argparse._, argparse.ngettext  # type: ignore[attr-defined]


def _argparse_words(message: str) -> str:
    return ARGPARSE_ZH.get(message, message) if _current == "zh" else _gettext(message)


def _argparse_plural(singular: str, plural: str, n: int) -> str:
    if _current == "zh":
        return ARGPARSE_ZH.get(singular if n == 1 else plural, singular if n == 1 else plural)
    return _ngettext(singular, plural, n)


_format_help = argparse.HelpFormatter.format_help
_split_lines, _fill_text = argparse.HelpFormatter._split_lines, argparse.HelpFormatter._fill_text
CJK = "\u2e80-\u9fff\uff00-\uffef\u3000-\u303f“”‘’"
CLOSING = "、，。：；！？）》”」』"  # marks a Chinese line never starts with: they stay with the piece before them
# one Chinese character or one Latin word, with the closing marks after it, or the space between
PIECE = re.compile(f"[{CJK}][{CLOSING}]*|[^\\s{CJK}]+[{CLOSING}]*|\\s+")


def columns(text: str) -> int:
    """How wide `text` shows in a terminal: a Chinese character or full-width mark takes two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def ljust(text: str, n: int) -> str:
    """`text` padded with spaces to `n` terminal columns (str.ljust counts characters, so a Chinese column would not
    line up)."""
    return text + " " * max(0, n - columns(text))


def rjust(text: str, n: int) -> str:
    """`text` padded on the left to `n` terminal columns."""
    return " " * max(0, n - columns(text)) + text


def yes_no(flag: bool) -> str:
    """A check's outcome in a printed line: Python's True/False in English, 是/否 in Chinese."""
    return tr("True", "是") if flag else tr("False", "否")


def _wrap_by_columns(formatter: argparse.HelpFormatter, text: str, width: int) -> list[str]:
    """An option's help in lines of at most `width` terminal columns (argparse counts characters, which lets a
    Chinese line run twice as wide): Chinese breaks between any two characters, Latin between words."""
    if _current != "zh":
        return _split_lines(formatter, text, width)
    lines, line = [], ""
    for piece in PIECE.findall(" ".join(text.split())):
        if line and columns(line + piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = "" if piece.isspace() else piece
        else:
            line += piece
    return lines + [line.rstrip()] if line.strip() else lines


def _fill_by_columns(formatter: argparse.HelpFormatter, text: str, width: int, indent: str) -> str:
    """A parser's description, filled to `width` terminal columns the same way."""
    if _current != "zh":
        return _fill_text(formatter, text, width, indent)
    return "\n".join(indent + line for line in _wrap_by_columns(formatter, text, width - len(indent)))


SECTION = re.compile(r"^(\S[^\n]*):$", re.M)  # a help section's title line, "options:", which argparse ends with ":"


def _help_in_chinese(formatter: argparse.HelpFormatter) -> str:
    text = _format_help(formatter)
    return SECTION.sub(r"\1：", text) if _current == "zh" else text


argparse._ = _argparse_words  # type: ignore[attr-defined]  # read by argparse each time it words a line
argparse.ngettext = _argparse_plural  # type: ignore[attr-defined]
argparse.HelpFormatter.format_help = _help_in_chinese  # type: ignore[method-assign,assignment]
argparse.HelpFormatter._split_lines = _wrap_by_columns  # type: ignore[method-assign,assignment]
argparse.HelpFormatter._fill_text = _fill_by_columns  # type: ignore[method-assign,assignment]
