"""Problem 225: cases and oracle.

Oracle: the gguf package, llama.cpp's own Python twin of its reference quantizer (gguf.quants, not the course's
code): gguf.quants.quantize(x, Q8_0) gives the activation row's codes and fp16 scales byte for byte, and
gguf.quants.dequantize the values both rows hold. The dot is Σ_b s_b · d_w · d_x, each block's term computed in
float64 from those values, where it is exact (d_w · d_x has at most 22 significant bits, the integer sum s_b at most
20), the terms added by math.fsum (correctly rounded); the expected value is that sum rounded to fp32.
tests/test_practice_kernel.py checks every case against integer arithmetic and each edge case against its note.

The dot's tolerance: (nb + 2) · 2⁻²⁴ · Σ_b |s_b · d_w · d_x| for nb blocks. The fp32 path rounds once per block
(s_b times the exact d_w · d_x) and once per addition (nb − 1), and the answer and the expected value are each rounded
to fp32 once more (to first order; 2⁻²⁴ is half an fp32 ulp, relative). Terms added in float64 are well inside it.

Edge rows are built on purpose: exact halves of d (2.5 at d = 1: roundf gives 3, rounding half to even 2), values
where x / d rounds to another code than x · (1/d) in fp32, 0.49999997 (⌊|y| + 0.5⌋ rounds it up), blocks whose extreme
is negative, all-zero blocks and blocks so small that d is 0 in fp32 (id must be 0, never 1/0), values whose d stores
as 0 in fp16, a block's first value larger than the whole block before it (a block boundary one off moves that
block's d), blocks whose products nearly cancel (a dot that rounds each product in fp32 lands beyond the bound).
Where another rule moves a code, the weight there is ±127 with the sign that makes every moved code move the dot the
same way, by 127 · d_w · d_x each.
"""
import functools
import math

import numpy as np
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from practice.grading import EXACT, Case, Tol, compare
from qwen.lang import tr

Q8_0 = GGMLQuantizationType.Q8_0
BELOW_HALF = 0.49999997  # the fp32 number just below ½: roundf gives 0, ⌊y + 0.5⌋ gives 1 (0.49999997 + 0.5 = 1.0)


def gguf_row(x):
    """(q (nb, 32) int8, d (nb,) fp16): the gguf package's Q8_0 bytes of the fp32 row x, read as codes and scales."""
    raw = quantize(x.numpy().reshape(1, -1), Q8_0).reshape(-1, 34)
    return torch.from_numpy(raw[:, 2:].copy().view(np.int8)), torch.from_numpy(raw[:, :2].copy().view(np.float16)[:, 0])


def gguf_dot(q_w, d_w, x):
    """(the dot rounded to fp32, as a 0-d tensor; its bound): from the values gguf reads out of both rows."""
    nb = q_w.shape[0]
    w_raw = np.concatenate([d_w.numpy().view(np.uint8).reshape(nb, 2), q_w.numpy().view(np.uint8)], axis=1)
    w = dequantize(w_raw, Q8_0).reshape(nb, 32).astype(np.float64)
    xv = dequantize(quantize(x.numpy().reshape(1, -1), Q8_0), Q8_0).reshape(nb, 32).astype(np.float64)
    terms = (w * xv).sum(axis=1)  # (nb,): s_b · d_w · d_x, exact in float64
    bound = (nb + 2) * 2.0 ** -24 * float(np.abs(terms).sum())
    return torch.tensor(math.fsum(terms.tolist()), dtype=torch.float32), bound


def within(got, case, bound):
    """The dot's check: the case's tolerance (the bound), said in the statement's words."""
    found = compare(got, case.expected, case.tol)
    if found is not None and found.kind == "value":
        found.info["tol"] = f"|Δ| <= (nb + 2)·2⁻²⁴·Σ_b|s_b·d_w·d_x| = {bound:.3g}"
    return found


def _roundf(y):
    a = y.abs()
    return torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y)


def _inv(d):
    return torch.where(d == 0, 0.0, 1 / d)


WAYS = {  # other rules for a block's codes (values b, fp32 d), each a known mistake (mistakes.toml)
    "half even": lambda b, d: torch.round(b * _inv(d)),
    "half up": lambda b, d: torch.copysign(torch.floor((b * _inv(d)).abs() + 0.5), b),
    "x / d": lambda b, d: _roundf(torch.where(d == 0, 0.0, b / d)),
}


def weights(g, K, scale=0.02):
    """A weight row as llama.cpp stores it: N(0, scale) values in Q8_0 blocks (q_w, d_w)."""
    return gguf_row(torch.randn(K, generator=g) * scale)


