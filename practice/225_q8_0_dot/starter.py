"""Problem 225: one weight row in Q8_0 times an activation row, as llama.cpp's integer path computes it.

Read the statement: python practice/judge.py show 225   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 225
"""
import torch


def quantize_row_q8_0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation row in Q8_0 blocks, as llama.cpp's reference quantizer rounds it: per block of 32,
    d = max|x| / 127 in fp32, id = 1/d (0 when d = 0), q = roundf(x · id) with halves away from zero.

    x: (K,) fp32, K a multiple of 32. Returns (q, d): q (K/32, 32) int8 codes, d (K/32,) fp16 scales."""
    raise NotImplementedError("quantize_row_q8_0")


def q8_0_dot(q_w: torch.Tensor, d_w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Σ_k w_k · x_k for a weight row held as Q8_0 blocks and an fp32 activation row: x rounded to Q8_0, then per
    block the integer sum of q_w · q_x times fp32(d_w) · fp32(d_x), the blocks added.

    q_w: (K/32, 32) int8, d_w: (K/32,) fp16, x: (K,) fp32. Returns a 0-d fp32 tensor."""
    raise NotImplementedError("q8_0_dot")
