"""Problem 222: cases and oracle.

Oracle: qwen/gguf_blocks.py's q8_0_blocks and q8_0_values, which tests/test_quant.py proves byte-identical to the
gguf package's reference quantizer (gguf.quants, llama.cpp's own Python twin of ggml-quants.c) on random tensors and
edge blocks; tests/test_practice.py checks every case here against gguf.quants too. Edge blocks are built on
purpose: exact halves (roundf against round-half-to-even), a value just below a half, an fp16 scale that underflows,
values where another way of computing the codes (x / d, 1/d as 127 / max|x| or from max|x| · (1/127), fp64) rounds
to another code, a d exactly half-way between two fp16 numbers, scales far below fp16's range (an fp32 subnormal d
among them) and one that rounds to 0 in fp32, and scales at and beyond fp16's largest number.
"""
import torch

from practice.grading import EXACT, Case
from qwen.gguf_blocks import q8_0_blocks, q8_0_values
from qwen.lang import tr

BELOW_HALF = 0.49999997  # the fp32 number just below 0.5: ⌊y + 0.5⌋ rounds it up, roundf does not


def _roundf(y):
    a = y.abs()
    return torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y)


def block_of(x):
    return q8_0_blocks(x.float().reshape(1, 32))[0]


def values_of(block):
    return q8_0_values(block.reshape(1, 34))[0]


def other_ways(v, amax):
    """What other ways of computing the codes' quotient give for the values v of a block whose largest magnitude is
    amax, beside llama.cpp's x · (1/d), d = amax/127 in fp32: x / d; 1/d computed as 127/amax, or from d computed as
    amax · (1/127) (one hint names both: the scale computed another way); the quotient in fp64. Each is a known
    mistake (mistakes.toml)."""
    d = amax / 127
    return {"x / d": v / d, "127 / max|x|": v * (127 / amax), "max|x| · (1/127)": v * (1 / (amax * (1 / 127))),
            "fp64": v.double() * 127 / amax.double()}


HINTED_TOGETHER = {"127 / max|x|": "scale", "max|x| · (1/127)": "scale"}  # ways that share a hint


def planted(g, ways, n):
    """A random block where each of the other ways named rounds n of its values to another code than llama.cpp's
    x · (1/d), and no way with another hint does (so each hint's bytes are its own). The values are searched among the
    fp32 neighbours of the half-way points (k + ½) · d; blocks are drawn until one has them (1/d from
    max|x| · (1/127) differs from llama.cpp's in about one block in thirty)."""
    while True:
        x = torch.randn(32, generator=g)
        amax = x.abs().max()
        d = amax / 127
        up = down = ((torch.arange(127, dtype=torch.float64) + 0.5) * float(d)).float()
        near = [up]
        for _ in range(6):
            up, down = torch.nextafter(up, torch.tensor(1e9)), torch.nextafter(down, torch.tensor(-1e9))
            near += [up, down]
        v = torch.cat(near)
        v = v[v < amax]
        ours = _roundf(v * (1 / d)).double()
        apart = {way: _roundf(y).double() != ours for way, y in other_ways(v, amax).items()}
        alone = [apart[way] & ~torch.stack([a for w, a in apart.items()
                                            if HINTED_TOGETHER.get(w, w) != HINTED_TOGETHER.get(way, way)]).any(0)
                 for way in ways]
        if all(int(a.sum()) >= n for a in alone):
            break
    free = [j for j in range(32) if x[j].abs() != amax]
    for i, found in enumerate(alone):
        for k, y in enumerate(v[found][:n]):
            x[free[i * n + k]] = y if k % 2 == 0 else -y  # the sign does not change a code's magnitude
    return x


def around(g, amax, at=7):
    """A random block whose largest magnitude is amax, at index `at` (the others within ±amax / 2)."""
    x = (torch.rand(32, generator=g) - 0.5) * amax
    x[at] = -amax if at % 2 else amax
    return x


def fp16_tie(g, near):
    """A block whose d = max|x| / 127 lies exactly half-way between two fp16 numbers near `near`, the lower one even
    (last bit 0): fp16 rounds a half to the even one, so d is stored as the lower; rounding halves up by hand
    stores the upper. d has 12 significant bits and 127 has 7, so max|x| = 127 · d is exact in fp32."""
    bits = torch.tensor([near], dtype=torch.float16).view(torch.int16)
    low = (bits & ~1).view(torch.float16).float()  # the even one
    high = (bits | 1).view(torch.float16).float()
    return around(g, float(127 * (low + high) / 2))


