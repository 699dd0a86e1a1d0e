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

A weight whose input width K is not a multiple of the group (a DeltaNet value width of 144 makes out_proj's K 144,
not a multiple of 32) cannot be cut into int4 groups. It is held as int8 per output channel instead (`held_as`):
that fits any width (one scale per row, no groups), has a packed kernel of its own (the same decode path, the
same bf16 activations), and is finer than int4, so the exception costs bytes (8 bits a weight instead of 4.5),
never quality. bf16 would fit too, at twice int8's bytes for nothing a quantized model asks for. The choice
depends on the weight's shape alone, so `fake_quantize` makes the same one, and `describe` names the tensors.

The kernels are for bf16 activations on a CPU: with fp32 ones torch takes a slow path (measured below), and a GPU
or Apple's MPS has no such op, so there a block of rows is dequantized and F.linear called
(`dequantized_product`). That writes and reads the block in the model dtype beside reading the codes: more bytes
than the plain weight, so decoding is slower than without quantization, and the codes only save memory (`notes`
says so when the model is built). Which path runs is a capability (device, dtype, the op present), never a
timing. The embedding lookup dequantizes only the rows it reads: int8 shares the head's codes; int4's kernel
layout is tiled (rows interleaved in blocks that depend on the CPU), so a row cannot be read from it and the table
keeps a row-major copy of its codes, two per byte (V·d/2 bytes: 127 MB for the real Qwen3.5-0.8B's 248,320 ×
1,024 table), which the head's many-row products use too. Scales and zero points are held once: in the int4
kernel's layout where it runs (rows read from there), as (N, K/g) tensors elsewhere.
"""
import re
from collections.abc import Callable
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
# Without a kernel every product is `dequantized_product`. Measured (torch 2.13, 2-core AMD EPYC with AVX2, one
# thread, fp32 16,384 × 1,024 weight, one row, best of 7, three runs on a shared machine): F.linear 5.5-6.4 ms,
# int8 dequantized 41-76 ms (7-14×), int4 124-154 ms (22-25×): what `slow_note` warns of.
BLOCK = 2 ** 22  # weight elements dequantized at once (16 MiB in fp32)
Selector = Callable[[str], bool]  # a parameter name ("layers.0.mlp.down_proj.weight") -> quantize it?


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
    row-major copy exists for the others: `packs`), else `dequantized_product`. `sizes`: a Joined's projections,
    whose outputs are returned split, as Joined returns them. rows: keep a row-major copy (the embedding reads it).
    `asked` is the scheme asked for, `scheme` the one the weight is held in (`held_as`)."""

    def __init__(self, linear, scheme, group=32, symmetric=False, packing=True, rows=False):
        super().__init__()
        w = linear.weight.detach()  # (N, K)
        self.out_features, self.in_features = w.shape
        self.asked, self.scheme = scheme, held_as(scheme, self.in_features, group)
        self.group, self.sizes = group, getattr(linear, "sizes", None)
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

    def weight_rows(self, i, j):
        """Rows i:j of the weight, dequantized in fp32 from the row-major codes."""
        j = min(j, self.out_features)  # the kernel's scales have padding rows beyond the last
        q = self.q[i:j] if self.scheme == "int8" else one_per_byte(self.q[i:j])
        return dequantize(q, *self.scales(slice(i, j)))

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
    """ids (B, T) -> vectors (B, T, d): the rows of a QuantLinear's row-major codes, dequantized as they are read
    (the rows a prompt reads, not the table), rounded to the model dtype."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, ids):
        check_ids(ids, self.table.out_features)
        t, flat = self.table, ids.reshape(-1)
        q = t.q[flat] if t.scheme == "int8" else one_per_byte(t.q[flat])  # (B·T, d)
        return dequantize(q, *t.scales(flat)).to(t.dtype).reshape(*ids.shape, -1)


def projections(model):
    """(name, parent, attribute, linear) for every projection of the decoder layers, the joined ones included;
    name as named_modules gives it ("layers.0.mlp.down_proj")."""
    return [(f"{prefix}.{attr}", parent, attr, m) for prefix, parent in model.layers.named_modules(prefix="layers")
            for attr, m in parent.named_children() if isinstance(m, nn.Linear)]


def selected(only: Selector | None, names: list[str], whole: bool = False) -> bool:
    """Does `only` choose the tensor known by `names` (None chooses every one)? A tied tensor (the head and the
    embedding) is chosen by either of its names. whole: the names are the parts of one joined matrix of the fast
    model, which is held one way: all of them chosen, or none."""
    if only is None:
        return True
    said = [bool(only(name)) for name in names]
    if whole and any(said) and not all(said):
        parts = ", ".join(n for n, yes in zip(names, said) if yes)
        rest = ", ".join(n for n, yes in zip(names, said) if not yes)
        raise ValueError(tr(f"the selector chooses {parts} but not {rest}: the fast model holds them as one matrix; "
                            "choose all of them or none",
                            f"选择器选中了 {parts}，却没选 {rest}：快速模型把它们存成同一个矩阵；要么全选，要么都不选"))
    return any(said)


def joined_names(name, linear):
    """The parameter names a projection of the fast model stands for: a Joined's parts (siblings named by its
    `joins`, as in the checkpoint and the teaching model), else its own weight's."""
    joins = getattr(linear, "joins", None)
    parent = name.rpartition(".")[0]
    return [f"{parent}.{part}.weight" for part in joins] if joins else [f"{name}.weight"]


