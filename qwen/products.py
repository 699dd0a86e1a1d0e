"""How a projection's product y = x Wᵀ is computed on this machine, chosen by what the machine can do.

Every projection of the model, the tied head included, is one product of the input rows x (rows, d_in) with a weight
W (d_out, d_in). The math is the same everywhere; what differs is the kernel, and the right kernel depends on the
number of rows and on the CPU. Three choices, all made from the machine's capabilities, never from a timing, so the
numbers a learner gets do not depend on the load:

1. Packed weights for few rows. A decode step multiplies one row by every weight: each number of W is read once and
   used once (two flops per number read), so the step is bound by how fast the weights stream from memory, not by
   arithmetic (chapter 9). A general matrix-multiply kernel is built for many rows: it copies blocks of W into a
   layout its inner loop likes (packing) and pays that copy back by using each block for many rows. With one row
   nothing pays it back: the kernel packs, or walks W in an order its loads do not stream, on every call. Prepacking
   moves that copy to load time. oneDNN (torch's CPU kernel library, `torch.ops.mkldnn`) reorders a weight once
   into the blocked layout its inner-product kernel reads (`_reorder_linear_weight(W, rows)`), and
   `_linear_pointwise(x, packed, bias, "none", [], "")` multiplies any number of rows by it with no copy of W: one
   stream over the weight per call. This is what torch's own compiler does when it freezes a CPU model's weights.
   The kernel sums each row's d_in products in its own order, so in fp32 a result may differ from F.linear's in the
   last bits (the bound is in tests/test_packed.py); in bf16 both sum in fp32 and round once. It applies to a CPU
   tensor, with torch built with oneDNN and its two ops present, in a dtype oneDNN multiplies on this CPU (`can_pack`:
   fp32 always; bf16 only with the instructions oneDNN asks for, AVX-512 or AVX-NE-CONVERT on x86). Elsewhere (a
   GPU, Apple's MPS, bf16 on an older CPU) the layer calls plain F.linear; GPU kernels already read at bandwidth.
2. Widened bf16 products for many rows (`widen`): on a CPU without bf16 instructions a bf16 product with many rows
   runs several times slower than an fp32 one. The products are the same (bf16 × bf16 is exact in fp32) and summed
   in fp32 either way; only the order of the sums may differ. A prompt's products are widened where the CPU lacks
   them (`bf16_is_native`); a weight is widened a block of rows at a time (the 0.8B's head would be 1 GB in fp32).
   One row (decode) stays in bf16: it is bound by memory, and bf16 is half the bytes.
3. One bf16 row by hand (`hand_rows`): where chapter 13's C++ is built with the CPU's bf16 dot instruction (x86's
   AVX-512 bf16), a bf16 product of one row reads the weight itself with it (qwen/csrc/bf16rows.cpp), not the packed
   copy. On an idle machine both stream the weight at about the read bandwidth; but on a CPU with AMX oneDNN takes
   its AMX kernel for one row too, which lost half its speed and more whenever other programs shared the machine (a
   bf16 decode at 5 tokens/s where oneDNN held to AVX-512 ran at 9, llama.cpp at 10). The hand dot sums in its own
   order (an fp32 sum rounded once; a row's bits the same in any batch), so a one-row decode may differ from
   transformers' in the last bf16 bit of a few outputs (tests/test_fast.py bounds it). From two rows on the packed
   copy is read: measured faster there (HAND_ROWS).

The packed copy is a cache of `weight`, which stays the layer's parameter, packed at load and again only when the
weight changes (an edit in place bumps its version counter, `.to()` gives it new storage), so a product never reads
a stale copy. Why keep the parameter, at the memory of a second copy of every packed weight (`packed_bytes`; the
0.8B in fp32: 3.0 GB beside 3.0 GB)? The tied head's weight is the embedding table, which the lookup indexes. Every
other weight is what state_dict saves and load_state_dict fills, what `.to()` moves and packs again from, what a
widened prompt product reads block by block, and what the proofs read by checkpoint name (book.diff, the exercises'
judge); an opaque oneDNN tensor does none of these (only `.to_dense()` gives its numbers back, as a new copy).
Where memory is short, `load_fast(..., packing=False)` holds one copy. A weight that requires grad is never packed
from under autograd (the oneDNN op has no backward), so training through the layer stays plain F.linear.
"""
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen import kernel
from qwen.lang import tr
from qwen.model import Qwen35
from qwen.quantized import products
from qwen.quantlinear import PACKED_ROWS

DECODE_ROWS = 1  # the rows the packed layout is chosen for: a decode step's one token
HAND_ROWS = 1  # bf16 products of up to this many rows take chapter 13's bf16 dot where it is built (`hand_rows`)
WIDE_ROWS = 16  # from this many rows on, a widened bf16 product beat a bf16 one (measured on a 2-core AMD EPYC)
BLOCK = 2 ** 22  # elements of a weight widened at once (16 MiB in fp32)
NATIVE_FLAGS = {torch.bfloat16: ("avx512_bf16", "amx_bf16", "bf16"), torch.float16: ("avx512_fp16", "amx_fp16")}


