# expect: RE case=1
"""Prints terminal escape sequences that would move the cursor up and rewrite the verdict, in its output and in
its exception message."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    print("\x1b[8A\x1b[2K\rVerdict   Accepted\x1b[0m")
    raise ValueError("\x1b[2J\x1b[HAll 24 cases passed\x07")



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
