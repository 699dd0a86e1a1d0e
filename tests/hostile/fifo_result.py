# expect: RE case=1
"""On the second case, swaps the first case's saved result for a named pipe, which blocks whoever opens it."""
import os
import sys

import torch
import torch.nn.functional as F

_calls = []


def rms_norm(x, weight, eps=1e-6):
    _calls.append(1)
    if len(_calls) == 2:
        saved = os.path.join(sys.argv[2], "0.pt")
        os.mkfifo(saved + ".fifo")
        os.replace(saved + ".fifo", saved)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
