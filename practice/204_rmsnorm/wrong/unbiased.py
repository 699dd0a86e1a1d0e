"""A wrong solution to problem 204. Divides the sum of squares by D - 1 (an off-by-one; no named hint)."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    ms = xf.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
    return (xf * torch.rsqrt(ms + eps) * (1 + weight.float())).to(x.dtype)


def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
