# expect: TLE case=1
"""Prints 2 MB, then never returns from the first case: a pure-Python loop that never makes a system call."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    for _ in range(2000):
        print("spam " * 200)
    while True:
        pass


def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
