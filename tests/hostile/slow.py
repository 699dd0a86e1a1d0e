# expect: TLE case=1
"""The first call returns the right answer after 1.4 s: over a 1 s limit, yet inside the judge's grace period, so
the verdict comes from the case's own clock."""
import time

import torch
import torch.nn.functional as F


_calls = []


def rms_norm(x, weight, eps=1e-6):
    if not _calls:
        time.sleep(1.4)
    _calls.append(1)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)


def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
