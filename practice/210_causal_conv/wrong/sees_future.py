"""A wrong solution to problem 210. Pads both sides and keeps the last T outputs: each output reads the future."""
import torch
import torch.nn.functional as F


def causal_conv(x, weight, state=None):
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)
    if state is None:
        state = x.new_zeros(B, C, K - 1)
    x = torch.cat([state, x], dim=-1)
    u = F.conv1d(x, weight, padding=K - 1, groups=C)[:, :, -T:]
    return F.silu(u).transpose(1, 2), x[:, :, -(K - 1):]
