"""A wrong solution to problem 221. Runs the delta rule over the kept tokens from an empty memory."""
import torch


def rollback(conv: torch.Tensor, state: torch.Tensor, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             g: torch.Tensor, beta: torch.Tensor, n_accepted: torch.Tensor) -> tuple:
    B, T, Hv, dv = v.shape
    r = Hv // k.shape[2]
    kk = k.float().repeat_interleave(r, dim=2)
    vf, gf, bf = v.float(), g.float(), beta.float()
    new_conv, new_state = torch.empty_like(conv), torch.empty_like(state, dtype=torch.float32)
    for b in range(B):
        m = int(n_accepted[b]) + 1
        window = torch.cat([conv[b], x[b, :m].transpose(0, 1).to(conv.dtype)], dim=-1)
        new_conv[b] = window[:, -conv.shape[-1]:]
        S, M = torch.zeros_like(state[b], dtype=torch.float32), m
        for t in range(M):
            S = S * gf[b, t, :, None, None].exp()
            delta = bf[b, t, :, None] * (vf[b, t] - torch.einsum("hk,hkv->hv", kk[b, t], S))
            S = S + torch.einsum("hk,hv->hkv", kk[b, t], delta)
        new_state[b] = S
    return new_conv, new_state
