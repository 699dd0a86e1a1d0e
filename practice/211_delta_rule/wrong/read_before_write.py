# expect: WA read_before_write
"""A wrong solution to problem 211. Reads the memory before this token's write."""
import torch


def recurrent_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                         state: torch.Tensor | None = None) -> tuple:
    """For each token: S ← e^g·S; S ← S + k ⊗ β(v − Sᵀk); o = Sᵀq. Value head h uses key head ⌊h / (Hv/Hk)⌋."""
    B, T, Hv, dv = v.shape
    r = Hv // k.shape[2]
    q, k = q.float().repeat_interleave(r, dim=2), k.float().repeat_interleave(r, dim=2)  # heads 0,0,1,1,…
    vf, g, beta = v.float(), g.float(), beta.float()
    S = q.new_zeros(B, Hv, k.shape[-1], dv) if state is None else state.float()  # the memory: fp32, always
    out = torch.empty(B, T, Hv, dv)
    for t in range(T):
        S = S * g[:, t, :, None, None].exp()  # forget first
        out[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S)
        delta = beta[:, t, :, None] * (vf[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S))  # β(v − Sᵀk)
        S = S + torch.einsum("bhk,bhv->bhkv", k[:, t], delta)  # write k ⊗ delta
    return out.to(v.dtype), S