def steered(g, x, ways):
    """Weights for the row x: ±127 where one of `ways` gives another code than llama.cpp's rule, 127 · sign(ours −
    theirs), so every moved code moves the dot the same way; elsewhere an N(0, 0.02) row's codes."""
    q_w, d_w = weights(g, x.numel())
    blocks = x.reshape(-1, 32)
    d = blocks.abs().amax(dim=1, keepdim=True) / 127
    ours = _roundf(blocks * _inv(d))
    for way in ways:
        moved = (WAYS[way](blocks, d) - ours).sign()
        q_w = torch.where(moved != 0, (-127 * moved).to(torch.int8), q_w)
    return q_w, d_w


def hand_row(g=None):
    """Block 0: d = 1, the values rounded by hand, halves away from zero; block 1: all zeros, d = 0."""
    block = torch.tensor([-127, 126.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5] + [float(k) for k in range(-12, 12)])
    return torch.cat([block, torch.zeros(32)])


def halves(scales, nb):
    """make(g): blocks of exact halves of d = scale (max|x| = 127 · scale, a power of two, so x · (1/d) is exact),
    ±0.49999997 · d and quarters, shuffled; the blocks after them random."""
    def make(g):
        x = torch.randn(nb * 32, generator=g)
        y = torch.tensor([127, -126.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 64.5, -64.5, 100.5, -100.5,
                          BELOW_HALF, -BELOW_HALF] + [k + 0.25 for k in range(-8, 8)])
        for b, s in enumerate(scales):
            x[32 * b:32 * b + 32] = y[torch.randperm(32, generator=g)] * s
        return x
    return make


def x_over_d(nb, n):
    """make(g): in every block, n values where x / d and x · (1/d) round to neighbouring codes in fp32, found among
    the fp32 neighbours of the half-way points (k + ½) · d; blocks are drawn until one has n of them."""
    def block(g):
        while True:
            x = torch.randn(32, generator=g)
            amax = x.abs().max()
            d = amax / 127
            near = [((torch.arange(127, dtype=torch.float64) + 0.5) * float(d)).float()]
            for _ in range(6):
                near.append(torch.nextafter(near[-1], torch.tensor(1e9)))
            v = torch.cat(near)
            apart = v[(v < amax) & (_roundf(v * (1 / d)) != _roundf(v / d))]
            if len(apart) >= n:
                free = [j for j in range(32) if x[j].abs() != amax]
                for k, value in enumerate(apart[:n]):
                    x[free[k]] = value if k % 2 == 0 else -value
                return x
    return lambda g: torch.cat([block(g) for _ in range(nb)])


def normal(K, scale=1.0):
    return lambda g: torch.randn(K, generator=g) * scale


def outliers(K, at=(7, 300, 301, 777)):
    """make(g): an N(0, 1) row with a few values 20 times larger: their blocks get a large d, the others not."""
    def make(g):
        x = torch.randn(K, generator=g)
        x[list(at)] *= 20
        return x
    return make


def leaping(nb):
    """make(g): each odd block starts with ±8, beyond every value of the block before it (the others N(0, 1))."""
    def make(g):
        x = torch.randn(nb * 32, generator=g)
        x[32::64] = 8.0 * (1 - 2 * (torch.arange(len(x[32::64])) % 2))
        return x
    return make


def negative_max(nb):
    """make(g): every block's value of largest magnitude, −1.5, is negative, the rest in (0, 1)."""
    def make(g):
        x = torch.rand(nb * 32, generator=g)
        x[::32] = -1.5
        return x
    return make


def zero_blocks(nb, zeros=(), tiny=()):
    """make(g): random blocks, some all zero and some of fp32 subnormals so small that d = max|x| / 127 is 0."""
    def make(g):
        x = torch.randn(nb * 32, generator=g)
        for b in zeros:
            x[32 * b:32 * b + 32] = 0.0
        for b in tiny:
            x[32 * b:32 * b + 32] = (torch.randint(-63, 64, (32,), generator=g).double() * 2.0 ** -149).float()
        return x
    return make


def cancelling(nb):
    """make(g): blocks whose products nearly cancel: random q_w, then, position by position from the largest |q_x|
    down, q_w moved (within ±127) to bring s_b = Σ_j q_w · q_x nearer 0, so |s_b| ends far below Σ_j |q_w · q_x|;
    d_w with all 11 bits of fp16 in use. A dot that rounds each product w_j · x_j in fp32 is off by about
    2⁻²⁴ · Σ_j |w_j · x_j|, far beyond the bound."""
    def make(g):
        x = torch.randn(nb * 32, generator=g)
        q_x = gguf_row(x)[0].long()  # (nb, 32)
        q_w = torch.randint(-127, 128, (nb, 32), generator=g)
        for j in q_x.abs().argsort(dim=1, descending=True).T:  # (nb,): each block's next position
            s, qx, qw = (q_w * q_x).sum(1), q_x.gather(1, j[:, None])[:, 0], q_w.gather(1, j[:, None])[:, 0]
            step = torch.round(-s / torch.where(qx == 0, 1, qx)).long() * (qx != 0)  # q_w's move there
            q_w.scatter_(1, j[:, None], torch.clamp(qw + step, -127, 127)[:, None])
        return q_w.to(torch.int8), (0.01 + 0.01 * torch.rand(nb, generator=g)).half(), x
    return make


