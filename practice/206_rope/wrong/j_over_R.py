# expect: WA exponent_j_over_R
"""A wrong solution to problem 206. θ^(−j/R): the exponent lacks its factor 2."""
import torch


def inv_frequencies(head_dim: int, partial_rotary_factor: float, rope_theta: float) -> torch.Tensor:
    """inv_freq_j = rope_theta ** (−2j / R), j = 0 … R/2 − 1, R = int(head_dim · partial_rotary_factor): fp32 (R/2,)."""
    R = int(head_dim * partial_rotary_factor)  # only the first R dims of a head rotate (64 of 256)
    return 1.0 / (rope_theta ** (torch.arange(0, R // 2, dtype=torch.float32) / R))


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple:
    """positions (B, T) int64, inv_freq (R/2,) fp32 -> (cos, sin), each (B, T, R) in `dtype`."""
    angle = positions[..., None].float() * inv_freq  # (B, T, R/2), in fp32
    angle = torch.cat((angle, angle), dim=-1)  # (B, T, R): pair (i, i + R/2) turns by angle i
    return angle.cos().to(dtype), angle.sin().to(dtype)  # rounded to the model dtype, as transformers does


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D); cos, sin (B, T, R) in x's dtype. Rotate pairs (i, i + R/2) of the first R dims; keep the rest."""
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R): the same angles for every head
    x_rot, x_pass = x[..., :R], x[..., R:]
    x1, x2 = x_rot[..., : R // 2], x_rot[..., R // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)  # rotate_half: the 90° turn of each pair
    return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)
