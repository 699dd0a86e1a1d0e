"""Normalisation: RMSNorm with a zero-centred weight, the gated RMSNorm of linear attention, and l2norm.

RMSNorm divides a vector by its root mean square and rescales each dimension. Qwen3.5 (like Gemma) stores the
scale as an offset from 1 and applies (1 + w): a weight of 0 means "leave the scale alone", and bf16 is much finer
near 0 than near 1. The gated norm of the DeltaNet output keeps a plain weight (initialised to 1) and multiplies
by silu(gate). Statistics are always taken in fp32; the result is cast back to the input dtype.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) over the last dimension, computed in fp32 (squares of bf16 values lose digits)."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


class RMSNorm(nn.Module):
    """y = x̂ · (1 + w). Used before every mixer and MLP, after the last layer, and per head on q and k."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))  # zero-centred: 0 is a scale of 1
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (..., dim)
        # the scale is applied in fp32 and the product rounded once (Llama rounds x̂ first, then multiplies)
        return (rms_normalize(x, self.eps) * (1 + self.weight.float())).to(x.dtype)


class GatedRMSNorm(nn.Module):
    """y = w · x̂ · silu(z): normalise first, then let the gate z decide how much passes. Plain weight, init 1."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))  # plain, NOT zero-centred: 1 is a scale of 1
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:  # x, gate: (..., dim)
        # transformers' order, so a bf16 model matches it bit for bit: x̂ rounded to x's dtype, times w in that dtype
        # (or the wider of the two), then the fp32 gate, rounded once more. Rounding once at the end would be
        # closer to the exact value (up to 2 bf16 steps from this), but the course promises transformers' output;
        # chapter 3 shows the difference.
        n = self.weight * rms_normalize(x, self.eps).to(x.dtype)
        return (n * F.silu(gate.float())).to(x.dtype)


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Scale the last dimension to unit length: x / sqrt(Σx² + eps). eps sits inside the root (not F.normalize)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
