"""Problem 222: cases and oracle.

Oracle: qwen/gguf_blocks.py's q8_0_blocks and q8_0_values, which tests/test_quant.py proves byte-identical to the
gguf package's reference quantizer (gguf.quants, llama.cpp's own Python twin of ggml-quants.c) on random tensors and
edge blocks; tests/test_practice.py checks every case here against gguf.quants too. Edge blocks are built on
purpose: exact halves (roundf against round-half-to-even), a value just below a half, an fp16 scale that underflows,
and values where x · (1/d) and x / d round to different codes.
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


def split_by_division(g, n):
    """A random block with n of its values where x · (1/d) and x / d give different codes (each searched among
    the fp32 neighbours of a half-way point (k + ½) · d)."""
    x = torch.randn(32, generator=g)
    d = x.abs().max() / 127
    inv_d = 1 / d
    planted = 0
    for k in torch.randperm(120, generator=g).tolist():
        c = torch.tensor((k + 0.5) * float(d), dtype=torch.float32)
        for step in range(-6, 7):
            y = c.clone()
            for _ in range(abs(step)):
                y = torch.nextafter(y, torch.tensor(1e9 if step > 0 else -1e9))
            if _roundf(y * inv_d) != _roundf(y / d):
                i = [j for j in range(32) if x[j].abs() != x.abs().max()][planted]
                x[i] = y if planted % 2 == 0 else -y
                planted += 1
                break
        if planted == n:
            return x
    raise AssertionError("no value found")  # never: every random block has some


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
    ("hidden", lambda g: split_by_division(g, 3), tr("values where x · (1/d) and x / d round to different codes",
                                                     "x · (1/d) 与 x / d 舍入到不同码的值")),
    ("hidden", lambda g: split_by_division(g, 5), tr("more values where x · (1/d) and x / d round apart",
                                                     "更多 x · (1/d) 与 x / d 舍入结果不同的值")),
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
