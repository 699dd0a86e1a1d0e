"""Problem 221, reference solution: a DeltaNet layer's cache rolled back to the accepted tokens."""
import torch


def rollback(conv: torch.Tensor, state: torch.Tensor, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             g: torch.Tensor, beta: torch.Tensor, n_accepted: torch.Tensor) -> tuple:
    """The cache a plain pass over each row's first n_accepted[b] + 1 verified tokens leaves, from the snapshot."""
    B, T, Hv, dv = v.shape
    r = Hv // k.shape[2]
    kk = k.float().repeat_interleave(r, dim=2)  # (B, T, Hv, dk): value head h reads key head h // r
    vf, gf, bf = v.float(), g.float(), beta.float()
    new_conv, new_state = torch.empty_like(conv), torch.empty_like(state, dtype=torch.float32)
    for b in range(B):
        m = int(n_accepted[b]) + 1  # kept: the token fed first (picked last step) and its accepted guesses
        window = torch.cat([conv[b], x[b, :m].transpose(0, 1).to(conv.dtype)], dim=-1)  # (C, K−1+m), oldest first
        new_conv[b] = window[:, -conv.shape[-1]:]  # the last K−1 inputs of the kept tokens
        S = state[b].float()  # (Hv, dk, dv): the snapshot, before any verified token
        for t in range(m):  # the delta rule again, over the kept tokens only
            S = S * gf[b, t, :, None, None].exp()
            delta = bf[b, t, :, None] * (vf[b, t] - torch.einsum("hk,hkv->hv", kk[b, t], S))
            S = S + torch.einsum("hk,hv->hkv", kk[b, t], delta)
        new_state[b] = S
    return new_conv, new_state
