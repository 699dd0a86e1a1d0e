# expect: RE case=1
"""Calls sys.exit(3) inside a case: a Runtime Error, and the other cases still run."""
import torch
import torch.nn.functional as F
import sys


def rms_norm(x, weight, eps=1e-6):
    sys.exit(3)


def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
