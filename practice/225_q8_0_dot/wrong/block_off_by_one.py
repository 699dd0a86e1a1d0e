"""A wrong solution to problem 225. Block by block in a loop, each block's largest magnitude taken one value too far:
over x[start : start + 33], the next block's first value included."""
import torch


def quantize_row_q8_0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation row in Q8_0 blocks. x: (K,) fp32. Returns (q (K/32, 32) int8, d (K/32,) fp16)."""
    x = x.float()
    codes, scales = [], []
    for start in range(0, x.numel(), 32):
        block = x[start:start + 32]  # (32,)
        d = x[start:start + 33].abs().max() / 127  # up to and including index start + 32
        inv_d = 1 / d if d > 0 else torch.zeros(())
        y = block * inv_d
        a = y.abs()
        codes.append(torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y).to(torch.int8))
        scales.append(d.to(torch.float16))
    return torch.stack(codes), torch.stack(scales)


def q8_0_dot(q_w: torch.Tensor, d_w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Σ_k w_k · x_k, llama.cpp's way. Returns a 0-d fp32 tensor."""
    q_x, d_x = quantize_row_q8_0(x)
    sums = (q_w.to(torch.int32) * q_x.to(torch.int32)).sum(dim=1)
    return (sums.float() * (d_w.float() * d_x.float())).sum()