@torch.no_grad()
def quantize_model(model: M, scheme: str, group: int = 32, symmetric: bool = False, packing: bool = True,
                   only: Selector | None = None) -> M:
    """The fast model (qwen/fast.py), in place: every projection and the head hold codes (QuantLinear), the
    embedding reads its rows from codes (QuantEmbedding: the head's when tied). Norms, A_log, dt_bias and the conv
    stay in the model dtype. symmetric: int4 without a zero point. packing=False: the dequantized path only.
    only: quantize only the tensors whose parameter name it chooses (`selected`), as `fake_quantize` does."""
    check_scheme(scheme)
    tied = model.get_parameter("lm_head.weight") is model.get_parameter("embed_tokens.weight")
    for name, parent, attr, linear in projections(model):
        if selected(only, joined_names(name, linear), whole=True):
            setattr(parent, attr, QuantLinear(linear, scheme, group, symmetric, packing))
    head = selected(only, ["lm_head.weight", "embed_tokens.weight"] if tied else ["lm_head.weight"])
    if head:
        model.lm_head = QuantLinear(model.lm_head, scheme, group, symmetric, packing, rows=tied)
    if tied and head:
        model.embed_tokens = QuantEmbedding(model.lm_head)
    elif not tied and selected(only, ["embed_tokens.weight"]):
        model.embed_tokens = QuantEmbedding(QuantLinear(model.embed_tokens, scheme, group, symmetric, False))
    model.quant = scheme  # type: ignore[assignment]  # (torch types a module attribute as a Tensor or a Module)
    return model


def products(model: nn.Module) -> list[QuantLinear]:
    """The QuantLinears that multiply: every one but an untied embedding's table, which is only read by rows."""
    embed = getattr(model, "embed_tokens", None)
    table = embed.table if isinstance(embed, QuantEmbedding) and embed.table is not model.lm_head else None
    return [m for m in model.modules() if isinstance(m, QuantLinear) and m is not table]


def held_bytes(model: nn.Module) -> int:
    """Bytes the codes, scales and zero points of every QuantLinear take (the embedding's table included)."""
    return sum(b.numel() * b.element_size() for m in model.modules() if isinstance(m, QuantLinear)
               for b in m.buffers())


def _where(model, kept):
    """'layers.*.linear_attn.out_proj (144 inputs, 3 layers)' for the QuantLinears `kept`: one entry per name with
    the layer number starred."""
    names = {m: re.sub(r"^layers\.\d+\.", "layers.*.", n) for n, m in model.named_modules() if m in kept}
    out = {}
    for m, name in names.items():
        out.setdefault(name, [m.in_features, 0])[1] += 1
    return [(name, k, n) for name, (k, n) in out.items()]


def fallback(model: nn.Module) -> tuple[str, str] | None:
    """(English, Chinese) clause naming the tensors held in another scheme than asked, and why; None if none."""
    kept = [m for m in model.modules() if isinstance(m, QuantLinear) and m.scheme != m.asked]
    if not kept:
        return None
    g, where = kept[0].group, _where(model, kept)
    en = ", ".join(f"{name} ({k} inputs, {n} {'layers' if n > 1 else 'layer'})" if name.startswith("layers.*")
                   else f"{name} ({k} inputs)" for name, k, n in where)
    zh = "，".join(f"{name}（{k} 个输入，{n} 层）" if name.startswith("layers.*") else f"{name}（{k} 个输入）"
                  for name, k, n in where)
    return (f"{len(kept)} held as int8 per output channel instead, their input width not a multiple of the group "
            f"{g}: {en}",
            f"其中 {len(kept)} 个改存为每个输出通道一个缩放因子的 int8，因为输入宽度不是组大小 {g} 的倍数：{zh}")


