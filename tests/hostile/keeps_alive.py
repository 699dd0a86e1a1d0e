# expect: RE case=1
"""Never returns from the first case, while a thread writes an endless stream of keep-alive events to every pipe."""
import os
import stat
import threading
import time

import torch
import torch.nn.functional as F


def _flood():
    fds = []
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                fds.append(fd)
        except OSError:
            pass
    while True:
        for fd in fds:
            try:
                os.write(fd, b"{\"ev\": \"begin\", \"i\": 0}\n")
            except OSError:
                pass
        time.sleep(0.05)


def rms_norm(x, weight, eps=1e-6):
    threading.Thread(target=_flood, daemon=True).start()
    while True:
        time.sleep(1)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
