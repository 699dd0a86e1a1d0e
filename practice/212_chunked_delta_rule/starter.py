"""Problem 212: the gated delta rule, a chunk of tokens at a time: matrix products and one triangular solve.

Read the statement: python practice/judge.py show 212   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 212
"""
import torch


def chunked_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                       state: torch.Tensor | None = None, chunk_size: int = 64) -> tuple:
    """The same results as the token-by-token rule (problem 211), computed chunk by chunk.

    q, k: (B, T, H, dk); v: (B, T, H, dv); g, beta: (B, T, H); state: (B, H, dk, dv) or None (zeros); all fp32
    (or all float64). T need not be a multiple of chunk_size. Returns (o (B, T, H, dv), the final state
    (B, H, dk, dv)), in the inputs' dtype.
    """
    raise NotImplementedError("chunked_delta_rule")
