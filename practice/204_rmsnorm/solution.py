"""Problem 204, reference solution: zero-centred RMSNorm, the gated RMSNorm of linear attention, and l2norm."""
import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x̂ · (1 + weight), where x̂ = x / sqrt(mean(x²) + eps) over the last dimension."""
    xf = x.float()  # squares of bf16 numbers lose digits (and overflow in fp16): statistics in fp32
    x_hat = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)  # (..., D)
    return (x_hat * (1 + weight.float())).to(x.dtype)  # zero-centred weight; round once, at the end


def gated_rms_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x̂ · weight · silu(gate): normalise first, then gate. The weight is plain (initialised to 1)."""
    xf = x.float()
    x_hat = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)  # (..., D)
    return (x_hat * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x²) + eps) over the last dimension, in x's own dtype (eps inside the root)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)

