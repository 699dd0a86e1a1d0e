# expect: WA fp32_down_proj cases>=2
"""A wrong solution to problem 207. The down projection summed in fp32 for accuracy, then rounded to x's dtype."""
import torch
import torch.nn.functional as F


def silu(z: torch.Tensor) -> torch.Tensor:
    """silu(z) = z · sigmoid(z), elementwise. z: fp32 (...). Returns fp32 (...)."""
    return z * torch.sigmoid(z)


def swiglu_mlp(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor,
               down_weight: torch.Tensor) -> torch.Tensor:
    """down(silu(gate(x)) ⊙ up(x)). x (B, T, d); gate_weight, up_weight (i, d); down_weight (d, i) -> (B, T, d)."""
    gate = F.linear(x, gate_weight)  # (B, T, i): x @ Wᵀ, weights are stored (out, in)
    up = F.linear(x, up_weight)  # (B, T, i)
    h = F.silu(gate) * up  # F.silu rounds once in bf16, as transformers' does
    return F.linear(h.float(), down_weight.float()).to(x.dtype)  # the long sum over i in fp32, rounded once
