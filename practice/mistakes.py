"""The known mistakes of a problem, each written once, in practice/NNN_slug/mistakes.toml.

A known mistake is a wrong answer a learner is likely to write. It is written once, as that wrong answer: the
reference solution with a small change, written as a diff, or a whole learner file in the problem's wrong/. Two
things read that one source. The judge runs the wrong answer on a failing case, and when the learner's result is
that mistake's result it shows the mistake's hint (English and Chinese, in the same entry). tests/test_practice.py
grades the same wrong answer and checks that the judge rejects it with that hint. So every mistake the judge can
name is one the tests have seen it reject.

An entry, `[key]`:
    en, zh   the hint, shown when the learner's result is this mistake's result ("looks like ...")
    change   the diff against solution.py: a line "-..." leaves, "+..." arrives, " ..." (or an empty line) stays;
             a line "..." starts the next piece of the change. Each piece's old lines occur once in solution.py.
    file     instead of `change`: a whole learner file, "wrong/name.py"
    like     instead of en/zh: the key of another entry; this is a second way to write that mistake
    error    a regular expression: the hint is for a Runtime Error whose traceback matches it
    expect   what the tests expect of the judge, when not the default (the key's hint, shown on a Wrong Answer
             that at least two cases reject; on a Runtime Error for an `error` entry): "VERDICT mark ...", marks
             being hint keys, "cases>=N", "!key" (no rejecting case shows that hint) and "mutated"
`diagnose` is the judge's side: which known mistakes a learner's wrong result looks like. This module imports torch:
problems.py reads it only when a problem's mistakes are needed, so `list` and `show` start without it.
"""
import copy
import math
import re
import sys
import types
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (pyproject.toml installs it there)
    import tomli as tomllib

import torch

from practice.grading import compare, grade
from practice.runner import sanitize

FIELDS = {"en", "zh", "change", "file", "like", "error", "expect"}


@dataclass
class Mistake:
    """One known wrong answer of a problem (one entry of its mistakes.toml)."""
    key: str
    folder: Path  # the problem's folder
    entry: dict
    hint: dict | None  # {"en": ..., "zh": ...}; a `like` entry has the other entry's

    @property
    def shown(self):
        """The key of the hint this mistake shows (a `like` entry shows the other entry's)."""
        return self.entry.get("like", self.key)

    @property
    def error(self):
        return self.entry.get("error")

    @property
    def where(self):
        return f"{self.folder.name}/mistakes.toml [{self.key}]"

    def source(self):
        """The wrong answer's text: the solution with the change made, or the whole learner file."""
        if "file" in self.entry:
            return (self.folder / self.entry["file"]).read_text(encoding="utf-8")
        solution = (self.folder / "solution.py").read_text(encoding="utf-8")
        return apply_change(solution, self.entry["change"], self.where)

    @cached_property
    def module(self):
        """The wrong answer, run as a module in this process (it is the course's own code, like solution.py)."""
        module = types.ModuleType(f"practice_mistake_{self.folder.name}_{self.key}")
        exec(compile(self.source(), f"<{self.where}>", "exec"), module.__dict__)
        return module

    def result(self, fn, values):
        """What this mistake returns for fn(*values); AttributeError when its answer has no such function."""
        return getattr(self.module, fn)(*values)

    def expectation(self):
        """(verdict, marks) that tests/test_practice.py expects when the judge grades this wrong answer."""
        if "expect" in self.entry:
            verdict, *marks = self.entry["expect"].split()
            return verdict, marks
        if self.error:
            return "RE", [self.shown]
        return "WA", [self.shown, "cases>=2"]


def apply_change(text, change, where):
    """`text` with the diff `change` made (see the module's docstring); ValueError naming `where` if a piece's old
    lines are not found exactly once, at the start of a line."""
    for piece in re.split(r"^\.\.\.\n", change.strip("\n") + "\n", flags=re.M):
        old, new = [], []
        for line in piece.splitlines():
            mark, body = line[:1], line[1:]
            if mark not in ("", " ", "-", "+"):
                raise ValueError(f"{where}: each line of a change starts with ' ', '-' or '+': {line!r}")
            if mark != "+":
                old.append(body)
            if mark != "-":
                new.append(body)
        old_text, new_text = "".join(s + "\n" for s in old), "".join(s + "\n" for s in new)
        found = ("\n" + text).count("\n" + old_text)
        if found != 1 or not old_text.strip():
            raise ValueError(f"{where}: the lines to change occur {found} times in solution.py, not once:\n{old_text}")
        at = ("\n" + text).index("\n" + old_text)
        text = text[:at] + new_text + text[at + len(old_text):]
    return text


