"""A wrong solution to problem 210. Returns the conv without its activation."""
import torch
import torch.nn.functional as F


def causal_conv(x, weight, state=None):
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)
    if state is None:
        state = x.new_zeros(B, C, K - 1)
    x = torch.cat([state, x], dim=-1)
    return F.conv1d(x, weight, groups=C).transpose(1, 2), x[:, :, -(K - 1):]