def dot(make_x, ways=()):
    """make(g) -> (q_w, d_w, x): the row make_x(g), its weights steered by `ways` (or an N(0, 0.02) row's)."""
    def make(g):
        x = make_x(g)
        return (*(steered(g, x, ways) if ways else weights(g, x.numel())), x)
    return make


def hand_dot(g):
    """q_w = 1 everywhere, d_w = 0.5 and 0.25: the dot is 0.5 · Σ of block 0's codes (block 1 is 0)."""
    return torch.ones(2, 32, dtype=torch.int8), torch.tensor([0.5, 0.25], dtype=torch.float16), hand_row()


def extremes(g):
    """Codes ±127 and −128 in the weights, ±127 in the row (each block's max, 2, where the weight is ±127)."""
    q_w = torch.randint(-128, 128, (8, 32), generator=g, dtype=torch.int8)
    q_w[:, ::2] = (254 * torch.randint(0, 2, (8, 16), generator=g) - 127).to(torch.int8)  # ±127
    x = torch.sign(torch.randn(256, generator=g)) * (1 + torch.rand(256, generator=g))
    x[::2] = torch.where(q_w.reshape(-1)[::2] > 0, 2.0, -2.0)
    return q_w, torch.rand(8, generator=g).half() * 0.01 + 0.001, x


def weight_scales(g):
    """d_w across fp16's range: subnormal, small, large, negative (read as stored)."""
    q_w, _, x = dot(normal(256))(g)
    return q_w, torch.tensor([2.0 ** -24, 3e-5, 0.0123, 1.0, 7.5, 1000.0, -0.02, 60000.0]).half(), x


