"""Problem 208: causal attention with grouped K/V heads, and Qwen3.5's gated attention.

Read the statement: python practice/judge.py show 208   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 208
"""
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q kᵀ / √D, causal and padding mask) · v, each K/V head shared by H/Hkv consecutive query heads.

    q: (B, H, T, D); k, v: (B, Hkv, S, D) with S >= T: query i sits at position S - T + i.
    mask: None or (B, S) bool, True = a real token. Returns (B, H, T, D) in q's dtype.
    """
    raise NotImplementedError("attend")


def gated_attention(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor,
                    mask: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """Qwen3.5's full-attention mixer, from the layer's six weights (names as in the checkpoint, without the
    "layers.{i}.self_attn." prefix): q_proj, k_proj, v_proj, o_proj, q_norm, k_norm (each ".weight").

    x: (B, T, d); cos, sin: (B, T, R), the RoPE tables of the T tokens; mask: None or (B, T) bool.
    Returns (B, T, d) in x's dtype.
    """
    raise NotImplementedError("gated_attention")
