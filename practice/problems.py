"""The problems, one folder each (practice/NNN_slug/), and the checksums of what decides their verdicts.

A problem's meta.json, statements, starter, solution, cases.py (its cases), mistakes.toml (its known mistakes
and their hints, read by practice/mistakes.py) and wrong/ files live in its folder; `problems()` finds them.
`verified` refuses to grade when a reference file, a given file or a `qwen` module its cases import differs from
practice/checksums.json (`rehash` rewrites it).
"""
import importlib.util
import json
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from practice.limits import MEMORY_LIMIT, TIME_LIMIT, total_limit
from practice.messages import MSG, cmd
from practice.oracle import answer_files, import_closure, package_root, sha256
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
        """What the learner's file at `path` may not use (oracle.Watch): the answer modules, and every problem's
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
            spec = importlib.util.spec_from_file_location(f"practice_cases_{self.number}", self.folder / "cases.py")
            self._module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(self._module)
        return self._module

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


def find_problem(n, lang):
    table = problems()
    try:
        number = int(str(n).split("_")[0])
    except ValueError:
        number = None
    if number not in table:
        print(MSG[lang]["unknown"].format(n=n, all=", ".join(map(str, table))), file=sys.stderr)
        return None
    return table[number]


# ---------------------------------------------------------------- the reference files' checksums

def manifest_path(root=HERE):
    return Path(root) / "checksums.json"


def reference_files(folder):
    """The files of a problem folder that decide a verdict: all but the statements and the starter, with the
    whole-file known mistakes in wrong/ (the judge runs them to recognise a mistake)."""
    folder = Path(folder)
    files = [f for f in folder.iterdir() if f.is_file()] + sorted((folder / "wrong").glob("*.py"))
    return sorted(f for f in files if not f.name.startswith(".") and f.suffix != ".pyc"
                  and f.name not in ("README.md", "README.zh.md", "starter.py"))


def given_files(prob):
    """The files of practice/ outside the problem's folder that its cases and the learner's file import (meta.json
    "given", e.g. 213's assembly.py), as paths relative to practice/: they decide a verdict too."""
    return list(prob.meta.get("given", []))


def oracle_files(prob):
    """{"qwen/rope.py": path}: the files of the `qwen` package that the problem's cases.py and given files import,
    directly or through each other (practice/oracle.py): they compute the expected values, so they decide a verdict
    as cases.py does."""
    root = prob.folder.parent
    return import_closure([prob.folder / "cases.py"] + [root / name for name in given_files(prob)],
                          package_root(root.parent))


def digests(prob):
    """({"NNN_slug/<file>" or "given.py": sha256}, {"qwen/<module>.py": sha256}): the problem's reference files,
    the given files it imports and the `qwen` files its cases import. A given file that is missing is left out (and
    so differs from the manifest)."""
    root = prob.folder.parent
    files = {f.relative_to(root).as_posix(): sha256(f) for f in reference_files(prob.folder)}
    files.update({name: sha256(root / name) for name in given_files(prob) if (root / name).is_file()})
    return files, {k: sha256(f) for k, f in oracle_files(prob).items()}


def checksums(root=HERE):
    """{"files": {...}, "oracle": {...}}: the digests of every problem. Line endings are hashed as "\n", so a
    checkout that writes "\r\n" (git on Windows) matches."""
    files, oracle = {}, {}
    for prob in problems(root).values():
        mine, theirs = digests(prob)
        files.update(mine)
        oracle.update(theirs)
    return {"about": "sha256 of each problem's reference files and of the qwen files their cases import; "
                     "regenerate: python practice/judge.py rehash",
            "files": files, "oracle": dict(sorted(oracle.items()))}


def verified(prob, lang="en"):
    """True if the problem's reference files, given files and the `qwen` files its cases import are the committed
    ones; else say which differ and how to restore them (an accidental edit of cases.py or qwen/rope.py must not
    change what the judge accepts)."""
    try:
        manifest = json.loads(manifest_path(prob.folder.parent).read_text(encoding="utf-8"))
        known, known_oracle = manifest["files"], manifest.get("oracle", {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        known, known_oracle = {}, {}

    root = prob.folder.parent
    files, oracle = digests(prob)
    mine = {f"practice/{k}": v for k, v in files.items()} | oracle
    theirs = {f"practice/{k}": v for k, v in known.items()
              if k.startswith(prob.folder.name + "/") or k in given_files(prob)}
    theirs.update({k: known_oracle.get(k) for k in oracle})
    bad = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    if not bad:
        return True
    restore = dict.fromkeys(shown_path(root.parent / "/".join(k.split("/")[:2])) if k.startswith("practice/")
                            else shown_path(root.parent / k) for k in bad)  # the problem folder, the given file
    print(MSG[lang]["tampered"].format(files=", ".join(bad), folder=" ".join(restore), cmd=cmd("rehash")),
          file=sys.stderr)
    return False
