"""Rotary position embedding: partial, rotate-half, with Qwen3.5's interleaved M-RoPE table.

Attention scores q·k carry no notion of order. RoPE rotates each pair of query/key dims by an angle proportional
to the token's position, so q_m·k_n depends only on the distance m − n. Qwen3.5 rotates only the first
R = head_dim · partial_rotary_factor dims of a head (64 of 256), pairs dim i with dim i + R/2 ("rotate half",
not adjacent pairs), and uses inv_freq_j = θ^(−2j/R) with θ = rope_theta (1e7 in the real configs, 10000 when
absent). Its M-RoPE gives every frequency its angle from one of three position axes (time, height, width) for
images; for text the three axes are equal, so the table is exactly ordinary RoPE. cos and sin are computed in
fp32 and rounded to the model dtype, as transformers does.
"""
import torch
import torch.nn as nn

from qwen.config import Config


def mrope_axes(n_freq: int, mrope_section: list[int]) -> torch.Tensor:
    """Which axis (0 = t time, 1 = h height, 2 = w width) frequency j reads its angle from: h takes j ≡ 1 (mod 3)
    below 3·s_h, w takes j ≡ 2 (mod 3) below 3·s_w, t takes the rest. s_t = mrope_section[0] is never read."""
    axis = torch.zeros(n_freq, dtype=torch.long, device="cpu")
    for a in (1, 2):
        axis[a:3 * mrope_section[a]:3] = a
    return axis


class RotaryEmbedding(nn.Module):
    """positions -> the (cos, sin) tables that `apply_rope` uses. No weights: everything follows from the config."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.R = int(cfg.head_dim * cfg.partial_rotary_factor)  # rotary width: 256 · 0.25 = 64 in Qwen3.5-0.8B
        # Plain fp32 attributes on the CPU, as transformers computes them, not buffers: neither model.to(bf16) nor
        # building the model on the meta device can touch them; forward moves them to the positions' device.
        j2 = torch.arange(0, self.R, 2, dtype=torch.float, device="cpu")  # 2j for j = 0 … R/2 − 1
        self.inv_freq = 1.0 / (cfg.rope_theta ** (j2 / self.R))  # (R/2,)
        self.axis = mrope_axes(self.R // 2, cfg.mrope_section)  # (R/2,) values in {0, 1, 2}

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: (B, T) for text, or (3, B, T) for the t/h/w axes -> cos, sin: each (B, T, R) in `dtype`."""
        if positions.dim() == 2:
            positions = positions.expand(3, -1, -1)  # text: the three axes are the same position
        if positions.dim() != 3 or positions.shape[0] != 3:
            raise ValueError(f"positions must be (B, T) or (3, B, T), got shape {tuple(positions.shape)}")
        inv_freq, axis = self.inv_freq.to(positions.device), self.axis.to(positions.device)
        t, h, w = positions[..., None].float() * inv_freq  # each (B, T, R/2): angle = position · frequency
        angle = torch.where(axis == 1, h, torch.where(axis == 2, w, t))  # (B, T, R/2) frequency j from axis[j]
        angle = torch.cat((angle, angle), dim=-1)  # (B, T, R): dims i and i + R/2 share an angle
        return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (−x2, x1) on the two halves of the last dim: the 90° turn of each pair (i, i + R/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first R dims of every head of x (B, H, T, D) by its position's angles; pass the rest through.
    Pair (x_i, x_{i+R/2}) becomes (x_i cos − x_{i+R/2} sin, x_{i+R/2} cos + x_i sin)."""
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R): every head turns by the same angles
    x_rot, x_pass = x[..., :R], x[..., R:]  # (B, H, T, R), (B, H, T, D − R)
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)  # (B, H, T, D)
