# expect: WA fp32_compute
"""A wrong solution to problem 207. Everything in fp32, rounded once at the end."""
import torch
import torch.nn.functional as F


def silu(z: torch.Tensor) -> torch.Tensor:
    """silu(z) = z · sigmoid(z), elementwise. z: fp32 (...). Returns fp32 (...)."""
    return z * torch.sigmoid(z)


def swiglu_mlp(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor,
               down_weight: torch.Tensor) -> torch.Tensor:
    """down(silu(gate(x)) ⊙ up(x)). x (B, T, d); gate_weight, up_weight (i, d); down_weight (d, i) -> (B, T, d)."""
    dtype = x.dtype
    x, gate_weight, up_weight, down_weight = x.float(), gate_weight.float(), up_weight.float(), down_weight.float()
    gate = F.linear(x, gate_weight)  # (B, T, i): x @ Wᵀ, weights are stored (out, in)
    up = F.linear(x, up_weight)  # (B, T, i)
    return F.linear(F.silu(gate) * up, down_weight).to(dtype)  # F.silu rounds once in bf16, as transformers' does
