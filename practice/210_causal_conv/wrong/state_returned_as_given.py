# expect: WA state_not_updated !state_not_carried
"""A wrong solution to problem 210. The output is right; the state is returned as it came in, never updated."""
import torch
import torch.nn.functional as F


def causal_conv(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor | None = None) -> tuple:
    """silu(u) with u_t[c] = Σ_i weight[c, 0, i] · x_{t−K+1+i}[c]; the K−1 inputs before x come from `state`."""
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)  # (B, C, T): conv1d wants channels first
    if state is None:
        state = x.new_zeros(B, C, K - 1)  # nothing before the first token
    x = torch.cat([state, x], dim=-1)  # (B, C, K−1+T): the past in front
    u = F.conv1d(x, weight, groups=C)  # no padding: output t reads inputs t..t+K−1 of the padded x
    return F.silu(u).transpose(1, 2), state  # the past this call was given, for the next call
