# expect: WA new_state_without_old !state_not_carried
"""A wrong solution to problem 210. The output is right; the new state is the last K−1 inputs of x alone (zeros
before them), wrong when T < K−1."""
import torch
import torch.nn.functional as F


def causal_conv(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor | None = None) -> tuple:
    """silu(u) with u_t[c] = Σ_i weight[c, 0, i] · x_{t−K+1+i}[c]; the K−1 inputs before x come from `state`."""
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)  # (B, C, T): conv1d wants channels first
    if state is None:
        state = x.new_zeros(B, C, K - 1)  # nothing before the first token
    new_state = F.pad(x, (K - 1, 0))[:, :, -(K - 1):]  # the newest K−1 inputs of x are the next call's past
    x = torch.cat([state, x], dim=-1)  # (B, C, K−1+T): the past in front
    u = F.conv1d(x, weight, groups=C)  # no padding: output t reads inputs t..t+K−1 of the padded x
    return F.silu(u).transpose(1, 2), new_state
