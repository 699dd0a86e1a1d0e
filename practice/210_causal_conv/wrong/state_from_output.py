"""A wrong solution to problem 210. Keeps the last outputs as the next call's past."""
import torch
import torch.nn.functional as F


def causal_conv(x, weight, state=None):
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)
    if state is None:
        state = x.new_zeros(B, C, K - 1)
    u = F.silu(F.conv1d(torch.cat([state, x], dim=-1), weight, groups=C))
    return u.transpose(1, 2), torch.cat([state, u], dim=-1)[:, :, -(K - 1):]
