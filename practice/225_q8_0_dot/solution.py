"""Problem 225, reference solution: one weight row in Q8_0 times an activation row, as llama.cpp's integer path
computes it: the row rounded to Q8_0 once, int8 × int8 summed exactly per block, one fp32 scale product per block."""
import torch


def quantize_row_q8_0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation row in Q8_0 blocks, as llama.cpp's reference quantizer rounds it (quantize_row_q8_0_ref).

    x: (K,) fp32, K a multiple of 32. Returns (q, d): q (K/32, 32) int8 codes, d (K/32,) fp16 scales."""
    blocks = x.float().reshape(-1, 32)  # (nb, 32): block b holds x[32b : 32b + 32]
    d = blocks.abs().amax(dim=1) / 127  # (nb,) fp32: each block's value of largest magnitude lands on ±127
    inv_d = torch.where(d == 0, 0.0, 1 / d)  # (nb,): an all-zero block gets id = 0, so every code 0 (never 0 · inf)
    y = blocks * inv_d[:, None]  # multiplied by id = 1/d, as llama.cpp does (x / d rounds differently near a half)
    a = y.abs()
    q = torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y)  # C's roundf: halves away from zero
    return q.to(torch.int8), d.to(torch.float16)  # the codes come from the fp32 d; only the stored d is rounded


def q8_0_dot(q_w: torch.Tensor, d_w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Σ_k w_k · x_k for a weight row held as Q8_0 blocks and an fp32 activation row, llama.cpp's way.

    q_w: (K/32, 32) int8, d_w: (K/32,) fp16, x: (K,) fp32. Returns a 0-d fp32 tensor."""
    q_x, d_x = quantize_row_q8_0(x)  # the row rounded once; llama.cpp reuses it for every weight row
    sums = (q_w.to(torch.int32) * q_x.to(torch.int32)).sum(dim=1)  # (nb,) exact: |sum| <= 32 · 127 · 128
    scales = d_w.float() * d_x.float()  # (nb,) fp32, exact: two fp16 numbers have 11 significant bits each
    return (sums.float() * scales).sum()  # one fp32 product per block, then the blocks added
