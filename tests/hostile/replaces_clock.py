# expect: TLE case=1
"""Replaces the clocks with ones that never move, then takes 1.8 s on the first case (over a 1 s limit)."""
import time

import torch
import torch.nn.functional as F

time.perf_counter = time.monotonic = time.time = lambda: 0.0
time.perf_counter_ns = time.monotonic_ns = lambda: 0
_calls = []


def rms_norm(x, weight, eps=1e-6):
    if not _calls:
        time.sleep(1.8)
    _calls.append(1)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