def tiny_scale(g, amax):
    """A block whose d = amax / 127 is far below fp16's range (stored as 0) but not 0 in fp32: the codes are full.
    At amax = 6e-37 d is an fp32 subnormal (below 1.2e-38), and 1/d is still finite. A floor on d (1e-8, 1e-12,
    torch.finfo(torch.float32).tiny) changes these codes."""
    return around(g, amax)


def d_underflows(g):
    """fp32 subnormals k · 2⁻¹⁴⁹ with |k| <= 63: d = max|x| / 127 is below half the smallest fp32 number and
    rounds to 0, so id = 0 and every code is 0, as in an all-zero block (1/d would be inf: a guard `d == 0`, not a
    test of x, decides)."""
    x = torch.randint(-63, 64, (32,), generator=g).double() * 2.0 ** -149
    x[3] = 63 * 2.0 ** -149
    return x.float()


def halves(scale):
    """Exact halves of d = scale (the block's largest magnitude is 127 · scale), ± the fp32 number below ½."""
    y = torch.tensor([127, -126.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 64.5, -64.5, 100.5, BELOW_HALF,
                      -BELOW_HALF, 0.0] + [k + 0.25 for k in range(-8, 8)])
    return y * scale


def hand_example():
    """d = 1: the codes are the values rounded, halves away from zero."""
    return torch.tensor([-127, 126.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5] + [float(k) for k in range(-12, 12)])


def with_extreme(g, value, at=7, scale=1.0):
    x = torch.randn(32, generator=g) * scale
    x[at] = value
    return x


def _random(g, scale):
    return torch.randn(32, generator=g) * scale


def _random_block(g, scale):
    return block_of(torch.randn(32, generator=g) * scale)


def _bytes(d, codes):
    """A block from an fp16 scale and int8 codes."""
    scale = torch.tensor([d], dtype=torch.float16).view(torch.uint8)
    return torch.cat([scale, torch.tensor(codes, dtype=torch.int8).view(torch.uint8)])


