# expect: RE case=1
"""Recurses through two functions until Python gives up, with the recursion limit raised to 10,000
(20,000 lines of traceback if nothing collapsed them)."""
import sys

import torch
import torch.nn.functional as F

sys.setrecursionlimit(10_000)


def _ping(n):
    return _pong(n + 1)


def _pong(n):
    return _ping(n + 1)


def rms_norm(x, weight, eps=1e-6):
    return _ping(0)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
