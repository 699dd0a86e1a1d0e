"""Grading: test cases, tolerances, and the comparison of a result with the expected one. Used by the judge, never
by learner code (which known mistake a wrong result looks like: practice/mistakes.py).

Each problem's cases.py builds its cases (with expected values from an oracle that is always installed: the `qwen`
package, torch, hand math) with the classes below. tests/test_practice.py proves
those oracles equal transformers.
"""
import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from qwen.lang import tr


@contextlib.contextmanager
def float32_default():
    """torch's default dtype set to fp32 while the oracle builds cases and runs known mistakes: a notebook's
    torch.set_default_dtype(torch.float64) must not change the expected values."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


LOW_PRECISION = {torch.bfloat16: 7, torch.float16: 10}  # dtype -> explicit mantissa bits
SMALLEST = {torch.bfloat16: 2.0 ** -133, torch.float16: 2.0 ** -24}  # smallest subnormal: the grid step at 0


@dataclass(frozen=True)
class Tol:
    """How close a float tensor must be to the expected one, element by element.

    bf16/fp16: |got - expected| <= steps x (the dtype's grid spacing at |expected|).
    fp32/fp64: |got - expected| <= atol x max(1, max|expected|) + rtol x |expected|.
    Integer and bool tensors, and everything that is not a tensor, must match exactly.
    """
    steps: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0

    def allowed(self, exp, dtype):
        """The allowed |Δ| per element (float64), for expected values `exp` (float64) of dtype `dtype`."""
        if dtype in LOW_PRECISION:
            _, e = torch.frexp(exp)  # |exp| = m·2^e with m in [0.5, 1): the spacing there is 2^(e-1-mantissa)
            step = torch.ldexp(torch.ones_like(exp), e - 1 - LOW_PRECISION[dtype])
            step = torch.where(exp == 0, torch.full_like(exp, SMALLEST[dtype]), step).clamp_min(SMALLEST[dtype])
            return self.steps * step
        scale = max(1.0, float(exp.abs().max())) if exp.numel() and torch.isfinite(exp).all() else 1.0
        return self.atol * scale + self.rtol * exp.abs()

    def loose(self):
        """A wider tolerance for recognising a known mistake (a learner's version of it may round differently)."""
        return Tol(max(4.0, 4 * self.steps), max(1e-4, 10 * self.rtol), max(1e-5, 10 * self.atol))

    def describe(self, dtype):
        """The rule in words, y being the expected value (the statements use the same letters)."""
        if dtype is None or not dtype.is_floating_point or (self.steps, self.rtol, self.atol) == (0, 0, 0):
            return tr("exact", "完全相等")
        if dtype in LOW_PRECISION:
            name, steps = "bf16" if dtype == torch.bfloat16 else "fp16", f"{self.steps:g}"
            if self.steps == 1:
                return tr(f"|Δ| <= 1 {name} grid step at y", f"|Δ| <= 1 个 {name} 步长（取 y 处的步长）")
            return tr(f"|Δ| <= {steps} {name} grid steps at y", f"|Δ| <= {steps} 个 {name} 步长（取 y 处的步长）")
        return f"|Δ| <= {self.atol:g}·max(1, max|y|) + {self.rtol:g}·|y|"


EXACT = Tol()


@dataclass
class Case:
    """One call of one learner function. `args` is a list of (parameter name, value); calls are positional."""
    label: str  # "example 1", "hidden 4"
    fn: str
    args: list
    expected: object
    tol: Tol = EXACT
    seed: int | None = None
    note: str = ""
    check: object = None  # optional callable(got, case) -> Mismatch | None, in place of compare (a statistic of a
    # result drawn at random, e.g. 220's total-variation bound); the known mistakes still run as on any case

    @property
    def visible(self):
        return self.label.startswith("example")

    def values(self):
        return [v for _, v in self.args]

    def call_text(self):
        return f"{self.fn}({', '.join(f'{k}={describe(v, path=True)}' for k, v in self.args)})"


@dataclass
class Mismatch:
    where: str  # "output", "output['norm.weight']", "output[1]"
    kind: str  # type | len | keys | shape | dtype | value (tensor elements) | scalar
    info: dict = field(default_factory=dict)


DTYPE_NAMES = {torch.float32: "fp32", torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16",
               torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
               torch.uint8: "uint8", torch.bool: "bool"}


def dtype_name(dt):
    return DTYPE_NAMES.get(dt, str(dt).replace("torch.", ""))


def describe(v, path=False):
    """A short description of a value: 'bf16[4, 64]', 'dict (5 keys)', '1e-06', 'bf16' (a dtype); a string
    cut to 60 characters, or with path=True (the case's arguments, never a result) one with a "/" shown by its
    file name: "'model.safetensors'"."""
    if isinstance(v, torch.Tensor):
        return f"{dtype_name(v.dtype)}{list(v.shape)}"
    if isinstance(v, torch.dtype):
        return dtype_name(v)
    if isinstance(v, dict) and "__unsupported__" in v:
        what = v["__unsupported__"]
        return tr(f"a {what}", f"{what}")
    if isinstance(v, dict):
        n = len(v)
        return tr("dict (1 key)", "dict（1 个键）") if n == 1 else tr(f"dict ({n} keys)", f"dict（{n} 个键）")
    if isinstance(v, (list, tuple)):
        inner = ", ".join(describe(x, path) for x in v[:4]) + (", …" if len(v) > 4 else "")
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    if isinstance(v, str):
        s = repr(Path(v).name) if path and ("/" in v or "\\" in v) else repr(v[:60])
        return s if len(s) <= 60 else s[:57] + "…'"
    if isinstance(v, float):
        return f"{v:g}"
    if v is None or isinstance(v, (bool, int)):
        return repr(v)
    return type(v).__name__


def compare(got, exp, tol=EXACT, where="output"):
    """None if `got` matches `exp`, else the first Mismatch. Tuples and lists are interchangeable."""
    if isinstance(exp, torch.Tensor):
        return _compare_tensor(got, exp, tol, where)
    if isinstance(exp, dict) and "__unsupported__" in exp:  # a known mistake's result, as plain data: the same kind
        return None if got == exp else Mismatch(where, "type", {"expected": describe(exp), "got": describe(got)})
    if isinstance(exp, dict):
        if not isinstance(got, dict) or "__unsupported__" in got:
            return Mismatch(where, "type", {"expected": "dict", "got": describe(got)})
        missing, extra = [k for k in exp if k not in got], [k for k in got if k not in exp]
        if missing or extra:
            return Mismatch(where, "keys", {"missing": missing, "extra": extra})
        for k in exp:
            m = compare(got[k], exp[k], tol, f"{where}[{k!r}]")
            if m:
                return m
        return None
    if isinstance(exp, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return Mismatch(where, "type", {"expected": "tuple" if isinstance(exp, tuple) else "list",
                                            "got": describe(got)})
        if len(got) != len(exp):
            info = {"expected": len(exp), "got": len(got)}
            k = next((i for i, (g, e) in enumerate(zip(got, exp)) if compare(g, e, tol) is not None),
                     min(len(got), len(exp)))
            if all(_plain(x) for x in exp[max(0, k - 8):k + 8]) and all(_plain(x) for x in got[max(0, k - 8):k + 8]):
                info.update(first=k, exp_at=_window_list(exp, k), got_at=_window_list(got, k))
            return Mismatch(where, "len", info)
        for i, (g, e) in enumerate(zip(got, exp)):
            m = compare(g, e, tol, f"{where}[{i}]")
            if m:
                return m
        return None
    if isinstance(exp, str) and isinstance(got, str):
        if got != exp:
            k = _first_difference(got, exp)
            return Mismatch(where, "text", {"first": k, "expected": _window(exp, k), "got": _window(got, k),
                                            "n_exp": len(exp), "n_got": len(got)})
        return None
    if isinstance(exp, bool) or exp is None or isinstance(exp, str):
        if type(got) is not type(exp) or got != exp:
            return Mismatch(where, "scalar", {"expected": _short(exp), "got": _short(got)})
        return None
    if isinstance(exp, int):
        ok = (isinstance(got, int) and not isinstance(got, bool)) or (isinstance(got, float) and got.is_integer())
        if not ok or int(got) != exp:
            return Mismatch(where, "scalar", {"expected": _short(exp), "got": _short(got)})
        return None
    if isinstance(exp, float):
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isclose(got, exp, rel_tol=1e-9):
            return Mismatch(where, "scalar", {"expected": _short(exp), "got": _short(got)})
        return None
    raise TypeError(f"cannot compare against an expected {type(exp).__name__}")  # a bug in cases.py


def _plain(v):
    return v is None or isinstance(v, (bool, int, float, str))


SHOWN = 200  # characters of a wrong string, or of a list, shown around its first difference


def _short(v):
    """repr of a plain value, cut to SHOWN characters; a description of anything else."""
    if not _plain(v):
        return describe(v)
    text = repr(v[:SHOWN + 1] if isinstance(v, str) else v)
    return text if len(text) <= SHOWN else text[:SHOWN] + " …"


def _first_difference(a, b):
    """The first index where two strings differ (the shorter one's length if one starts the other), by bisection
    on slices, so a string of megabytes costs milliseconds."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid)
    return lo


def _window(text, k):
    """About SHOWN characters of `text` around index k, as a repr, with … where it was cut."""
    start = max(0, min(k - SHOWN // 4, len(text) - SHOWN))
    piece = repr(text[start:start + SHOWN])
    return ("… " if start > 0 else "") + piece + (" …" if start + SHOWN < len(text) else "")


def _window_list(items, k):
    """The items of a list around index k, as text, with … where it was cut (at most about SHOWN characters)."""
    start = max(0, k - 4)
    shown = ", ".join(_short(x) for x in items[start:k + 8])[:SHOWN]
    return ("[… " if start > 0 else "[") + shown + (" …]" if k + 8 < len(items) else "]")


def _compare_tensor(got, exp, tol, where):
    if not isinstance(got, torch.Tensor):
        return Mismatch(where, "type", {"expected": "torch.Tensor", "got": describe(got)})
    if tuple(got.shape) != tuple(exp.shape):
        return Mismatch(where, "shape", {"expected": list(exp.shape), "got": list(got.shape)})
    if got.dtype != exp.dtype:
        return Mismatch(where, "dtype", {"expected": dtype_name(exp.dtype), "got": dtype_name(got.dtype)})
    if exp.numel() == 0:
        return None
    if not exp.dtype.is_floating_point:
        bad = got != exp
        g64, e64 = got.double(), exp.double()
    else:
        g64, e64 = got.double(), exp.double()
        with torch.no_grad():
            diff = (g64 - e64).abs()
            same = (g64 == e64) | (torch.isnan(g64) & torch.isnan(e64))  # equal infinities count as equal
            bad = ~same & ~(diff <= tol.allowed(e64, exp.dtype))  # NaN differences are never <= anything
    if not bool(bad.any()):
        return None
    diff = (g64 - e64).abs()
    first = tuple(int(i) for i in torch.nonzero(bad)[0]) if bad.dim() else ()
    finite = diff[~torch.isnan(diff)]
    worst = float(finite.max()) if finite.numel() else float("nan")
    return Mismatch(where, "value", {
        "n_bad": int(bad.sum()), "n": exp.numel(), "first": list(first),
        "exp_at": float(e64[first]) if exp.dtype.is_floating_point else int(exp[first]),
        "got_at": float(g64[first]) if exp.dtype.is_floating_point else int(got[first]),
        "max_abs": float("nan") if bool(torch.isnan(diff[bad]).any()) else worst,
        "nan": int(torch.isnan(g64).sum()), "tol": tol.describe(exp.dtype)})


def grade(case, got):
    """None if `got` passes the case, else the first Mismatch: the case's own check if it has one, else compare."""
    return case.check(got, case) if case.check is not None else compare(got, case.expected, case.tol)
