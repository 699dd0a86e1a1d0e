# expect: WA case=1
"""Returns the right numbers in shapes that are not a plain dense CPU tensor: a sparse tensor, a tensor on the meta
device, a numpy array, a list, a nested list; and a Parameter (a tensor subclass), which is compared as a tensor."""
import torch
import torch.nn.functional as F

_calls = []


def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)
    _calls.append(1)
    n = len(_calls)
    if n == 1:
        return y.to_sparse()
    if n == 2:
        return torch.empty_like(y, device="meta")
    if n == 3 and y.dtype != torch.bfloat16:
        return y.numpy()
    if n == 4:
        return y.tolist()
    return torch.nn.Parameter(y, requires_grad=False)



def gated_rms_norm(x, gate, weight, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float() * F.silu(gate.float())).to(x.dtype)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)
