"""Problem 211: the gated delta rule of linear attention, one token at a time.

Read the statement: python practice/judge.py show 211   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 211
"""
import torch


def recurrent_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                         state: torch.Tensor | None = None) -> tuple:
    """For each token: S ← e^g·S; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq. Value head h uses key head ⌊h / (Hv/Hk)⌋.

    q, k: (B, T, Hk, dk); v: (B, T, Hv, dv); g, beta: (B, T, Hv); state: (B, Hv, dk, dv) fp32, or None (zeros).
    Returns (o (B, T, Hv, dv) in v's dtype, the final state (B, Hv, dk, dv) in fp32).
    """
    raise NotImplementedError("recurrent_delta_rule")
