"""The quantized live model: projections that hold int8 or int4 codes and multiply with them directly.

A decode step reads every weight once per token (chapter 9), so its time is the weights' bytes over the memory's
bandwidth: a weight held in 8 bits instead of bf16's 16 is read in half the time, in 4 bits in a quarter. Here the
fast model's projections (the joined ones included) and the tied head keep the codes of qwen/quant.py and call
torch's packed CPU kernels, which read the codes and apply the scales inside the product, so no bf16 copy of the
weight is ever made:

    int8  per output channel (quantize_int8):    y = (x · q) · s                  q int8 (N, K), s (N,)
    int4  groups of g inputs, with a zero point:  w = (q − 8) · s + z             q 0..15, s and z (K/g, N)

where z = m + 8·s turns qwen/quant.py's w = q·s + m into the kernel's form (symmetric int4 is the same kernel
with codes q + 8 and z = 0). The scales and zero points are stored in the model dtype: those rounded values ARE
the model's numbers, and `fake_quantize` puts exactly them into a teaching model, the same weights written out.

The kernels are for bf16 activations: with fp32 ones torch takes a slow path (measured below), so an fp32 model,
a GPU or Apple's MPS dequantize a block of rows and call F.linear (`dequantized_product`). Which path runs is a
capability (device, dtype, the op present), never a timing. The embedding lookup dequantizes only the rows it
reads: int8 shares the head's codes; int4's kernel layout is tiled (rows interleaved in blocks that depend on the
CPU), so a row cannot be read from it and the table keeps a row-major copy of its codes, two per byte (V·d/2
bytes: 127 MB for the real Qwen3.5-0.8B's 248,320 × 1,024 table), which the head's many-row products use too.
"""
from typing import TypeVar

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.embedding import check_ids
from qwen.lang import tr
from qwen.model import Qwen35
from qwen.quant import quantize_int4, quantize_int4_zero, quantize_int8

M = TypeVar("M", bound=nn.Module)  # the model given is the model returned, changed in place

SCHEMES = ("int8", "int4")
GROUPS = (32, 64, 128, 256)  # the group sizes torch's int4 kernel takes
KERNEL_DTYPES = (torch.bfloat16,)  # x in bf16: measured below; fp32 activations take the dequantized path
# From PACKED_ROWS rows on (a prompt), dequantizing a block of the weight and calling F.linear beat the packed
# kernel, which reads the whole weight again for every few rows. Measured (torch 2.13, AVX2 CPU, one thread,
# 16,384 × 1,024 weight, bf16 x, ms): rows 1: F.linear bf16 4.2, int8 3.4, int4 2.9; with fp32 x: int8 47, int4
# 55. Rows 32: int8 96 / dequantized 126; rows 64: 212 / 250; rows 128: 428 / 237 (int4 384 / 323).
PACKED_ROWS = 96
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
    row-major copy exists for the others), else `dequantized_product`. `sizes`: a Joined's projections, whose
    outputs are returned split, as Joined returns them. rows: keep a row-major copy (the embedding reads it)."""

    def __init__(self, linear, scheme, group=32, symmetric=False, packing=True, rows=False):
        super().__init__()
        w = linear.weight.detach()  # (N, K)
        self.scheme, self.group, self.sizes = scheme, group, getattr(linear, "sizes", None)
        self.out_features, self.in_features = w.shape
        self.widen, self.dtype = getattr(linear, "widen", False), w.dtype
        q, s, z = codes(w, scheme, group, w.dtype, symmetric)
        self.kernel = packing and has_kernel(scheme, w.device, w.dtype) and (scheme == "int8" or group in GROUPS)
        self.register_buffer("q", None)  # row-major codes: int8 (N, K), or int4 two per byte (N, K/2)
        self.register_buffer("tiled", None)  # int4 for the kernel: (N16, K/2), N padded to a multiple of 16
        self.register_buffer("scale", s)  # int8 (N,); int4 (N, K/g)
        self.register_buffer("zero", z)  # int4 (N, K/g)
        self.register_buffer("scales_and_zeros", None)  # the int4 kernel's (K/g, N16, 2)
        if scheme == "int8":
            self.q = q  # the int8 kernel reads the plain layout: one copy serves every path
        else:
            if rows or not self.kernel:
                self.q = two_per_byte(q)
            if self.kernel:  # zero rows of padding: code 0, scale 0, zero 0 give the weight 0
                pad = -self.out_features % 16
                self.tiled = torch._convert_weight_to_int4pack_for_cpu(F.pad(q, (0, 0, 0, pad)).int(), 2)
                self.scales_and_zeros = F.pad(torch.stack([s.T, z.T], -1), (0, 0, 0, pad)).contiguous()

    def weight_rows(self, i, j):
        """Rows i:j of the weight, dequantized in fp32 from the row-major codes."""
        q = self.q[i:j] if self.scheme == "int8" else one_per_byte(self.q[i:j])
        return dequantize(q, self.scale[i:j], None if self.zero is None else self.zero[i:j])

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

    def forward(self, x):  # x (..., K)
        x2 = x.reshape(-1, self.in_features).contiguous()  # the kernels take 2-D, contiguous rows
        packed = self.kernel and (x2.shape[0] < PACKED_ROWS or self.q is None)  # int4 may keep the tiled copy only
        y = (self.packed_product(x2) if packed else self.dequantized_product(x2)).reshape(*x.shape[:-1], -1)
        return y if self.sizes is None else y.split(self.sizes, dim=-1)

    def extra_repr(self):
        how = tr(f"group {self.group}", f"每组 {self.group} 个") if self.scheme != "int8" else \
            tr("a scale per output channel", "每个输出通道一个缩放因子")
        product = tr("packed kernel", "打包 kernel") if self.kernel else \
            tr("dequantized F.linear", "反量化后用 F.linear")
        return tr(", ", "，").join([f"{self.in_features} -> {self.out_features}", self.scheme, how, product])


class QuantEmbedding(nn.Module):
    """ids (B, T) -> vectors (B, T, d): the rows of a QuantLinear's row-major codes, dequantized as they are read
    (the rows a prompt reads, not the table), rounded to the model dtype."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, ids):
        check_ids(ids, self.table.out_features)
        t, flat = self.table, ids.reshape(-1)
        q = t.q[flat] if t.scheme == "int8" else one_per_byte(t.q[flat])  # (B·T, d)
        rows = dequantize(q, t.scale[flat], None if t.zero is None else t.zero[flat])
        return rows.to(t.dtype).reshape(*ids.shape, -1)


