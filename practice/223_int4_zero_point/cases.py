"""Problem 223: cases and oracle.

Oracle: qwen/quant.py's quantize_int4_zero and dequantize_int4_zero (tests/test_quant.py proves them: codes in
0..15, the round trip within s/2, a group's minimum and maximum stored exactly; tests/test_practice.py checks them
again on a hand-computed example and against a float64 computation on every case here).

At a half both neighbours are equally near, and the forms of the same formula (x / s, x · (1/s), (M − m) · (1/15),
an fp64 quotient, 15 (w − m)/(M − m), llama.cpp Q4_1's ⌊x · (1/s) + ½⌋) round to either side there: the codes are
graded by the statement's rule, the nearest integer to (w − m)/s, either neighbour where the quotient lies within
HALF of a half (codes_or_ties). bf16 weights land on exact halves, and one case is built of them; fp32 weights put
no quotient within 1e-6 of a half, so there every form gives the oracle's codes. tests/test_practice.py checks both.
"""
import torch

from practice.grading import Case, Tol, compare
from qwen.lang import tr
from qwen.quant import dequantize_int4_zero, quantize_int4_zero

# The codes exact (either neighbour at a half: HALF); s and m within 1e-6·|y| and nothing more (s = (M − m) / 15 is
# one fp32 division, m is exact, and a constant group's s is 0 itself); w ≈ q · s + m within
# 1e-6·|y| + 1e-7·max(1, max|y|) (one product and one sum in fp32, in any order).
SCALES = Tol(rtol=1e-6)
TOL = Tol(rtol=1e-6, atol=1e-7)
HALF = 1e-5  # a quotient this near k + ½ may take either code: every exact form lands within 3e-6 of the others


def codes_or_ties(got, case):
    """The quantize cases' check: compare with the expected (q, s, m), a code also right where the quotient
    (w − m)/s, in float64, lies within HALF of a half and the code is the other neighbour."""
    (w, g), (q, s, m) = case.values(), case.expected
    if isinstance(got, (tuple, list)) and len(got) == 3 and isinstance(got[0], torch.Tensor) \
            and got[0].shape == q.shape and got[0].dtype == q.dtype:
        x = w.double().reshape(w.shape[0], -1, g)
        t = ((x - m.double()[..., None]) / torch.where(s == 0, 1.0, s.double())[..., None]).reshape(q.shape)
        other = torch.where(q.double() > t, t.floor(), t.ceil())  # the neighbour the oracle did not take
        tie = ((t - t.floor() - 0.5).abs() <= HALF) & (got[0].double() == other)
        return compare(got, (torch.where(tie, got[0], q), s, m), case.tol)
    return compare(got, case.expected, case.tol)

HAND = torch.tensor([[0.0, 0.2, 0.4, 3.0, -1.0, 0.0, 0.2, 2.0]])  # g = 4: [0, 3] → s = 0.2; [−1, 2] → s = 0.2


def weights(gen, out, n, scale=0.02, dtype=torch.float32):
    return (torch.randn(out, n, generator=gen) * scale).to(dtype)


def leaning(gen, out, n):
    """Every weight positive: a symmetric code would waste its negative half."""
    return torch.randn(out, n, generator=gen).abs() * 0.02 + 0.01


def constant_groups(gen):
    """Groups of 16 where some are one value repeated (s = 0): zeros, and 0.5."""
    w = weights(gen, 4, 64)
    w[0, :16] = 0.0
    w[1, 16:32] = 0.5
    w[3, 48:] = -0.125
    return w


def outliers(gen, out, n):
    """One weight per row 50× the others: its group's step grows, the row's other groups keep theirs."""
    w = weights(gen, out, n)
    w[torch.arange(out), torch.randint(0, n, (out,), generator=gen)] = 1.0
    return w


