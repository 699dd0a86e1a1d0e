"""Problem 204: zero-centred RMSNorm, the gated RMSNorm of linear attention, and l2norm.

Read the statement: python practice/judge.py show 204   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 204
"""
import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x̂ · (1 + weight), where x̂ = x / sqrt(mean(x²) + eps) over the last dimension.

    x: (..., D) in fp32, bf16 or fp16; weight: (D,) zero-centred. Returns (..., D) in x's dtype.
    """
    raise NotImplementedError("rms_norm")


def gated_rms_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x̂ · weight · silu(gate): normalise first, then gate. The weight is plain (initialised to 1).

    x, gate: (..., D) of one dtype; weight: (D,). Returns (..., D) in x's dtype.
    """
    raise NotImplementedError("gated_rms_norm")


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x²) + eps) over the last dimension. x: (..., D) fp32. Returns (..., D) fp32."""
    raise NotImplementedError("l2norm")