def cpu_flags() -> set[str]:
    """The instruction sets this CPU reports (Linux: /proc/cpuinfo); empty where the file does not exist."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    return {flag for line in lines if line.startswith(("flags", "Features")) for flag in line.split(":")[1].split()}


def bf16_is_native(device: torch.device, dtype: torch.dtype) -> bool:
    """Does `device` multiply `dtype` matrices with instructions of their own? Always on a GPU; on a CPU when it
    reports them (x86: avx512_bf16 or AMX, ARM: bf16). Without them a many-row product is emulated, slowly."""
    if device.type != "cpu" or dtype == torch.float32:
        return True
    return bool(cpu_flags() & set(NATIVE_FLAGS.get(dtype, ())))


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """Does this torch multiply a `dtype` weight on `device` with a oneDNN-packed copy? Capabilities only."""
    ops = torch.ops.mkldnn
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and ops._is_mkldnn_bf16_supported())


def widens(x, widen):
    """Is the product of x (..., d_in) widened: `widen` on and WIDE_ROWS rows or more?"""
    return widen and x.numel() >= WIDE_ROWS * x.shape[-1]


def product(x, W, widen):
    """x Wᵀ; widened (see `widens`): computed in fp32 a block of W's rows at a time and rounded back to x's dtype
    block by block."""
    if not widens(x, widen):
        return F.linear(x, W)
    out, xf, rows = x.new_empty(*x.shape[:-1], W.shape[0]), x.float(), max(1, BLOCK // W.shape[1])
    for i in range(0, W.shape[0], rows):
        out[..., i:i + rows] = F.linear(xf, W[i:i + rows].float())
    return out


def pack(W: torch.Tensor, rows: int = DECODE_ROWS) -> torch.Tensor:
    """W (d_out, d_in) reordered once into oneDNN's layout for products of `rows` rows: an opaque tensor of the same
    numbers, readable only by packed_product (or back with .to_dense())."""
    return torch.ops.mkldnn._reorder_linear_weight(W.detach(), rows)


def packed_product(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """x Wᵀ with W packed: x (..., d_in) -> (..., d_out), no bias, no activation after it."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def hand_rows(x: torch.Tensor) -> bool:
    """Does a packed product of x take chapter 13's bf16 dot on the weight itself instead: x bf16, at most HAND_ROWS
    rows, and the kernel built with the CPU's bf16 dot instruction (qwen/csrc/bf16rows.cpp)?"""
    return x.dtype == torch.bfloat16 and x.numel() <= HAND_ROWS * x.shape[-1] and kernel.bf16_rows_run()