ROWS = [  # (label kind, make(g) -> x, note): quantize_row_q8_0(x)
    ("example", hand_row, tr("block 0: d = 1, the codes are the values rounded, halves away from zero; block 1: "
                             "all zeros, d = 0",
                             "第 0 块：d = 1，码就是舍入后的值，恰好一半时远离零；第 1 块：全零，d = 0")),
    ("example", normal(128), tr("4 blocks of N(0, 1)", "4 块 N(0, 1)")),
    ("hidden", normal(1024), tr("a row of Qwen3.5-0.8B's width, K = 1024: 32 blocks",
                                "Qwen3.5-0.8B 宽度的一行，K = 1024：32 块")),
    ("hidden", halves((1.0, 0.5, 0.25), 4), tr("exact halves of d = 1, 0.5, 0.25, and ±0.49999997",
                                               "d = 1、0.5、0.25 的恰好一半，以及 ±0.49999997")),
    ("hidden", x_over_d(4, 4), tr("values where x / d rounds to another code than x · (1/d)",
                                  "x / d 与 x · (1/d) 舍入成不同码的值")),
    ("hidden", negative_max(4), tr("every block's extreme is negative", "每块的极值都是负数")),
    ("hidden", zero_blocks(6, (1, 4), (2,)), tr("all-zero blocks, and one of fp32 subnormals: d = 0",
                                                "全零的块，以及一块 fp32 次正规数：d = 0")),
    ("hidden", normal(256, 5e-7), tr("tiny values: d stores as 0 in fp16, full codes",
                                     "极小的值：d 存成 fp16 后是 0，码仍是满的")),
    ("hidden", leaping(6), tr("a block's first value beyond the whole block before it",
                              "某块的第一个值比前一块所有值都大")),
    ("hidden", normal(64, 0.0), tr("all zeros", "全零")),
]
DOTS = [  # (label kind, make(g) -> (q_w, d_w, x), note): q8_0_dot(q_w, d_w, x)
    ("example", hand_dot, tr("q_w = 1, d_w = 0.5: 0.5 · (−127 + 127 − 3 − 2 − 1 + 1 + 2 + 3 − 12 − … + 11) = −6",
                             "q_w = 1，d_w = 0.5：0.5 · (−127 + 127 − 3 − 2 − 1 + 1 + 2 + 3 − 12 − … + 11) = −6")),
    ("example", dot(outliers(1024)), tr("N(0, 0.02) weights in Q8_0, an N(0, 1) row with four values 20 times "
                                        "larger, K = 1024", "Q8_0 的 N(0, 0.02) 权重，N(0, 1) 的一行，其中四个值放大 "
                                        "20 倍，K = 1024")),
    ("hidden", dot(normal(3584)), tr("K = 3584, the width of the MLP's down_proj: 112 blocks",
                                     "K = 3584，MLP 的 down_proj 的宽度：112 块")),
    ("hidden", dot(normal(32, 3.0)), tr("one block, K = 32", "只有一块，K = 32")),
    ("hidden", dot(halves((1.0, 0.5, 0.25), 4), ["half even", "half up"]),
     tr("exact halves of d, the weights ±127 where rounding half to even or ⌊|y| + 0.5⌋ moves a code",
        "d 的恰好一半；舍入到偶数或用 ⌊|y| + 0.5⌋ 会改变码的位置，权重取 ±127")),
    ("hidden", dot(halves((2.0, 1.0, 0.125), 6), ["half even", "half up"]),
     tr("exact halves of d = 2, 1, 0.125 among random blocks", "随机块中间夹着 d = 2、1、0.125 的恰好一半")),
    ("hidden", dot(x_over_d(4, 4), ["x / d"]), tr("values where x / d rounds apart from x · (1/d), the weights ±127 "
                                                  "there", "x / d 与 x · (1/d) 舍入不同的值，那里的权重取 ±127")),
    ("hidden", dot(x_over_d(8, 2), ["x / d"]), tr("more values where x / d rounds apart", "更多 x / d 舍入不同的值")),
    ("hidden", dot(negative_max(4)), tr("every block's extreme is negative", "每块的极值都是负数")),
    ("hidden", dot(zero_blocks(8, (1, 4))), tr("two all-zero blocks: their d = 0 and their terms 0",
                                               "两块全零：d = 0，这两块的项是 0")),
    ("hidden", dot(zero_blocks(4, (), (0, 3))), tr("two blocks of fp32 subnormals: d rounds to 0 in fp32",
                                                   "两块 fp32 次正规数：d 在 fp32 里舍入成 0")),
    ("hidden", dot(normal(256, 5e-7)), tr("tiny values: d_x stores as 0, the dot is 0",
                                          "极小的值：d_x 存成 0，点积是 0")),
    ("hidden", dot(leaping(8)), tr("a block's first value beyond the whole block before it",
                                   "某块的第一个值比前一块所有值都大")),
    ("hidden", cancelling(1), tr("one block whose products nearly cancel: |s| far below Σ|q_w·q_x|",
                                 "一块里的乘积几乎相互抵消：|s| 远小于 Σ|q_w·q_x|")),
    ("hidden", cancelling(8), tr("8 blocks whose products nearly cancel", "8 块，乘积都几乎相互抵消")),
    ("hidden", extremes, tr("codes ±127 and −128 in the weights, ±127 in the row: products at their largest",
                            "权重的码取 ±127 和 −128，行的码取 ±127：乘积取到最大")),
    ("hidden", weight_scales, tr("d_w across fp16's range: 2⁻²⁴, 3e-5, …, 60000, one negative",
                                 "d_w 覆盖 fp16 的范围：2⁻²⁴、3e-5……60000，其中一个是负数")),
    ("hidden", dot(normal(1024, 30.0)), tr("a wide row, N(0, 30)", "范围很宽的一行，N(0, 30)")),
]


def make_cases(tmp):
    """The examples first, then the hidden cases, each from its own seed."""
    table = [(fn, *row, 22500 + 100 * n + i) for n, (fn, rows) in enumerate([("quantize_row_q8_0", ROWS),
                                                                            ("q8_0_dot", DOTS)])
             for i, row in enumerate(rows)]
    table.sort(key=lambda row: row[1] != "example")  # stable: each kind keeps its order
    cases, count = [], {"example": 0, "hidden": 0}
    for fn, kind, make, note, seed in table:
        value = make(torch.Generator().manual_seed(seed))
        count[kind] += 1
        label = f"{kind} {count[kind]}"
        if fn == "quantize_row_q8_0":
            cases.append(Case(label, fn, [("x", value.float())], gguf_row(value.float()), EXACT, seed, note))
            continue
        q_w, d_w, x = value
        expected, bound = gguf_dot(q_w, d_w, x.float())
        tol = Tol(atol=bound / max(1.0, abs(float(expected))))  # compare's atol · max(1, |y|) is then the bound
        cases.append(Case(label, fn, [("q_w", q_w), ("d_w", d_w), ("x", x.float())], expected, tol, seed, note,
                          check=functools.partial(within, bound=bound)))
    return cases