def describe(model: nn.Module) -> str | None:
    """One line for the chat: the scheme, which product the projections call, the tensors held in another scheme
    (`fallback`), and the bytes the codes and scales take against the same weights in the model dtype."""
    layers, every = products(model), [m for m in model.modules() if isinstance(m, QuantLinear)]
    if not every:
        return None
    m, packed, n = every[0], sum(m.kernel for m in layers), len(layers)
    held = held_bytes(model) / 2 ** 20
    plain = sum(m.out_features * m.in_features * m.dtype.itemsize for m in every) / 2 ** 20
    dtype = str(m.dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float32", "fp32")
    if m.asked == "int8":
        how = tr("int8 per output channel", "int8，每个输出通道一个缩放因子")
    else:
        how = tr(f"int4 in groups of {m.group} inputs", f"int4，每 {m.group} 个输入一组")
    head = isinstance(getattr(model, "lm_head", None), QuantLinear)
    other = fallback(model)
    en_other, zh_other = (f"; {other[0]}", f"；{other[1]}") if other else ("", "")
    embed = tr("; the embedding dequantizes the rows it reads", "；嵌入只反量化读到的行") \
        if isinstance(getattr(model, "embed_tokens", None), QuantEmbedding) else ""
    return tr(f"{how}: {n} products{' (the head included)' if head else ''}, {packed} by a packed kernel, "
              f"{n - packed} dequantized then F.linear{en_other}{embed}; codes and scales {held:.1f} MiB "
              f"(the same weights in {dtype}: {plain:.1f} MiB)",
              f"{how}：{n} 个矩阵乘法{'（含输出头）' if head else ''}，{packed} 个用打包 kernel，"
              f"{n - packed} 个先反量化再用 F.linear{zh_other}{embed}；码和缩放因子共 {held:.1f} MiB"
              f"（同样的权重存成 {dtype}：{plain:.1f} MiB）")


def slow_note(model: nn.Module) -> str | None:
    """One line where products have no packed kernel here: each dequantizes a block and calls F.linear, which
    reads more than the plain weight, so the codes save memory and cost speed. None where every product packs."""
    layers = products(model)
    slow = [m for m in layers if not m.kernel]
    if not slow:
        return None
    m = slow[0]
    device, dtype = next(m.buffers()).device, str(m.dtype).removeprefix("torch.")
    if not has_kernel(m.scheme, device, m.dtype):
        why = tr(f"torch has no packed {m.scheme} kernel for {dtype} on {device}",
                 f"torch 在 {str(device).upper()} 上没有 {dtype} 的打包 {m.scheme} kernel")
    elif m.scheme == "int4" and m.group not in GROUPS:
        why = tr(f"the int4 kernel takes groups of {', '.join(map(str, GROUPS))}, not {m.group}",
                 f"int4 kernel 只接受 {'、'.join(map(str, GROUPS))} 个一组，不接受 {m.group}")
    else:
        why = tr("packing is off", "打包已关闭")
    n = tr(f"{len(slow)} of {len(layers)} products", f"{len(layers)} 个矩阵乘法中有 {len(slow)} 个") \
        if len(slow) < len(layers) else tr("every product", "每个矩阵乘法")
    return tr(f"{why}: {n} dequantizes a block of the weight and calls F.linear, which reads more bytes than the "
              "plain weight; decoding is slower than without quantization, which here only saves memory",
              f"{why}：{n}都要先反量化一块权重再调用 F.linear，读的字节比不量化的权重还多；"
              "解码比不量化更慢，量化在这里只省内存")


def notes(model: nn.Module) -> list[str]:
    """What a user of the quantized model should hear once, when it is built: the tensors held in another scheme
    (`fallback`) and the cost of products without a kernel (`slow_note`); empty when neither applies."""
    other, slow, scheme = fallback(model), slow_note(model), getattr(model, "quant", None)
    said = [tr(f"{scheme}: {other[0]}", f"{scheme}：{other[1]}")] if other else []
    return said + ([slow] if slow else [])


@torch.no_grad()
def fake_quantize(model: Qwen35, scheme: str, group: int = 32, symmetric: bool = False,
                  scale_dtype: torch.dtype | None = None, only: Selector | None = None) -> Qwen35:
    """A teaching model (qwen/model.py), in place: each projection's, the head's and the embedding's weight
    replaced by the weight its codes stand for (`codes` then `dequantize`, rounded to the model dtype): the same
    numbers quantize_model's model computes with, written out as ordinary weights, each weight in the scheme the
    live model holds it in (`held_as`). scale_dtype: the scales' dtype (default the model's): a bf16 model's codes
    and scales, written exactly into an fp32 model, give the numbers the packed kernels compute with, unrounded.
    only: quantize only the weights whose parameter name it chooses, e.g. `only=lambda name: ".mlp." in name`
    (a tied head and embedding are one tensor, chosen by either name); the others stay bit for bit."""
    check_scheme(scheme)
    named = [(f"{name}.weight", m.weight) for name, *_, m in projections(model)]
    named += [("lm_head.weight", model.lm_head.weight), ("embed_tokens.weight", model.embed_tokens.weight)]
    weights: dict[int, tuple[torch.Tensor, list[str]]] = {}
    for name, w in named:  # tied: one tensor, two names
        weights.setdefault(id(w), (w, []))[1].append(name)
    for w, names in weights.values():
        if selected(only, names):
            held = held_as(scheme, w.shape[1], group)
            w.copy_(dequantize(*codes(w, held, group, scale_dtype or w.dtype, symmetric)).to(w.dtype))
    return model
