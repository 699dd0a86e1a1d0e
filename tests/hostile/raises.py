# expect: RE case=1
"""Raises inside a helper: the traceback must show the learner's frames only."""
import torch
import torch.nn.functional as F


def _scale(w):
    raise ValueError("the scale is not ready")


def rms_norm(x, weight, eps=1e-6):
    return x * _scale(weight)


def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