# (function, label kind, make(g) -> the input, note)
BLOCKS = [
    ("example", lambda g: hand_example(), tr("d = 127/127 = 1: the codes are the values rounded, halves away from zero",
                                             "d = 127/127 = 1：码就是舍入后的值，恰好一半时远离零舍入")),
    ("example", lambda g: _random(g, 1.0), tr("32 values drawn from N(0, 1)", "32 个取自 N(0, 1) 的值")),
    ("hidden", lambda g: _random(g, 0.02), tr("weight-sized values, N(0, 0.02)", "量级与权重相当的值，N(0, 0.02)")),
    ("hidden", lambda g: with_extreme(g, -5.0), tr("the value of largest magnitude is negative",
                                                   "绝对值最大的值是负数")),
    ("hidden", lambda g: -_random(g, 1.0).abs(), tr("every value negative", "全部为负")),
    ("hidden", lambda g: torch.zeros(32), tr("all zeros: d = 0 and every code 0", "全零：d = 0，每个码都是 0")),
    ("hidden", lambda g: with_extreme(g, 1e4, at=20, scale=0.01), tr("one huge value among small ones",
                                                                     "一个巨大的值混在小值里")),
    ("hidden", lambda g: _random(g, 1e-6), tr("tiny values: d rounds to 0 in fp16, the codes still use the fp32 d",
                                              "极小的值：d 在 fp16 里舍入成 0，码仍用 fp32 的 d 计算")),
    ("hidden", lambda g: _random(g, 2e-5), tr("small values: d is an fp16 subnormal", "小值：d 是 fp16 次正规数")),
    ("hidden", lambda g: halves(1.0), tr("d = 1 and exact halves: 2.5 → 3, −2.5 → −3; 0.49999997 → 0",
                                         "d = 1，恰好一半的情况：2.5 → 3，−2.5 → −3；0.49999997 → 0")),
    ("hidden", lambda g: halves(0.5), tr("d = 0.5 and exact halves of it", "d = 0.5，恰好一半的情况")),
    ("hidden", lambda g: planted(g, ["x / d", "fp64"], 2),
     tr("values where x / d, or the quotient in fp64, round to another code than x · (1/d) in fp32",
        "x / d 或 fp64 下的商舍入出的码与 fp32 的 x · (1/d) 不同的值")),
    ("hidden", lambda g: planted(g, ["x / d", "fp64"], 3),
     tr("more values where x / d, or the quotient in fp64, round apart", "更多 x / d 或 fp64 下的商舍入结果不同的值")),
    ("hidden", lambda g: planted(g, ["127 / max|x|", "max|x| · (1/127)"], 2),
     tr("a block where 1/d computed as 127 / max|x|, or from max|x| · (1/127), moves some codes",
        "1/d 若按 127 / max|x| 算，或由 max|x| · (1/127) 得出，就会有码变动的块")),
    ("hidden", lambda g: planted(g, ["127 / max|x|", "max|x| · (1/127)"], 3),
     tr("another block where 1/d computed another way moves some codes", "另一个 1/d 换种算法就会有码变动的块")),
    ("hidden", lambda g: fp16_tie(g, 1.5), tr("d exactly half-way between two fp16 numbers: to the even one, below",
                                              "d 恰好落在两个 fp16 数的正中间：舍入到偶数的那个，即较小的")),
    ("hidden", lambda g: fp16_tie(g, 0.0123), tr("d = 0.0123 or so, half-way between two fp16 numbers: to the even one",
                                                 "d 约为 0.0123，恰好在两个 fp16 数的正中间：舍入到偶数的那个")),
    ("hidden", lambda g: tiny_scale(g, 1e-20), tr("values near 1e-20: d = 7.9e-23, stored as 0, the codes full",
                                                  "1e-20 附近的值：d = 7.9e-23，存为 0，码仍是满的")),
    ("hidden", lambda g: tiny_scale(g, 6e-37), tr("values near 1e-37: d is an fp32 subnormal, the codes full",
                                                  "1e-37 附近的值：d 是 fp32 次正规数，码仍是满的")),
    ("hidden", lambda g: d_underflows(g), tr("fp32 subnormals so small that d rounds to 0: every code 0",
                                             "小到 d 舍入成 0 的 fp32 次正规数：每个码都是 0")),
    ("hidden", lambda g: around(g, 127 * 65510.0), tr("d = 65510: stored as fp16's largest number, 65504 (FF 7B)",
                                                      "d = 65510：存为 fp16 的最大数 65504（FF 7B）")),
    ("hidden", lambda g: around(g, 1e9), tr("d = 7.9e6, beyond fp16's range: stored as inf (00 7C)",
                                            "d = 7.9e6，超出 fp16 的范围：存为 inf（00 7C）")),
    ("hidden", lambda g: _random(g, 100.0), tr("a wide range, N(0, 100)", "范围很宽，N(0, 100)")),
]
VALUES = [
    ("example", lambda g: block_of(hand_example()), tr("the bytes of example 1: d = 1 (bytes 00 3C), the codes",
                                                       "样例 1 的字节：d = 1（字节 00 3C），然后是各个码")),
    ("hidden", lambda g: _random_block(g, 0.02), tr("the bytes of a block of weights", "一块权重的字节")),
    ("hidden", lambda g: _bytes(0.0123, torch.randint(-128, 128, (32,), generator=g).tolist()),
     tr("every code from −128 to 127 may appear (llama.cpp never writes −128, but it reads it)",
        "−128 到 127 的码都可能出现（llama.cpp 从不写出 −128，但会读它）")),
    ("hidden", lambda g: _bytes(2.0 ** -24, list(range(-128, 128, 8))), tr("d = 2⁻²⁴, the smallest fp16 subnormal",
                                                                           "d = 2⁻²⁴，最小的 fp16 次正规数")),
    ("hidden", lambda g: _bytes(-3.25, torch.randint(-127, 128, (32,), generator=g).tolist()),
     tr("a negative scale: read as it is", "负的缩放因子：照原样读")),
    ("hidden", lambda g: _random_block(g, 300.0), tr("large values: d near 7", "大值：d 接近 7")),
]


def make_cases(tmp):
    """The examples first, then the hidden cases, each from its own seed."""
    table = [(fn, *row, 22200 + 100 * n + i) for n, (fn, rows) in enumerate([("q8_0_block", BLOCKS),
                                                                            ("q8_0_values", VALUES)])
             for i, row in enumerate(rows)]
    table.sort(key=lambda row: row[1] != "example")  # stable: each kind keeps its order
    cases, count = [], {"example": 0, "hidden": 0}
    for fn, kind, make, note, seed in table:
        value = make(torch.Generator().manual_seed(seed))
        count[kind] += 1
        if fn == "q8_0_block":
            args, expected = [("x", value.float())], block_of(value)
        else:
            args, expected = [("block", value)], values_of(value)
        cases.append(Case(f"{kind} {count[kind]}", fn, args, expected, EXACT, seed, note))
    return cases
