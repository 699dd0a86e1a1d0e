# expect: AC
"""Starts daemons that leave the judge's process group: one in a new session, one by a double fork."""
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

# a new session, as subprocess can start one
_new_session = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
print("daemon pid", _new_session.pid)

# the classic double fork: the middle process starts a session, forks the daemon and exits, orphaning it
_read, _write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(_write, str(os.getpid()).encode())
        time.sleep(300)
    os._exit(0)
print("daemon pid", os.read(_read, 32).decode())


def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