def load(folder):
    """The known mistakes in folder/mistakes.toml, in their order. ValueError, naming the entry, for an entry that
    breaks the rules above."""
    path = Path(folder) / "mistakes.toml"
    if not path.is_file():
        return []
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    found = []
    for key, entry in table.items():
        where = f"{Path(folder).name}/mistakes.toml [{key}]"
        unknown = set(entry) - FIELDS
        if unknown or ("change" in entry) == ("file" in entry):
            raise ValueError(f"{where}: needs one of `change` or `file`, and only the fields {sorted(FIELDS)}")
        if "like" in entry:
            if entry["like"] not in table or "en" in entry:
                raise ValueError(f"{where}: `like` names another entry, and takes its hint")
            hint = {lang: table[entry["like"]][lang] for lang in ("en", "zh")}
        elif "en" in entry or "zh" in entry:
            if not (entry.get("en") and entry.get("zh")):
                raise ValueError(f"{where}: a hint is written in both languages, en and zh")
            hint = {"en": entry["en"], "zh": entry["zh"]}
        else:
            hint = None
            if "expect" not in entry:
                raise ValueError(f"{where}: an entry without a hint says what the judge must answer (`expect`)")
        found.append(Mistake(key, Path(folder), entry, hint))
    return found


# ---------------------------------------------------------------- the judge's side: which mistake a result looks like

MARGIN = 4.0  # a hint is shown only when the result is this many times nearer the mistake's result than the right one


def diagnose(problem, case, got):
    """The keys of the known mistakes that explain `got` on this failing case (possibly none).

    Each known mistake (practice/mistakes.py) runs on the case; its result must differ from the right answer
    there, and the learner's result must match it, within the case's own tolerance if any mistake does, else
    within a looser one (a learner's version of a mistake may round differently from ours), and be clearly
    nearer it than the right answer and than nothing (the same structure with every float 0): MARGIN times
    nearer, in the largest difference of any element. A mistake's result so small that an all-zero answer lies
    within its tolerance is then named only for a result that is really that mistake's, never for zeros."""
    strict, loose = [], []
    right = distance(got, case.expected)
    for m in problem.mistakes:
        if m.error or m.hint is None or m.shown in strict + loose:
            continue
        try:
            wrong = sanitize(m.result(case.fn, copy.deepcopy(case.values())))  # as the learner's comes back
            blank = nothing(wrong)
            far = math.inf if blank is None else distance(blank, wrong)  # how near an all-zero answer is to it
            if grade(case, wrong) is None or not distance(got, wrong) * MARGIN < min(right, far):
                continue  # indistinguishable from the right answer here, or not clearly nearer the mistake than
                # the right answer and an all-zero answer are
            if compare(got, wrong, case.tol) is None:
                strict.append(m.shown)
            elif compare(got, wrong, case.tol.loose()) is None:
                loose.append(m.shown)
        except Exception:  # a mistake that cannot run on this case, or lacks this function, says nothing
            continue
    found = strict or loose
    cast = _cast_like(got, case.expected)
    if not found and cast is not None and compare(cast, case.expected, case.tol.loose()) is None:
        found.append("wrong_dtype")  # the right numbers in the wrong dtype: a missing cast back
    return found


def distance(a, b):
    """The largest |a - b| over the elements of two results of the same structure (NaN where both are NaN, and
    equal infinities, count as equal); inf when they differ in structure, shape, dtype or any exact value."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return math.inf
        if not a.dtype.is_floating_point:
            return 0.0 if torch.equal(a, b) else math.inf
        a64, b64 = a.detach().double(), b.detach().double()
        same = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
        diff = torch.where(same, 0.0, (a64 - b64).abs().nan_to_num(nan=math.inf))
        return float(diff.max()) if diff.numel() else 0.0
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return math.inf
        return max((distance(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return math.inf
        return max((distance(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return math.inf
    try:
        return 0.0 if a == b and type(a) is type(b) else math.inf
    except Exception:  # a learner's object whose == raises
        return math.inf


def nothing(result):
    """`result` with every float 0 and everything else kept (float tensors become zeros of their shape and dtype,
    Python floats 0.0, inside tuples, lists and dicts): the answer that says nothing, in the shape of a result. Only
    floats, because only they are matched within a tolerance that zeros can fall inside; integers match exactly.
    None when the result holds no float."""
    found = []

    def zero(x):
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            found.append(True)
            return torch.zeros_like(x)
        if isinstance(x, dict):
            return {k: zero(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(zero(v) for v in x)
        if isinstance(x, float):
            found.append(True)
            return 0.0
        return x
    blank = zero(result)
    return blank if found else None


def _cast_like(got, exp):
    """`got` with each float tensor cast to the dtype of the expected one in its place (in tuples, lists and dicts
    too), if some dtype differs and nothing else does in structure; else None."""
    changed = []

    def cast(g, e):
        if isinstance(e, torch.Tensor):
            if isinstance(g, torch.Tensor) and g.dtype != e.dtype and g.shape == e.shape \
                    and g.dtype.is_floating_point and e.dtype.is_floating_point:
                changed.append(True)
                return g.to(e.dtype)
            return g
        if isinstance(e, (list, tuple)) and isinstance(g, (list, tuple)) and len(g) == len(e):
            return type(g)(cast(x, y) for x, y in zip(g, e))
        if isinstance(e, dict) and isinstance(g, dict) and g.keys() == e.keys():
            return {k: cast(g[k], e[k]) for k in e}
        return g
    out = cast(got, exp)
    return out if changed else None
