"""Problem 226: cases and oracle.

Oracle: gguf.quants.dequantize(blocks, Q4_0), the gguf package (llama.cpp's own Python twin of ggml-quants.c), never
the course's code. Every value is d · (q − 8) with d an fp16 number and q − 8 in −8..7, exact in fp32, so the
tolerance is exact. The blocks are those gguf.quants.quantize writes for weights (d is negative wherever a block's
extreme value is positive: Q4_0 puts that value on code −8), and raw bytes built on purpose: every byte value, so
every nibble in both halves; scales across fp16's range (subnormal, fp16's largest, with all 11 bits in use, so a
product rounded in fp16 shows); d = 0. tests/test_practice_kernel.py checks every case against a byte-by-byte
reading written from the statement.
"""
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from practice.grading import EXACT, Case
from qwen.lang import tr

Q4_0 = GGMLQuantizationType.Q4_0


def gguf_values(blocks):
    """(n, 32) fp32: what the gguf package reads out of Q4_0 blocks (n, 18) uint8."""
    return torch.from_numpy(dequantize(blocks.numpy(), Q4_0).reshape(-1, 32).copy())


def gguf_blocks(w):
    """(n, 18) uint8: the Q4_0 blocks the gguf package writes for the fp32 values w (..., 32k)."""
    return torch.from_numpy(quantize(w.float().numpy().reshape(-1, 32), Q4_0).reshape(-1, 18).copy())


def raw(d, nibbles):
    """Blocks from fp16 scales d (n,) and codes 0..15 (n, 32), in the order of the values: byte j is
    q_j | q_(j+16) << 4."""
    q = torch.as_tensor(nibbles, dtype=torch.uint8)
    scale = torch.as_tensor(d, dtype=torch.float16).reshape(-1, 1).view(torch.uint8)  # (n, 2), low byte first
    return torch.cat([scale, q[:, :16] | (q[:, 16:] << 4)], dim=1)


def hand(g=None):
    """One block, d = 0.5 (bytes 00 38): byte j = (15 − j) << 4 | j, so value j = j − 8 and value j + 16 = 7 − j."""
    j = torch.arange(16)
    return raw([0.5], torch.cat([j, 15 - j])[None])


def every_byte(g):
    """Every byte value 0..255 once, in 16 blocks, each with a random d in [0.001, 1]."""
    b = torch.randperm(256, generator=g).reshape(16, 16)
    d = (torch.rand(16, generator=g) * 0.999 + 0.001).half()
    return torch.cat([d.reshape(-1, 1).view(torch.uint8), b.to(torch.uint8)], dim=1)


def scales(values):
    """make(g): one block per scale in `values`, random codes."""
    def make(g):
        return raw(values, torch.randint(0, 16, (len(values), 32), generator=g))
    return make


def weights(n_rows, K, scale=0.02):
    """make(g): the blocks of an (n_rows, K) weight of N(0, scale) values, row after row, as llama.cpp stores it."""
    return lambda g: gguf_blocks(torch.randn(n_rows, K, generator=g) * scale)


FULL_MANTISSA = [1 + 1023 / 1024, -(1 + 683 / 1024), 0.012345, 3.14159, -0.3, 777.7, 0.0999]

BLOCKS = [  # (label kind, make(g) -> blocks (n, 18) uint8, note)
    ("example", hand, tr("d = 0.5 (bytes 00 38); byte j holds j in its low nibble and 15 − j in its high one",
                         "d = 0.5（字节 00 38）；第 j 个字节的低半字节是 j，高半字节是 15 − j")),
    ("example", weights(1, 128), tr("4 blocks of N(0, 0.02) weights, quantized by the gguf package",
                                    "4 块 N(0, 0.02) 的权重，由 gguf 包量化")),
    ("hidden", weights(1, 1024), tr("a row of Qwen3.5-0.8B's width, K = 1024: 32 blocks",
                                    "Qwen3.5-0.8B 宽度的一行，K = 1024：32 块")),
    ("hidden", weights(2, 3584), tr("two rows of down_proj's width, K = 3584: 224 blocks",
                                    "down_proj 宽度的两行，K = 3584：224 块")),
    ("hidden", weights(1, 32), tr("one block", "只有一块")),
    ("hidden", every_byte, tr("every byte value 0..255 once: every nibble in both halves",
                              "每个字节值 0..255 各出现一次：两半里的每个半字节都有")),
    ("hidden", lambda g: gguf_blocks(torch.rand(256, generator=g) + 0.1),
     tr("every value positive: d < 0 in every block (Q4_0 puts the extreme value on code −8)",
        "全部为正：每块的 d 都小于 0（Q4_0 把极值放在码 −8 上）")),
    ("hidden", scales(FULL_MANTISSA), tr("scales with all 11 bits of fp16 in use: d · (q − 8) needs up to 14",
                                         "用满 fp16 全部 11 个比特的缩放因子：d · (q − 8) 最多需要 14 个")),
    ("hidden", scales([2.0 ** -24, 6.1e-5, 3e-7]), tr("subnormal fp16 scales, down to 2⁻²⁴",
                                                      "fp16 次正规数缩放因子，小到 2⁻²⁴")),
    ("hidden", scales([65504.0, -65504.0, 60000.0]), tr("fp16's largest scales: values up to 8 · 65504",
                                                        "fp16 最大的缩放因子：值可达 8 · 65504")),
    ("hidden", scales([0.0, 0.0]), tr("d = 0: every value 0", "d = 0：每个值都是 0")),
    ("hidden", lambda g: gguf_blocks(torch.randn(64, generator=g) * 100), tr("a wide range, N(0, 100)",
                                                                             "范围很宽，N(0, 100)")),
]


def make_cases(tmp):
    """The examples first, then the hidden cases, each from its own seed."""
    cases, count = [], {"example": 0, "hidden": 0}
    for i, (kind, make, note) in enumerate(BLOCKS):
        seed = 22600 + i
        blocks = make(torch.Generator().manual_seed(seed))
        count[kind] += 1
        cases.append(Case(f"{kind} {count[kind]}", "q4_0_values", [("blocks", blocks)], gguf_values(blocks), EXACT,
                          seed, note))
    return cases
