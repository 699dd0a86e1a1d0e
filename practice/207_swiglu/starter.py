"""Problem 207: the SwiGLU MLP of every Qwen3.5 decoder layer.

Read the statement: python practice/judge.py show 207   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 207
"""
import torch
import torch.nn.functional as F


def silu(z: torch.Tensor) -> torch.Tensor:
    """silu(z) = z · sigmoid(z), elementwise. z: fp32 (...). Returns fp32 (...)."""
    raise NotImplementedError("silu")


def swiglu_mlp(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor,
               down_weight: torch.Tensor) -> torch.Tensor:
    """down(silu(gate(x)) ⊙ up(x)). x (B, T, d); gate_weight, up_weight (i, d); down_weight (d, i) -> (B, T, d)."""
    raise NotImplementedError("swiglu_mlp")
