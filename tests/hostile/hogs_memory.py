# expect: RE case=1 out_of_memory
"""Asks for 6 GiB (never touched, so without a limit it costs nothing) and then returns the right answer."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    _big = torch.empty(6 * 2 ** 30, dtype=torch.uint8)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
