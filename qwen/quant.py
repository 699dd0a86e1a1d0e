"""Fewer bytes by hand: a weight stored as small integer codes times a shared scale, w ≈ q · s.

Decoding reads every weight once per token, so a weight held in 8 or 4 bits instead of bf16's 16 is read 2× or 4×
sooner. Each scheme picks how many weights share a scale (a whole output row, or a group of g inputs) and where the
codes sit: symmetric codes around zero (w ≈ q · s), or codes above the group's minimum (w ≈ q · s + m) that spend
all 16 levels of 4 bits on the range the group actually spans. The scales are paid for in bits too:
bits_per_weight counts them. llama.cpp's Q8_0 and Q4_0 (qwen/gguf_blocks.py) are the same ideas with g = 32.
All arithmetic is fp32; the codes are returned one per int8/uint8 element (packing two 4-bit codes in a byte is
how they are stored, not what they mean: qwen/gguf_blocks.py packs them).
"""
import torch

# llama.cpp's Q8_0 and Q4_0 are these ideas with g = 32 and fp16 scales, stored in its own byte layout: that is a
# file of its own, qwen/gguf_blocks.py, whose writer and reader are imported here so that qwen.quant holds every
# scheme of the chapter (tests/test_quant.py reads them all from it)
from qwen.gguf_blocks import from_gguf_bytes as from_gguf_bytes, gguf_bytes as gguf_bytes


def _safe(s: torch.Tensor) -> torch.Tensor:
    """s with its zeros replaced by 1: a row or group of zeros has scale 0, and w / 1 = 0 gives it the code 0."""
    return torch.where(s == 0, torch.ones_like(s), s)


# ---------------------------------------------------------------- int8, one scale per output channel

def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax int8 per output channel: s = max|w_row| / 127, q = round(w / s) in −127..127, so the row's
    largest weight lands on ±127 and no code is clipped. One scale per row: the row is one output's dot product, so
    a kernel sums x·q over the row and multiplies that sum by s once (torch's packed kernel sums in fp32; llama.cpp,
    which rounds x to 8 bits too, sums integers). w: (out, in). Returns q int8 (out, in), s (out,)."""
    w = w.float()
    s = w.abs().amax(dim=1) / 127  # (out,)
    q = torch.round(w / _safe(s)[:, None]).clamp(-127, 127)  # (out, in); |w / s| ≤ 127 already, clamp for rounding
    return q.to(torch.int8), s


def dequantize_int8(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """w ≈ q · s, row by row. q: (out, in) int8; s: (out,). Returns fp32 (out, in)."""
    return q.float() * s[:, None]


# ---------------------------------------------------------------- int4, one scale per group of g inputs

def _groups(w: torch.Tensor, g: int) -> torch.Tensor:
    """w (out, in) seen as (out, in / g, g): each row cut into groups of g consecutive inputs."""
    out, n = w.shape
    if n % g:
        raise ValueError(f"the input dimension {n} is not a multiple of the group size {g}")
    return w.float().reshape(out, n // g, g)


def quantize_int4(w: torch.Tensor, g: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-wise int4: s = max|w_group| / 7, q = round(w / s) in −7..7. The codes are signed because
    they ARE the multiples of the scale (code 0 is weight 0; the product needs no offset). Of 4 bits' −8..7, −8
    stays unused: with s = max / 8 the group's largest positive weight would need +8, which is not there (llama.cpp's
    Q4_0 spends −8 by taking s from the signed extreme, qwen/gguf_blocks.py). w: (out, in), in a multiple of g.
    Returns q int8 (out, in) in −7..7, s (out, in / g)."""
    x = _groups(w, g)  # (out, G, g)
    s = x.abs().amax(dim=-1) / 7  # (out, G)
    q = torch.round(x / _safe(s)[..., None]).clamp(-7, 7)  # (out, G, g); |x / s| ≤ 7, clamp for rounding
    return q.to(torch.int8).flatten(1), s


def dequantize_int4(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """w ≈ q · s, each group with its scale. q: (out, in) codes −7..7; s: (out, in / g). Returns fp32 (out, in)."""
    out, G = s.shape
    return (q.float().reshape(out, G, -1) * s[..., None]).flatten(1)


def quantize_int4_zero(w: torch.Tensor, g: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group-wise int4 with a zero point: the 16 codes 0..15 span the group's own range [m, M],
    s = (M − m) / 15, q = round((w − m) / s), w ≈ q · s + m. The levels span only the range the group has: for
    weights spread around zero [m, M] is narrower than [−max|w|, max|w|], and a group whose weights lean one way
    (all positive, say: M − m ≤ M against the symmetric step's max|w| / 7) gets a step at least 15/7 ≈ 2.14× finer,
    and finer still the narrower the group. The codes are unsigned because they count steps up from m. The zero
    point is kept as a float, the value m that code 0 stands for (as llama.cpp's Q4_1 keeps it; torch's int4 kernel
    keeps m + 8·s, the value of code 8, qwen/quantlinear.py), not as an integer code z with w = (q − z)·s as PyTorch's
    and ONNX's quantization do: then code 0 is m exactly and code 15 is M up to fp32 rounding. w: (out, in).
    Returns q uint8 (out, in) in 0..15, s and m (out, in / g)."""
    x = _groups(w, g)  # (out, G, g)
    m, M = x.amin(dim=-1), x.amax(dim=-1)  # (out, G)
    s = (M - m) / 15
    q = torch.round((x - m[..., None]) / _safe(s)[..., None]).clamp(0, 15)  # (out, G, g)
    return q.to(torch.uint8).flatten(1), s, m


def dequantize_int4_zero(q: torch.Tensor, s: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """w ≈ q · s + m, each group with its scale and minimum. q: (out, in) codes 0..15; s, m: (out, in / g)."""
    out, G = s.shape
    return (q.float().reshape(out, G, -1) * s[..., None] + m[..., None]).flatten(1)


# ---------------------------------------------------------------- what the scales cost

def bits_per_weight(bits: int, group: int, scale_bits: int = 16, zero_bits: int = 0) -> float:
    """Storage per weight: the code's own bits plus its share of the numbers its group keeps, a scale (and a zero
    point) divided among the group's weights. int8 per channel of a 1,024-input row with a bf16 scale:
    8 + 16/1024 ≈ 8.016; int4 g = 32 with a bf16 scale: 4.5, with a bf16 minimum too: 5.0; llama.cpp's Q8_0 (fp16
    scale per 32 weights) 8.5, Q4_0 4.5, Q4_1 (fp16 scale and minimum) 5.0."""
    return bits + (scale_bits + zero_bits) / group
