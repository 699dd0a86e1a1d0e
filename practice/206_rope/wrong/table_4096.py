# expect: RE short_table
"""A wrong solution to problem 206. cos and sin looked up in a table computed once for positions 0 … 4095."""
import torch


def inv_frequencies(head_dim: int, partial_rotary_factor: float, rope_theta: float) -> torch.Tensor:
    """inv_freq_j = rope_theta ** (−2j / R), j = 0 … R/2 − 1, R = int(head_dim · partial_rotary_factor): fp32 (R/2,)."""
    R = int(head_dim * partial_rotary_factor)  # only the first R dims of a head rotate (64 of 256)
    return 1.0 / (rope_theta ** (torch.arange(0, R, 2, dtype=torch.float32) / R))


MAX_POSITIONS = 4096  # a context of 4096 tokens is plenty


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple:
    """positions (B, T) int64, inv_freq (R/2,) fp32 -> (cos, sin), each (B, T, R) in `dtype`."""
    angle = torch.arange(MAX_POSITIONS, dtype=torch.float32)[:, None] * inv_freq  # (4096, R/2): every position
    angle = torch.cat((angle, angle), dim=-1)  # (4096, R): pair (i, i + R/2) turns by angle i
    cos, sin = angle.cos(), angle.sin()  # the table, in fp32
    return cos[positions].to(dtype), sin[positions].to(dtype)  # looked up, rounded to the model dtype


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D); cos, sin (B, T, R) in x's dtype. Rotate pairs (i, i + R/2) of the first R dims; keep the rest."""
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R): the same angles for every head
    x_rot, x_pass = x[..., :R], x[..., R:]
    x1, x2 = x_rot[..., : R // 2], x_rot[..., R // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)  # rotate_half: the 90° turn of each pair
    return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)
