"""The problems, one folder each (practice/NNN_slug/), and whether the files that decide their verdicts are the
course's own.

A problem's meta.json, statements, starter, solution, cases.py, mistakes.toml (the known mistakes and their hints)
and, where the plug-in can put it in the whole model, swaps.py live in its folder; `problems()` finds them.
`verified` refuses to grade a problem whose pinned files (pinned.py) are not the committed ones.
"""
import importlib.util
import json
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from practice import messages as say
from practice.imports import package_root
from practice.limits import MEMORY_LIMIT, TIME_LIMIT, total_limit
from practice.messages import speaking
from practice.pinned import stale
from practice.report import shown_path

HERE = Path(__file__).resolve().parent  # practice/


# ---------------------------------------------------------------- problems: one folder each, practice/NNN_slug/

@dataclass
class Problem:
    number: int
    slug: str
    folder: Path
    meta: dict  # meta.json: title {en, zh}, chapter, level {en, zh}, functions, time_limit
    _module: object = None

    @property
    def functions(self):
        return list(self.meta["functions"])

    @property
    def time_limit(self):
        return float(self.meta.get("time_limit", TIME_LIMIT))

    def total_limit(self, n, time_limit=None):
        """Seconds that all n cases may take together: meta.json "total_time_limit", else limits.total_limit."""
        if time_limit is None and "total_time_limit" in self.meta:
            return float(self.meta["total_time_limit"])
        return total_limit(n, float(time_limit or self.time_limit))

    @property
    def memory_limit(self):
        """MiB of memory the learner's process may use (torch itself needs about 250)."""
        return int(self.meta.get("memory_limit", MEMORY_LIMIT))

    @property
    def answer_modules(self):
        """The `qwen` modules that hold this exercise's answer (meta.json "answer_modules"): the learner's file may
        not import them."""
        return list(self.meta.get("answer_modules", []))

    def answers(self, path=None):
        """What the learner's file at `path` may not use (guard.Watch): the answer modules, and every problem's
        solution.py and cases.py but the graded file itself (the course's own tests grade solution.py); named
        relative to the folder that holds practice/."""
        graded = Path(path).resolve() if path else None
        return {"modules": self.answer_modules, "root": str(package_root(self.folder.parent.parent)),
                "files": [f for f in answer_files(self.folder.parent) if Path(f).resolve() != graded]}

    @property
    def work_name(self):
        return f"{self.number}_{self.slug}.py"

    def title(self, lang):
        return self.meta["title"].get(lang) or self.meta["title"]["en"]

    def statement(self, lang):
        return (self.folder / ("README.zh.md" if lang == "zh" else "README.md")).read_text(encoding="utf-8")

    @property
    def module(self):
        """cases.py, imported on first use (it imports torch and the oracle)."""
        if self._module is None:
            self._module = self.load("cases")
        return self._module

    def load(self, name):
        """The folder's `name`.py (cases, swaps) imported by path: a problem folder is no package."""
        spec = importlib.util.spec_from_file_location(f"practice_{name}_{self.number}", self.folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def cases(self, tmp):
        """The cases, built with fp32 as torch's default dtype whatever the caller set (a notebook may set fp64)."""
        from practice.grading import float32_default  # grading imports torch: `list` and `show` start without it

        with float32_default():
            return self.module.make_cases(Path(tmp))

    @cached_property
    def mistakes(self):
        """The known mistakes (mistakes.toml, read by practice/mistakes.py), with their hints."""
        from practice.mistakes import load  # it imports torch: `list` and `show` start without it

        return load(self.folder)

    @property
    def error_hints(self):
        """[(regex, key, {"en", "zh"})]: a Runtime Error whose traceback matches the regex gets the hint."""
        return [(m.error, m.shown, m.hint) for m in self.mistakes if m.error]

    def hint_text(self, key, lang):
        for m in self.mistakes:
            if m.key == key and m.hint:
                return m.hint.get(lang) or m.hint["en"]
        return None


def problems(root=HERE):
    found = {}
    for meta in sorted(Path(root).glob("[0-9][0-9][0-9]_*/meta.json")):
        number, slug = meta.parent.name.split("_", 1)
        found[int(number)] = Problem(int(number), slug, meta.parent, json.loads(meta.read_text(encoding="utf-8")))
    return found


def find_problem(n, lang=None):
    """Problem `n` (a number, or a file name that starts with one); None, with one line in `lang` (None: the language
    already chosen), for a number that is no problem."""
    table = problems()
    try:
        number = int(str(n).split("_")[0])
    except ValueError:
        number = None
    if number not in table:
        with speaking(lang):
            print(say.unknown(n, table), file=sys.stderr)
        return None
    return table[number]


# ---------------------------------------------------------------- the files that decide a verdict, pinned

def verified(prob, lang=None):
    """True if the files that decide the problem's verdict (pinned.py: its reference files, given files and the
    `qwen` modules that compute its expected values) are the course's own; else one line says which are not and
    how to restore them (an accidental edit of cases.py or qwen/rope.py must not change what the judge accepts)."""
    bad, how = stale(prob.folder)
    if not bad:
        return True
    root = prob.folder.parent.parent
    with speaking(lang):
        print(say.tampered(prob.number, bad, " ".join(shown_path(root / k) for k in bad)) if how == "git"
              else say.tampered_build(prob.number, bad), file=sys.stderr)
    return False


def answer_files(practice):
    """Every problem's solution.py and cases.py: each is an answer to some exercise (guard.py)."""
    return sorted(str(f) for f in Path(practice).glob("[0-9][0-9][0-9]_*/*.py") if f.name in ("solution.py",
                                                                                                "cases.py"))