def codes(gen, out, n, g):
    """Any codes 0..15 with positive scales and minima of either sign."""
    q = torch.randint(0, 16, (out, n), generator=gen, dtype=torch.uint8)
    s = torch.rand(out, n // g, generator=gen) * 0.01 + 1e-4
    m = torch.randn(out, n // g, generator=gen) * 0.05
    return q, s, m


def halves():
    """Groups of 16 whose quotients land on halves. With M − m = 15 (s = 1) and 7.5 (s = 0.5), w − m = k + ½ and
    (k + ½)/2 exactly: every form gives k + ½, and only the rule at a half decides. With M − m = 1 and 1.5
    (s = fl(1/15), fl(0.1)) the weights are fp32 roundings of the halves: 15 · 0.5 = 7.5 by hand, while the fp32
    quotient may be 7.5 or 7.4999995, and x · (1/s) another."""
    groups = [[0.0, 15.0] + [k + 0.5 for k in range(14)],
              [-1.0, 14.0] + [k - 0.5 for k in range(14)],
              [0.0, 7.5] + [(k + 0.5) / 2 for k in range(14)],
              [-3.0, 4.5] + [(k + 0.5) / 2 - 3 for k in range(14)],
              [0.0, 1.0, 0.5] + [(k + 0.5) / 15 for k in range(13)],
              [2.0, 3.0, 2.5] + [2 + (k + 0.5) / 15 for k in range(13)],
              [0.0, 1.5] + [0.1 * k + 0.05 for k in range(14)],
              [-0.75, 0.75] + [0.1 * k - 0.7 for k in range(14)]]
    return torch.tensor(groups).reshape(4, 32)


def from_weights(gen, out, n, g):
    return quantize_int4_zero(weights(gen, out, n), g)


# (function, kind, make(gen) -> the arguments, note)
TABLE = [
    ("quantize_int4_zero", "example", lambda gen: (HAND, 4),
     tr("g = 4: the groups [0, 0.2, 0.4, 3] and [−1, 0, 0.2, 2], each with s = 0.2",
        "g = 4：两组 [0, 0.2, 0.4, 3] 和 [−1, 0, 0.2, 2]，每组 s = 0.2")),
    ("quantize_int4_zero", "example", lambda gen: (weights(gen, 4, 64), 32), tr("4 rows of 64 weights, N(0, 0.02)",
                                                                                "4 行，每行 64 个权重，N(0, 0.02)")),
    ("dequantize_int4_zero", "example", lambda gen: quantize_int4_zero(HAND, 4), tr("the codes of example 1",
                                                                                    "样例 1 的码")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 64, 256), 32), tr("64 × 256 weights, g = 32",
                                                                                 "64 × 256 的权重，g = 32")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 32, 256), 64), "g = 64"),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 16, 512), 128), "g = 128"),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 48, 96), 16), tr("48 × 96, g = 16", "48 × 96，g = 16")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 8, 64), 64), tr("g = the whole row: one group a row",
                                                                               "g = 整行：每行一组")),
    ("quantize_int4_zero", "hidden", lambda gen: (leaning(gen, 32, 128), 32), tr("every weight positive",
                                                                                 "权重全为正数")),
    ("quantize_int4_zero", "hidden", lambda gen: (constant_groups(gen), 16),
     tr("constant groups (s = 0): every code 0, w = m exactly", "常数组（s = 0）：每个码都是 0，w = m 严格成立")),
    ("quantize_int4_zero", "hidden", lambda gen: (outliers(gen, 16, 128), 32), tr("one outlier in each row",
                                                                                  "每行一个离群值")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 32, 128, dtype=torch.bfloat16), 32),
     tr("bf16 weights: s and m in fp32", "bf16 权重：s 和 m 为 fp32")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 8, 256, 1.0, torch.bfloat16), 128),
     tr("bf16 weights, N(0, 1), g = 128", "bf16 权重，N(0, 1)，g = 128")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 16, 64), 8), "g = 8"),
    ("quantize_int4_zero", "hidden", lambda gen: (halves(), 16),
     tr("quotients on halves: either neighbour is right", "商恰好落在一半上：两个相邻的码都算对")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 8, 64, 1e-9), 32),
     tr("weights near 1e-9: s = 3e-10 or so, kept however small", "1e-9 附近的权重：s 约为 3e-10，再小也照样保留")),
    ("quantize_int4_zero", "hidden", lambda gen: (weights(gen, 8, 64, 2e-38), 32),
     tr("weights near 2e-38: s is an fp32 subnormal", "2e-38 附近的权重：s 是 fp32 次正规数")),
    ("dequantize_int4_zero", "hidden", lambda gen: from_weights(gen, 64, 256, 32), tr("a quantized 64 × 256 weight",
                                                                                      "量化后的 64 × 256 权重")),
    ("dequantize_int4_zero", "hidden", lambda gen: codes(gen, 16, 128, 32), tr("any codes, scales and minima",
                                                                               "任意的码、缩放因子和最小值")),
    ("dequantize_int4_zero", "hidden", lambda gen: codes(gen, 4, 512, 128), "g = 128"),
    ("dequantize_int4_zero", "hidden", lambda gen: quantize_int4_zero(constant_groups(gen), 16),
     tr("constant groups: s = 0", "常数组：s = 0")),
]
NAMES = {"quantize_int4_zero": ("w", "g"), "dequantize_int4_zero": ("q", "s", "m")}


def make_cases(tmp):
    cases, count = [], {"example": 0, "hidden": 0}
    for i, (fn, kind, make, note) in enumerate(TABLE):
        seed = 22300 + i
        values = make(torch.Generator().manual_seed(seed))
        count[kind] += 1
        args = list(zip(NAMES[fn], values))
        expected = quantize_int4_zero(*values) if fn == "quantize_int4_zero" else dequantize_int4_zero(*values)
        quantize = fn == "quantize_int4_zero"
        cases.append(Case(f"{kind} {count[kind]}", fn, args, expected, SCALES if quantize else TOL, seed, note,
                          check=codes_or_ties if quantize else None))
    return cases
