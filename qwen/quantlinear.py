"""A projection held as int8 or int4 codes that multiplies with them directly: the quantized live model's layer.

A decode step reads every weight once per token (chapter 9), so its time is the weights' bytes over the memory's
bandwidth: a weight held in 8 bits instead of bf16's 16 is read in half the time, in 4 bits in a quarter. Here the
fast model's projections (the joined ones included) and the tied head keep the codes of qwen/quant.py and call
torch's packed CPU kernels, which read the codes and apply the scales inside the product, so no bf16 copy of the
weight is ever made:

    int8  per output channel (quantize_int8):    y = (x · q) · s                  q int8 (N, K), s (N,)
    int4  groups of g inputs, with a zero point:  w = (q − 8) · s + z             q 0..15, s and z (K/g, N)

where z = m + 8·s turns qwen/quant.py's w = q·s + m into the kernel's form (symmetric int4 is the same kernel
with codes q + 8 and z = 0). The scales and zero points are stored in the model dtype: those rounded values ARE
the model's numbers. The kernels multiply with q and s as they are, sum in fp32 and round the product once, so the
weight q·s is never rounded; `fake_quantize` (qwen/quantized.py) writes q·s out as a teaching model's weight,
rounded once more to that model's dtype (exact in an fp32 model given the live model's bf16 scales).

A weight whose input width K is not a multiple of the group (a DeltaNet value width of 144 makes out_proj's K 144,
not a multiple of 32) cannot be cut into int4 groups. It is held as int8 per output channel instead (`held_as`):
that fits any width (one scale per row, no groups), has a packed kernel of its own (the same decode path, the
same bf16 activations), and is finer than int4, so the exception costs bytes (8 bits a weight instead of 4.5),
never quality. bf16 would fit too, at twice int8's bytes for nothing a quantized model asks for. The choice
depends on the weight's shape alone, so `fake_quantize` makes the same one, and `describe` names the tensors.

The kernels are for bf16 activations on a CPU: with fp32 ones torch takes a slow path (measured below), and a GPU
or Apple's MPS has no such op, so there a block of rows is dequantized and F.linear called
(`dequantized_product`). That writes and reads the block in the model dtype beside reading the codes: more bytes
than the plain weight, so decoding is slower than without quantization, and the codes only save memory
(qwen/quantized.py's `notes` says so when the model is built). Which path runs is a capability (device, dtype, the
op present), never a timing. The embedding lookup dequantizes only the rows it reads: int8 shares the head's codes;
int4's kernel layout is tiled (rows interleaved in blocks that depend on the CPU), so a row cannot be read from it
and the table keeps a row-major copy of its codes, two per byte (V·d/2 bytes: 127 MB for the real Qwen3.5-0.8B's
248,320 × 1,024 table), which the head's many-row products use too. Scales and zero points are held once: in the
int4 kernel's layout where it runs (rows read from there), as (N, K/g) tensors elsewhere.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.embedding import check_ids
from qwen.lang import tr
from qwen.quant import quantize_int4, quantize_int4_zero, quantize_int8

SCHEMES = ("int8", "int4", "q8_0", "q4_0")  # the last two: llama.cpp's blocks (qwen/blocklinear.py)
GROUPS = (32, 64, 128, 256)  # the group sizes torch's int4 kernel takes
KERNEL_DTYPES = (torch.bfloat16,)  # x in bf16: measured below; fp32 activations take the dequantized path
# From PACKED_ROWS rows on (a prompt), dequantizing a block of the weight and calling F.linear beat the packed
# kernel, which reads the whole weight again for every few rows. Measured (torch 2.13, AVX2 CPU, one thread,
# 16,384 × 1,024 weight, bf16 x, ms): rows 1: F.linear bf16 4.2, int8 3.4, int4 2.9; with fp32 x: int8 47, int4
# 55. Rows 32: int8 96 / dequantized 126; rows 64: 212 / 250; rows 128: 428 / 237 (int4 384 / 323).
PACKED_ROWS = 96
# Without a kernel every product is `dequantized_product`. Measured (torch 2.13, 2-core AMD EPYC with AVX2, one
# thread, fp32 16,384 × 1,024 weight, one row, best of 7, three runs on a shared machine): F.linear 5.5-6.4 ms,
# int8 dequantized 41-76 ms (7-14×), int4 124-154 ms (22-25×): what `slow_note` warns of.
BLOCK = 2 ** 22  # weight elements dequantized at once (16 MiB in fp32)


def check_scheme(scheme):
    """`scheme` if it is one of SCHEMES, else one clear error: what every door a scheme comes in checks first."""
    if scheme not in SCHEMES:
        raise ValueError(tr(f"quantization scheme {scheme!r}: use one of {', '.join(SCHEMES)}",
                            f"量化方案 {scheme!r}：请用 {', '.join(SCHEMES)} 之一"))
    return scheme


def has_kernel(scheme, device, dtype):
    """Does torch have a packed product for this scheme on `device` with `dtype` activations? Capabilities only."""
    op = "_weight_int8pack_mm" if scheme == "int8" else "_weight_int4pack_mm_for_cpu"
    return device.type == "cpu" and dtype in KERNEL_DTYPES and hasattr(torch.ops.aten, op)


def held_as(scheme, in_features, group=32):
    """The scheme a weight of `in_features` inputs is held in: `scheme`, except int4 where the inputs do not cut
    into whole groups of `group`: int8 per output channel then (the module docstring says why). The shape alone
    decides, so the live model and the teaching model choose alike on every machine."""
    if scheme in ("q8_0", "q4_0") and in_features % 32:  # llama.cpp's blocks of 32 do not fit either
        return "int8"
    return "int8" if scheme == "int4" and in_features % group else scheme


def codes(w, scheme, group=32, dtype=torch.bfloat16, symmetric=False):
    """The stored form of one weight w (N, K): (q, s, z) with w ≈ q·s (int8: q int8 (N, K), s (N,), z None) or
    w ≈ (q − 8)·s + z (int4: q uint8 0..15 (N, K), s and z (N, K/g)); s and z rounded to `dtype`."""
    if scheme == "int8":
        q, s = quantize_int8(w)
        return q, s.to(dtype), None
    if symmetric:  # codes −7..7 shifted to 1..15, zero point 0
        q, s = quantize_int4(w, group)
        return (q + 8).to(torch.uint8), s.to(dtype), torch.zeros_like(s, dtype=dtype)
    q, s, m = quantize_int4_zero(w, group)
    return q, s.to(dtype), (m + 8 * s).to(dtype)


def dequantize(q, s, z):
    """The weight the codes stand for, in fp32: q·s per row (int8), or (q − 8)·s + z per group of inputs (int4).
    q (n, K); s (n,) or (n, K/g); z None or (n, K/g)."""
    if z is None:
        return q.float() * s.float()[:, None]
    n, G = s.shape
    x = (q.float() - 8).reshape(n, G, -1) * s.float()[..., None] + z.float()[..., None]  # (n, G, g)
    return x.flatten(1)


def two_per_byte(q):
    """4-bit codes (N, K) -> bytes (N, K/2), row-major: input 2j in the low half of byte j, 2j+1 in the high."""
    return q[:, 0::2] | q[:, 1::2] << 4


def one_per_byte(b):
    """two_per_byte undone: bytes (..., K/2) -> codes (..., K)."""
    return torch.stack([b & 15, b >> 4], dim=-1).flatten(-2)


class QuantLinear(nn.Module):
    """x Wᵀ with W held as codes: the packed kernel where `has_kernel` (and fewer than PACKED_ROWS rows, when a
    row-major copy exists for the others: `packs`), else `dequantized_product`. `sizes`, `joins`: a Joined's
    projections, whose outputs are returned split, as Joined returns them. rows: keep a row-major copy (the embedding
    reads it). `asked` is the scheme asked for, `scheme` the one the weight is held in (`held_as`)."""

    def __init__(self, linear, scheme, group=32, symmetric=False, packing=True, rows=False):
        super().__init__()
        w = linear.weight.detach()  # (N, K)
        self.out_features, self.in_features = w.shape
        self.asked, self.scheme = scheme, held_as(scheme, self.in_features, group)
        self.group, self.sizes = group, getattr(linear, "sizes", None)
        self.joins = getattr(linear, "joins", None)  # a Joined's projection names (qwen/speculative.py reads them)
        self.widen, self.dtype = getattr(linear, "widen", False), w.dtype
        q, s, z = codes(w, self.scheme, group, w.dtype, symmetric)
        self.kernel = packing and has_kernel(self.scheme, w.device, w.dtype) and (self.scheme == "int8" or
                                                                                   group in GROUPS)
        # One copy of everything: q serves every int8 path; int4 keeps its scales and zero points in the kernel's
        # layout where the kernel runs (rows read from there), as (N, K/g) tensors where it does not.
        self.register_buffer("q", None)  # row-major codes: int8 (N, K), or int4 two per byte (N, K/2)
        self.register_buffer("tiled", None)  # int4 for the kernel: (N16, K/2), N padded to a multiple of 16
        self.register_buffer("scale", None)  # int8 (N,); int4 without the kernel (N, K/g)
        self.register_buffer("zero", None)  # int4 without the kernel (N, K/g)
        self.register_buffer("scales_and_zeros", None)  # int4 with the kernel: (K/g, N16, 2)
        if self.scheme == "int8":
            self.q, self.scale = q, s  # the int8 kernel reads the plain layout: one copy serves every path
        elif self.kernel:  # zero rows of padding: code 0, scale 0, zero 0 give the weight 0
            pad = -self.out_features % 16
            self.tiled = torch._convert_weight_to_int4pack_for_cpu(F.pad(q, (0, 0, 0, pad)).int(), 2)
            self.scales_and_zeros = F.pad(torch.stack([s.T, z.T], -1), (0, 0, 0, pad)).contiguous()
            self.q = two_per_byte(q) if rows else None
        else:
            self.q, self.scale, self.zero = two_per_byte(q), s, z

    def scales(self, rows):
        """(s, z) of `rows` (a slice or a tensor of row indices): s (n,) and z None (int8), or s and z (n, K/g)."""
        if self.scales_and_zeros is None:
            return self.scale[rows], None if self.zero is None else self.zero[rows]
        sz = self.scales_and_zeros[:, rows]  # (K/g, n, 2)
        return sz[..., 0].T, sz[..., 1].T

    def rows_of(self, index):
        """The weight's rows `index` (a slice within out_features, or a tensor of row numbers), dequantized in
        fp32 from the row-major codes: (n, K)."""
        q = self.q[index] if self.scheme == "int8" else one_per_byte(self.q[index])
        return dequantize(q, *self.scales(index))

    def weight_rows(self, i, j):
        """Rows i:j of the weight, dequantized in fp32 from the row-major codes."""
        return self.rows_of(slice(i, min(j, self.out_features)))  # the kernel's scales have padding rows beyond

    def packed_product(self, x):
        """x (M, K) in bf16 -> (M, N) by torch's packed kernel."""
        if self.scheme == "int8":
            return torch._weight_int8pack_mm(x, self.q, self.scale)
        y = torch._weight_int4pack_mm_for_cpu(x, self.tiled, self.group, self.scales_and_zeros)
        return y[:, :self.out_features]

    def dequantized_product(self, x):
        """x (M, K) -> (M, N) a block of rows at a time: the block dequantized, rounded to the model dtype (the
        teaching model's weight), and multiplied by F.linear; in fp32 when `widen` (as qwen/products.py widens)."""
        out, rows = x.new_empty(x.shape[0], self.out_features), max(1, BLOCK // self.in_features)
        xw = x.float() if self.widen else x
        for i in range(0, self.out_features, rows):
            W = self.weight_rows(i, i + rows).to(self.dtype)
            out[:, i:i + rows] = F.linear(xw, W.to(xw.dtype))
        return out

    def packs(self, rows):
        """Does a product of `rows` rows take the packed kernel? Where there is one: under PACKED_ROWS rows, or at
        any number when no row-major copy is held (int4's projections keep the tiled codes only)."""
        return self.kernel and (rows < PACKED_ROWS or self.q is None)

    def forward(self, x):  # x (..., K)
        x2 = x.reshape(-1, self.in_features).contiguous()  # the kernels take 2-D, contiguous rows
        y = (self.packed_product(x2) if self.packs(x2.shape[0]) else self.dequantized_product(x2))
        y = y.reshape(*x.shape[:-1], -1)
        return y if self.sizes is None else y.split(self.sizes, dim=-1)

    def extra_repr(self):
        how = tr(f"group {self.group}", f"每组 {self.group} 个") if self.scheme != "int8" else \
            tr("a scale per output channel", "每个输出通道一个缩放因子")
        if self.scheme != self.asked:
            how += tr(f" ({self.asked} asked: {self.in_features} inputs are not a multiple of the group {self.group})",
                      f"（要的是 {self.asked}：{self.in_features} 个输入不是组大小 {self.group} 的倍数）")
        product = tr("packed kernel", "打包 kernel") if self.kernel else \
            tr("dequantized F.linear", "反量化后用 F.linear")
        return tr(", ", "，").join([f"{self.in_features} -> {self.out_features}", self.scheme, how, product])


class QuantEmbedding(nn.Module):
    """ids (B, T) -> vectors (B, T, d): the rows of a QuantLinear's row-major codes (or a BlockLinear's blocks,
    qwen/blocklinear.py), dequantized as they are read (the rows a prompt reads, not the table), rounded to the
    model dtype."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, ids):
        check_ids(ids, self.table.out_features)
        t, flat = self.table, ids.reshape(-1)
        return t.rows_of(flat).to(t.dtype).reshape(*ids.shape, -1)  # (B, T, d)
