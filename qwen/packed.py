"""A linear layer whose weight is packed once for the kernel that reads it at the memory's bandwidth.

A decode step multiplies one row, the new token's vector x (1, d_in), by every weight W (d_out, d_in): y = x Wᵀ.
Each weight is read once and each number of it is used once (two flops per number read), so the step is bound by
how fast the weights stream from memory, not by arithmetic (chapter 9). A general matrix-multiply kernel is built
for the other case, many rows: it copies blocks of W into a layout its inner loop likes (packing) and pays that
copy back by using each block for many rows. With one row there is nothing to pay it back: the kernel packs, or
walks W in an order its loads do not stream, on every call, and reads the weight at a fraction of the bandwidth
(here: torch's F.linear, fp32, one row of a 65,536 × 1,024 weight, 20 GB/s where a plain read runs at 32).

Prepacking moves that copy to load time. oneDNN (torch's CPU kernel library, `torch.ops.mkldnn`) reorders a
weight once into the blocked layout its inner-product kernel reads for a given number of rows
(`_reorder_linear_weight(W, rows)`), and `_linear_pointwise(x, packed, bias, "none", [], "")` multiplies any
number of rows by it with no copy of W at all: one stream over the weight per call. This is what torch's own
compiler does when it freezes a CPU model's weights. The products are the same; the kernel sums each row's
d_in products in its own order, so in fp32 a result may differ from F.linear's in the last bits (the bound is in
tests/test_packed.py); in bf16 both sum in fp32 and round once.

Where it applies is a capability, never a timing, so the numbers a learner gets do not depend on the load: a CPU
tensor, torch built with oneDNN and its two ops present, and a dtype oneDNN multiplies on this CPU (fp32 always;
bf16 only with the instructions oneDNN asks for: AVX-512 or AVX-NE-CONVERT on x86, `_is_mkldnn_bf16_supported`).
Elsewhere (a GPU, Apple's MPS, an older CPU's bf16) the layer calls plain F.linear, whose GPU kernels already
read at bandwidth.

The packed copy is a cache of `weight`, which stays the layer's parameter: what state_dict saves, what the tied
embedding looks up, what an experiment edits. Packed at load, packed again only when the weight changes (an edit in
place bumps its version counter, `.to()` gives it new storage), so a product never reads a stale copy. The cost is
the memory of a second copy of every packed weight (see `packed_bytes`); a weight that requires grad is never
packed from (the oneDNN op has no backward), so training through the layer stays plain F.linear.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

DECODE_ROWS = 1  # the rows the layout is chosen for: a decode step's one token (a prompt's product measured no slower)


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """Does this torch multiply a `dtype` weight on `device` with a oneDNN-packed copy? Capabilities only."""
    ops = torch.ops.mkldnn
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if not (hasattr(ops, "_reorder_linear_weight") and hasattr(ops, "_linear_pointwise")):
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and ops._is_mkldnn_bf16_supported())


def pack(W: torch.Tensor, rows: int = DECODE_ROWS) -> torch.Tensor:
    """W (d_out, d_in) reordered once into oneDNN's layout for products of `rows` rows: an opaque tensor of the same
    numbers, readable only by packed_product (or back with .to_dense())."""
    return torch.ops.mkldnn._reorder_linear_weight(W.detach(), rows)


def packed_product(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """x Wᵀ with W packed: x (..., d_in) -> (..., d_out), no bias, no activation after it."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


class PackedLinear(nn.Linear):
    """A projection (no bias) computing x Wᵀ from a packed copy of W where `can_pack` says so, F.linear elsewhere.
    `packing` switches it (load_fast sets it from the capability); `packed()` gives the copy a product reads."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features, bias=False)
        self.packing, self._packed, self._packed_from = False, None, None

    def packed(self):
        """The packed copy of the weight as it is now, or None where the plain product is taken."""
        W = self.weight
        if not self.packing or (W.requires_grad and torch.is_grad_enabled()) or not can_pack(W.device, W.dtype):
            return None
        now = (W.data_ptr(), W._version, W.dtype, W.shape)  # changed by an edit in place, a load, a .to()
        if self._packed_from != now:
            self._packed, self._packed_from = pack(W), now
        return self._packed

    def forward(self, x):  # x (..., d_in)
        packed = self.packed()
        return F.linear(x, self.weight) if packed is None else packed_product(x, packed)


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
