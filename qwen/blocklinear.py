"""A projection held as llama.cpp's Q8_0 or Q4_0 blocks, byte for byte as a GGUF file stores them, and multiplied
the way llama.cpp multiplies them: the live model of `load_fast(path, quant="q8_0" | "q4_0")`.

chapter 12's int8 and int4 layers (qwen/quantlinear.py) call torch's packed kernels, which take bf16 activations,
sum in floats, and read well below the memory's bandwidth at one row. llama.cpp instead rounds the activation row
to Q8_0 once per product and multiplies integers, block by block (W8A8, W4A8). chapter 13 writes that kernel
(qwen/csrc/rowdot.cpp, built by qwen/kernel.py); this layer holds each weight row as the GGUF bytes the kernel
reads, K/32 blocks of an fp16 d then the codes (34 bytes a block for Q8_0, 18 for Q4_0), so the numbers are the file's:

    y_n = Σ_b d_w[n, b] · d_x[b] · Σ_j q_w[n, b, j] · q_x[b, j]      q_x, d_x: x rounded to Q8_0 (roundf(x·(1/d_x)))

The rounding of the activation is part of the model: its teaching twin (`round_input`, used by qwen/quantized.py's
fake_quantize) rounds each product's input the same way and multiplies the blocks' values in fp32, so the two
differ by the order of fp32 sums alone (and, rarely, a code that an input one rounding away lands on differently).

Where the kernel's eight-row step runs (a CPU with AVX2, qwen/csrc/rows8.cpp), the layer holds the same bytes in
another order, as llama.cpp's x86 build repacks its Q4_0 at load time: the rows in groups of 8, each block's 8 fp16
scales together, then the codes 4 bytes of each row at a time (`group`; `ungroup` gives the file's order back, and
`file_bytes` the whole weight as the file holds it). One vector of the kernel then holds one number of each of 8
rows, and no row needs a sum of its own (the Q4_0 product measured three times faster on one AVX-512 machine;
chapter 13 times it on yours). Where the kernel runs, the blocks live on 2 MiB pages where Linux grants them
(qwen/csrc/pages.cpp: a decode step streams all of them, and 4 KiB pages cost it a page-table walk every 4 KiB).

Where the kernel does not run (no compiler, a GPU, Apple's MPS) or for a prompt of PACKED_ROWS rows or more, a
block of rows is dequantized (fp16 d times the codes: exact in fp32) and multiplied by F.linear, with the
activation rounded to Q8_0 first, so every path computes the same model. The embedding reads its rows from the same
blocks. Which path runs is a capability (qwen/kernel.py's runs_on), never a timing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.gguf_blocks import BLOCK_BYTES, q4_0_blocks, q4_0_values, q8_0_blocks, q8_0_values
from qwen.kernel import FORMATS, groups_rows, on_huge_pages, row_product, rows8_product, runs_on
from qwen.lang import tr

QK = 32  # values in a block
G = 8  # rows in a group of the eight-row layout
PACKED_ROWS = 96  # from this many rows on, dequantize blocks and call F.linear (as qwen/quantlinear.py does)
BLOCK = 2 ** 22  # weight elements dequantized at once (16 MiB in fp32)
_MAKE = {"q8_0": q8_0_blocks, "q4_0": q4_0_blocks}
_VALUES = {"q8_0": q8_0_values, "q4_0": q4_0_values}


def fits(fmt, in_features):
    """Can a weight of `in_features` inputs be cut into this format's blocks of 32?"""
    return fmt in FORMATS and in_features % QK == 0


def blocks_of(w, fmt):
    """w (N, K) float -> its GGUF blocks (N, K/32 · bytes) uint8, computed in fp32 as llama.cpp's converter does."""
    N, K = w.shape
    return _MAKE[fmt](w.detach().to("cpu", torch.float32).reshape(-1, QK)).reshape(N, -1).to(w.device)


def values_of(blocks, fmt):
    """GGUF blocks (n, K/32 · bytes) -> the values (n, K) in fp32: d · q (exact in fp32)."""
    n = blocks.shape[0]
    return _VALUES[fmt](blocks.reshape(-1, BLOCK_BYTES[fmt.upper()])).reshape(n, -1)


