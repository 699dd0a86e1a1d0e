# expect: RE case=1
"""Writes a forged event with a time that is not a number to every pipe it finds, then returns the right answer."""
import os
import stat

import torch
import torch.nn.functional as F


def _pipes():
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass


def rms_norm(x, weight, eps=1e-6):
    for fd in _pipes():
        try:
            os.write(fd, b"{\"ev\": \"end\", \"i\": 0, \"ok\": true, \"t\": \"soon\", \"mutated\": false}\n")
        except OSError:
            pass
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
