"""Not wrong: a hand-written loop over the K taps, summed in fp32 and rounded once, equals conv1d."""
import torch
import torch.nn.functional as F


def causal_conv(x, weight, state=None):
    B, T, C = x.shape
    K = weight.shape[-1]
    past = x.new_zeros(B, K - 1, C) if state is None else state.transpose(1, 2)
    full = torch.cat([past, x], dim=1)  # (B, K−1+T, C)
    w = weight[:, 0, :].float()  # (C, K)
    u = sum(w[:, i] * full[:, i:i + T].float() for i in range(K))
    return F.silu(u.to(x.dtype)), full[:, -(K - 1):].transpose(1, 2)