def projections(model):
    """(parent, name, linear) for every projection of the decoder layers: the joined ones included."""
    return [(parent, name, m) for parent in model.layers.modules() for name, m in parent.named_children()
            if isinstance(m, nn.Linear)]


@torch.no_grad()
def quantize_model(model: M, scheme: str, group: int = 32, symmetric: bool = False, packing: bool = True) -> M:
    """The fast model (qwen/fast.py), in place: every projection and the head hold codes (QuantLinear), the
    embedding reads its rows from codes (QuantEmbedding: the head's when tied). Norms, A_log, dt_bias and the conv
    stay in the model dtype. symmetric: int4 without a zero point. packing=False: the dequantized path only."""
    check_scheme(scheme)
    tied = model.get_parameter("lm_head.weight") is model.get_parameter("embed_tokens.weight")
    for parent, name, linear in projections(model):
        setattr(parent, name, QuantLinear(linear, scheme, group, symmetric, packing))
    model.lm_head = QuantLinear(model.lm_head, scheme, group, symmetric, packing, rows=tied)
    table = model.lm_head if tied else QuantLinear(model.embed_tokens, scheme, group, symmetric, False)
    model.embed_tokens = QuantEmbedding(table)
    model.quant = scheme  # type: ignore[assignment]  # (torch types a module attribute as a Tensor or a Module)
    return model


def describe(model: nn.Module) -> str | None:
    """One line for the chat: the scheme, which product the projections call, and the bytes the codes and scales
    take against the same weights in the model dtype."""
    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    if not layers:
        return None
    m, packed = layers[0], sum(m.kernel for m in layers)
    held = sum(b.numel() * b.element_size() for m in layers for b in m.buffers()) / 2 ** 20
    plain = sum(m.out_features * m.in_features * m.dtype.itemsize for m in layers) / 2 ** 20
    dtype = str(m.dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float32", "fp32")
    if m.scheme == "int8":
        how = tr("int8 per output channel", "int8，每个输出通道一个缩放因子")
    else:
        how = tr(f"int4 in groups of {m.group} inputs", f"int4，每 {m.group} 个输入一组")
    n = len(layers)
    return tr(f"{how}: {n} products (the head included), {packed} by a packed kernel, {n - packed} dequantized "
              f"then F.linear; the embedding dequantizes the rows it reads; codes and scales {held:.1f} MiB "
              f"(the same weights in {dtype}: {plain:.1f} MiB)",
              f"{how}：{n} 个矩阵乘法（含输出头），{packed} 个用打包 kernel，{n - packed} 个先反量化再用 F.linear；"
              f"嵌入只反量化读到的行；码和缩放因子共 {held:.1f} MiB（同样的权重存成 {dtype}：{plain:.1f} MiB）")


@torch.no_grad()
def fake_quantize(model: Qwen35, scheme: str, group: int = 32, symmetric: bool = False,
                  scale_dtype: torch.dtype | None = None) -> Qwen35:
    """A teaching model (qwen/model.py), in place: each projection's, the head's and the embedding's weight
    replaced by the weight its codes stand for (`codes` then `dequantize`, rounded to the model dtype): the same
    numbers quantize_model's model computes with, written out as ordinary weights. scale_dtype: the scales' dtype
    (default the model's): a bf16 model's codes and scales, written exactly into an fp32 model, give the numbers
    the packed kernels compute with, unrounded."""
    check_scheme(scheme)
    weights = {id(m.weight): m.weight for *_, m in projections(model)}
    weights.update({id(p): p for p in (model.lm_head.weight, model.embed_tokens.weight)})  # tied: one tensor
    for w in weights.values():
        w.copy_(dequantize(*codes(w, scheme, group, scale_dtype or w.dtype, symmetric)).to(w.dtype))
    return model
