"""Problem 210: the causal depthwise conv of Gated DeltaNet, with the state that carries it across calls.

Read the statement: python practice/judge.py show 210   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 210
"""
import torch
import torch.nn.functional as F


def causal_conv(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor | None = None) -> tuple:
    """silu(u) with u_t[c] = Σ_i weight[c, 0, i] · x_{t−K+1+i}[c]; the K−1 inputs before x come from `state`.

    x: (B, T, C); weight: (C, 1, K); state: (B, C, K−1) or None (zeros). Returns (y (B, T, C) in x's dtype,
    the new state (B, C, K−1): the last K−1 inputs seen, channels first).
    """
    raise NotImplementedError("causal_conv")
