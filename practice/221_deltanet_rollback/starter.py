"""Problem 221: a DeltaNet layer's cache after a verify pass, rolled back to the accepted tokens.

Read the statement: python practice/judge.py show 221   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 221
"""
import torch


def rollback(conv: torch.Tensor, state: torch.Tensor, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             g: torch.Tensor, beta: torch.Tensor, n_accepted: torch.Tensor) -> tuple:
    """The cache a plain pass over each row's first n_accepted[b] + 1 verified tokens leaves, from the snapshot.

    conv: (B, C, K−1), state: (B, Hv, dk, dv) fp32: the layer's cache before the verify pass (the snapshot).
    x: (B, T, C) the conv inputs the verify pass fed; k: (B, T, Hk, dk) fp32; v: (B, T, Hv, dv); g: (B, T, Hv) fp32;
    beta: (B, T, Hv): the delta rule's inputs at the T verified positions. n_accepted: (B,) int64 in 0 … T − 1.
    Returns (conv window (B, C, K−1) in conv's dtype, state (B, Hv, dk, dv) fp32).
    """
    raise NotImplementedError("rollback")
