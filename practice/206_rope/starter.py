"""Problem 206: the rotary position embedding of Qwen3.5 (partial, rotate-half), for text.

Read the statement: python practice/judge.py show 206   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 206
"""
import torch


def inv_frequencies(head_dim: int, partial_rotary_factor: float, rope_theta: float) -> torch.Tensor:
    """inv_freq_j = rope_theta ** (−2j / R), j = 0 … R/2 − 1, R = int(head_dim · partial_rotary_factor): fp32 (R/2,)."""
    raise NotImplementedError("inv_frequencies")


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple:
    """positions (B, T) int64, inv_freq (R/2,) fp32 -> (cos, sin), each (B, T, R) in `dtype`.

    angle = position · inv_freq in fp32, written twice side by side (dims i and i + R/2 share an angle)."""
    raise NotImplementedError("rope_tables")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, D); cos, sin (B, T, R) in x's dtype. Rotate pairs (i, i + R/2) of the first R dims; keep the rest."""
    raise NotImplementedError("apply_rope")
