"""A wrong solution to problem 210. Always pads with zeros, whatever the state says."""
import torch
import torch.nn.functional as F


def causal_conv(x, weight, state=None):
    B, T, C = x.shape
    K = weight.shape[-1]
    x = torch.cat([x.new_zeros(B, K - 1, C), x], dim=1).transpose(1, 2)
    u = F.conv1d(x, weight, groups=C)
    return F.silu(u).transpose(1, 2), x[:, :, -(K - 1):]
