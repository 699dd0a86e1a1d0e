"""The language the course speaks to you, English or Chinese, and the one way a text carries both.

Every text a learner reads is written in both languages side by side in the source, so the two can never drift
apart unnoticed: `tr("the English", "中文")` in code (a printed line, a figure's title, the chat's help), and, in a
chapter's prose, a markdown cell followed by its Chinese cell (notebooks/sync.py writes one notebook per language).
The code itself is written once.

Which language: `--lang en|zh` on the command line (chapters, main.py, the judge, the chat), else the environment
variable QWEN_LANG (notebooks, scripts), else the locale (LC_ALL, LC_MESSAGES, LANG, LANGUAGE: zh_* -> Chinese),
else English.
"""
import locale
import os
import re
import sys

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


WIDE = re.compile("[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # a CJK character or full-width punctuation
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
