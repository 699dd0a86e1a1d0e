"""A wrong solution to problem 225. No guard for an all-zero block: 1/d is inf there, and the dot is computed from
the codes while they are still floats, so 0 · inf = NaN reaches the sum."""
import torch


def _codes(x):
    blocks = x.float().reshape(-1, 32)  # (nb, 32)
    d = blocks.abs().amax(dim=1) / 127  # (nb,) fp32
    y = blocks * (1 / d)[:, None]  # multiplied by 1/d
    a = y.abs()
    return torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y), d  # C's roundf: halves away from zero


def quantize_row_q8_0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation row in Q8_0 blocks. x: (K,) fp32. Returns (q (K/32, 32) int8, d (K/32,) fp16)."""
    q, d = _codes(x)
    return q.to(torch.int8), d.to(torch.float16)


def q8_0_dot(q_w: torch.Tensor, d_w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Σ_k w_k · x_k, llama.cpp's way. Returns a 0-d fp32 tensor."""
    q_x, d = _codes(x)
    sums = (q_w.float() * q_x).sum(dim=1)  # exact in fp32: every partial sum is an integer below 2^24
    return (sums * (d_w.float() * d.half().float())).sum()
