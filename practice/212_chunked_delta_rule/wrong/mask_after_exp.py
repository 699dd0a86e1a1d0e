# expect: WA gamma_not_finite cases>=2
"""A wrong solution to problem 212. The exp taken before the mask, which then multiplies: above the diagonal
e^(G_i − G_j) overflows to inf, and inf · 0 is NaN."""
import torch
import torch.nn.functional as F


def chunked_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                       state: torch.Tensor | None = None, chunk_size: int = 64) -> tuple:
    """The same results as the token-by-token rule (problem 211), computed chunk by chunk."""
    B, T, H, dk = k.shape
    dv, C = v.shape[-1], chunk_size
    pad = -T % C  # zeros at the end: g = 0 keeps the state, k = v = β = 0 write nothing
    N = (T + pad) // C

    def chunks(x):  # (B, T, H, ...) -> (B, H, N, C, ...)
        x = x.transpose(1, 2)
        x = F.pad(x, (0, 0, 0, pad) if x.dim() == 4 else (0, pad))
        return x.reshape(B, H, N, C, *x.shape[3:])

    q, k, v, g, beta = (chunks(x) for x in (q, k, v, g, beta))
    G = g.cumsum(-1)  # within each chunk: reset at every chunk's start
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    Gamma = (G[..., :, None] - G[..., None, :]).exp() * causal  # e^(G_i − G_j), kept where j ≤ i
    A = torch.eye(C, dtype=q.dtype) + ((beta[..., None] * k @ k.transpose(-1, -2)) * Gamma).tril(-1)
    U = torch.linalg.solve_triangular(A, beta[..., None] * v, upper=False)  # A⁻¹(βV)
    W = torch.linalg.solve_triangular(A, (beta * G.exp())[..., None] * k, upper=False)  # A⁻¹(βe^G K)
    P = (q @ k.transpose(-1, -2)) * Gamma  # within-chunk attention, diagonal included
    S = q.new_zeros(B, H, dk, dv) if state is None else state
    out = torch.empty_like(v)
    for n in range(N):
        V_new = U[:, :, n] - W[:, :, n] @ S  # the corrections, now that the carried state is known
        out[:, :, n] = (q[:, :, n] * G[:, :, n, :, None].exp()) @ S + P[:, :, n] @ V_new
        K_decayed = k[:, :, n] * (G[:, :, n, -1:] - G[:, :, n])[..., None].exp()
        S = G[:, :, n, -1, None, None].exp() * S + K_decayed.transpose(-1, -2) @ V_new
    return out.reshape(B, H, N * C, dv)[:, :, :T].transpose(1, 2), S