def group(blocks, fmt):
    """GGUF blocks (N, nb · bytes) -> the eight-row layout (⌈N/8⌉, nb · 8 · bytes), the last group padded with
    zero rows: group g's block b is rows 8g..8g+7's fp16 d (16 bytes), then chunk after chunk of 32 bytes, chunk c
    holding bytes 4c..4c+3 of each row's codes (8 chunks for Q8_0's 32 codes, 4 for Q4_0's 16 bytes of nibbles)."""
    N, row = blocks.shape
    size = BLOCK_BYTES[fmt.upper()]
    nb = row // size
    padded = torch.cat([blocks, blocks.new_zeros((-N) % G, row)])  # (8·⌈N/8⌉, nb · bytes)
    b = padded.reshape(-1, G, nb, size)  # (groups, row in group, block, bytes)
    d = b[..., :2].permute(0, 2, 1, 3).reshape(-1, nb, 2 * G)  # (groups, block, 8 rows' d)
    chunks = b[..., 2:].reshape(-1, G, nb, (size - 2) // 4, 4)  # (groups, row, block, chunk, 4 bytes)
    codes = chunks.permute(0, 2, 3, 1, 4).reshape(-1, nb, G * (size - 2))  # (groups, block, chunk · row · 4)
    return torch.cat([d, codes], dim=-1).reshape(b.shape[0], -1).contiguous()


def ungroup(grouped, fmt):
    """The eight-row layout (n, nb · 8 · bytes) -> its 8·n rows of GGUF blocks (8·n, nb · bytes): `group` undone."""
    size = BLOCK_BYTES[fmt.upper()]
    nb = grouped.shape[1] // (G * size)
    b = grouped.reshape(-1, nb, G * size)
    d = b[..., :2 * G].reshape(-1, nb, G, 2).permute(0, 2, 1, 3)  # (groups, row, block, 2)
    codes = b[..., 2 * G:].reshape(-1, nb, (size - 2) // 4, G, 4).permute(0, 3, 1, 2, 4)  # (groups, row, block, ...)
    return torch.cat([d, codes.reshape(*d.shape[:3], size - 2)], dim=-1).reshape(-1, nb * size)


def round_input(x):
    """x (..., K) rounded to Q8_0 and back, in fp32: the activation llama.cpp's products multiply (its blocks'
    values). K must be a multiple of 32."""
    shape = x.shape
    flat = x.detach().to(torch.float32).reshape(-1, QK)
    return q8_0_values(q8_0_blocks(flat)).reshape(shape)


class BlockLinear(nn.Module):
    """x Wᵀ with W held as GGUF blocks: the C++ kernel where it runs (and fewer than PACKED_ROWS rows), else a
    block of rows dequantized and F.linear on the Q8_0-rounded input. `sizes`, `joins`: a Joined's projections, whose
    outputs are returned split."""

    def __init__(self, linear, fmt, packing=True):
        super().__init__()
        w = linear.weight.detach()  # (N, K)
        self.out_features, self.in_features = w.shape
        if not fits(fmt, self.in_features):
            raise ValueError(tr(f"{fmt} cuts rows into blocks of {QK}: {self.in_features} inputs do not fit",
                                f"{fmt} 按每块 {QK} 个值切分：{self.in_features} 个输入切不整"))
        self.asked = self.scheme = fmt
        self.group, self.sizes = QK, getattr(linear, "sizes", None)
        self.joins = getattr(linear, "joins", None)  # a Joined's projection names (qwen/speculative.py reads them)
        self.widen, self.dtype = getattr(linear, "widen", False), w.dtype
        self.kernel = packing and runs_on(w.device)  # packing=False: the dequantized path only
        self.grouped = self.kernel and groups_rows()  # the eight-row layout, where the kernel's step for it runs
        blocks = blocks_of(w, fmt)  # (N, K/32 · 34 or 18) uint8: the file's bytes
        blocks = group(blocks, fmt) if self.grouped else blocks  # grouped: (⌈N/8⌉, ·)
        self.register_buffer("blocks", on_huge_pages(blocks) if self.kernel else blocks)  # streamed every step

    def file_rows(self, index):
        """The weight's rows `index` (a slice or a tensor of row numbers) as the GGUF file stores them: (n, row)."""
        if not self.grouped:
            return self.blocks[index]
        n = index if isinstance(index, torch.Tensor) else \
            torch.arange(self.out_features, device=self.blocks.device)[index]  # row numbers (n,)
        eight = ungroup(self.blocks[n // G], self.scheme).reshape(len(n), G, -1)  # each row's whole group
        return eight[torch.arange(len(n), device=n.device), n % G]

    def file_bytes(self):
        """The whole weight as the GGUF file stores it: (N, K/32 · 34 or 18) uint8."""
        return self.file_rows(slice(None))

    def rows_of(self, index):
        """The weight's rows `index` (a slice or a tensor of row numbers), dequantized in fp32: (n, K)."""
        return values_of(self.file_rows(index), self.scheme)

    def dequantized_product(self, x):
        """x (M, K) -> (M, N): the input rounded to Q8_0, each block of weight rows dequantized, F.linear in fp32."""
        xr, out = round_input(x), x.new_empty(x.shape[0], self.out_features)
        rows = max(1, BLOCK // self.in_features)
        for i in range(0, self.out_features, rows):
            out[:, i:i + rows] = F.linear(xr, self.rows_of(slice(i, i + rows)))
        return out

    def packs(self, rows):
        """Does a product of `rows` rows take the kernel?"""
        return self.kernel and rows < PACKED_ROWS

    def forward(self, x):  # x (..., K)
        x2 = x.reshape(-1, self.in_features)
        if not self.packs(x2.shape[0]):
            y = self.dequantized_product(x2)
        elif self.grouped:
            y = rows8_product(x2, self.blocks, self.out_features, self.scheme)
        else:
            y = row_product(x2, self.blocks, self.scheme)
        y = y.to(x.dtype).reshape(*x.shape[:-1], -1)
        return y if self.sizes is None else y.split(self.sizes, dim=-1)

    def extra_repr(self):
        product = tr("C++ kernel", "用 C++ kernel") if self.kernel else \
            tr("dequantized F.linear", "反量化后用 F.linear")
        return tr(", ", "，").join([f"{self.in_features} -> {self.out_features}", self.scheme.upper(), product])