def read_product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x Wᵀ from what PackedLinear.reads gave: a packed copy (oneDNN), or the bf16 weight itself (chapter 13's dot)."""
    return packed_product(x, w) if w.is_mkldnn else kernel.bf16_rows(x, w)


class PackedLinear(nn.Linear):
    """A projection (no bias) computing x Wᵀ from a packed copy of W where `can_pack` says so (one bf16 row: from W
    itself, `hand_rows`), F.linear elsewhere. `packing` switches it (load_fast sets it from the capability);
    `packed()` gives the copy, `reads(x)` what the product of x reads."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features, bias=False)
        self.packing, self._packed, self._packed_from = False, None, None

    def packed(self):
        """The packed copy of the weight as it is now, or None where the plain product is taken."""
        W = self.weight
        if not self.packing or (W.requires_grad and torch.is_grad_enabled()):
            return None
        now = (W.data_ptr(), W._version, W.dtype, W.shape)  # changed by an edit in place, a load, a .to()
        if self._packed_from != now:  # the capability is asked when a copy is to be made, not at every product
            if not can_pack(W.device, W.dtype):
                return None
            self._packed, self._packed_from = pack(W), now
        return self._packed

    def reads(self, x):
        """What the product of x reads: the weight itself where chapter 13's bf16 dot takes it (`hand_rows`), else
        the packed copy, or None where the plain product is taken."""
        packed = self.packed()
        return self.weight if packed is not None and hand_rows(x) else packed

    def forward(self, x):  # x (..., d_in)
        w = self.reads(x)
        return F.linear(x, self.weight) if w is None else read_product(x, w)


def pack_all(model: nn.Module, on: bool = True) -> nn.Module:
    """Switch packing on (or off) for every PackedLinear of `model`, packing each weight now, not in the first step."""
    for m in model.modules():
        if isinstance(m, PackedLinear):
            m.packing, m._packed, m._packed_from = bool(on), None, None  # a copy made before is dropped
            m.packed()
    return model


def packed_bytes(model: nn.Module) -> int:
    """Bytes held by the packed copies (a second copy of each packed weight, beside the parameter)."""
    return sum(m.weight.numel() * m.weight.element_size() for m in model.modules()
               if isinstance(m, PackedLinear) and m._packed is not None)


def numerics(model: Qwen35) -> str:
    """One line for the chat and the bench: how a fast model's (qwen/fast.py) products are computed here, and why:
    its dtype, whether prompt products are widened to fp32, whether projections read packed weights (and one bf16 row
    chapter 13's dot, `hand_rows`); for a quantized model, which product each number of rows takes
    (`quantized_paths`)."""
    p = model.norm.weight  # the model dtype (a quantized model's embedding holds codes)
    dtype, capability = str(p.dtype).removeprefix("torch."), torch.backends.cpu.get_cpu_capability()
    native = tr("yes", "是") if bf16_is_native(p.device, p.dtype) else tr("no", "否")
    head = tr(f"{dtype} on {p.device} (CPU capability {capability}, native {dtype} products: {native}); ",
              f"{dtype}，在 {str(p.device).upper()} 上（CPU 指令集 {capability}，原生 {dtype} 乘法：{native}）；")
    if getattr(model, "quant", None):  # set by qwen/quantized.py's quantize_model
        return head + quantized_paths(model)
    how = tr("widened to fp32 (exact products, fp32 sums)", "提升到 fp32 计算（乘积精确，fp32 累加）") if model.widen \
        else tr(f"in {dtype}", f"用 {dtype} 计算")
    gb = packed_bytes(model) / 1e9
    packed = tr(f"oneDNN-packed ({gb:.2f} GB of packed copies)", f"oneDNN 预打包的权重（打包副本 {gb:.2f} GB）") if gb \
        else "F.linear"
    hand = gb and hand_rows(p[None])  # one row of the model's dtype
    one_row = tr("; one-row products (decode): chapter 13's bf16 dot, qwen/csrc/bf16rows.cpp",
                 "；单行乘法（解码）：第 13 章的 bf16 点积，qwen/csrc/bf16rows.cpp") if hand else ""
    return head + tr(f"prompt products {how}; projections {packed}{one_row}",
                     f"提示词的矩阵乘法{how}；投影用 {packed}{one_row}")


def quantized_paths(model: Qwen35) -> str:
    """Which product a quantized model's projections take, read from the layers themselves (QuantLinear.packs, the
    test forward runs): with fewer than PACKED_ROWS rows (decode, a short prompt) and with more, each either the
    packed kernel (bf16 activations times the codes, float sums) or a block of the weight dequantized to the model
    dtype and F.linear (widened to fp32 where the layer widens)."""
    layers = products(model)
    m = layers[0]
    dtype = str(m.dtype).removeprefix("torch.")
    widened = tr("widened to fp32", "提升到 fp32 后调用") if m.widen else tr(f"in {dtype}", f"用 {dtype} 调用")
    quant = str(model.quant)
    if quant in ("q8_0", "q4_0"):
        kernel = tr(f"the C++ kernel (the activation rounded to Q8_0 × {quant.upper()} blocks, integer sums "
                    "per block)", f"本课程的 C++ kernel（激活舍入成 Q8_0，乘 {quant.upper()} 块，每块整数累加）")
        dequantized = tr("round the input to Q8_0, dequantize a block of the weight to fp32, then call F.linear",
                         "先把输入舍入成 Q8_0、把一块权重反量化成 fp32，再调用 F.linear")
    else:
        kernel = tr(f"the packed kernel ({dtype} activations × {quant} codes, float sums)",
                    f"打包 kernel（{dtype} 激活乘 {quant} 码，浮点累加）")
        dequantized = tr(f"dequantize a block of the weight to {dtype}, then call F.linear {widened}",
                         f"先把一块权重反量化成 {dtype}，再{widened} F.linear")

    def split(rows):
        k, n = sum(m.packs(rows) for m in layers), len(layers)
        if k == n:
            return tr(f"all {n} by {kernel}", f"{n} 个全用{kernel}")
        if k == 0:
            return tr(f"all {n} {dequantized}", f"{n} 个全都{dequantized}")
        return tr(f"{k} of {n} by {kernel}, {n - k} {dequantized}", f"{n} 个中 {k} 个用{kernel}，"
                                                                   f"{n - k} 个{dequantized}")
    short, long = split(1), split(PACKED_ROWS)
    if short == long:
        return tr(f"products of any number of rows: {short}", f"任意行数的矩阵乘法：{short}")
    return tr(f"products of under {PACKED_ROWS} rows (decode, a short prompt): {short}; of {PACKED_ROWS} rows or "
              f"more: {long}",
              f"不到 {PACKED_ROWS} 行的矩阵乘法（解码、短提示词）：{short}；{PACKED_ROWS} 行及以上：{long}")
