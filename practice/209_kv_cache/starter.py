"""Problem 209: one step of gated attention that reads and grows a KV cache.

Read the statement: python practice/judge.py show 209   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 209
"""
import torch
import torch.nn.functional as F


def attention_step(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-6) -> tuple:
    """Gated attention (problem 208) over the T new tokens of x (B, T, d), which follow the S0 tokens whose keys
    (after k_norm and RoPE) and values are in cache_k, cache_v (B, Hkv, S0, D); S0 may be 0.

    cos, sin: (B, T, R) for the new tokens. mask: None or (B, S0 + T) bool over cached and new tokens.
    Returns (output (B, T, d), keys (B, Hkv, S0 + T, D), values (B, Hkv, S0 + T, D)).
    """
    raise NotImplementedError("attention_step")
