"""Gated DeltaNet: the linear attention of three Qwen3.5 layers in four, a fixed-size memory instead of a KV cache.

Each value head keeps a matrix S (dk × dv) that maps keys to values. Per token it forgets (S ← e^g·S, g ≤ 0), then
writes only what it got wrong: S ← S + k ⊗ β(v − Sᵀk) (the delta rule), then reads o = Sᵀq. The same rule is
written twice: `recurrent_delta_rule`, token by token like the equations, and `chunked_delta_rule`, which turns each
chunk of 64 tokens into matrix products and one triangular solve (derived in chapter 7) and is proven equal to it.
Around the kernel: a causal depthwise conv, the gates, l2-normalised q and k, and a gated RMSNorm on the output.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.config import Config
from qwen.norm import GatedRMSNorm, l2norm


def causal_conv(x: torch.Tensor, weight: torch.Tensor,
                state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """silu of a depthwise causal conv: u_t[c] = Σ_i w[c, i]·x_{t−K+1+i}[c]; the K−1 inputs before x come from
    `state` (zeros at the start). x: (B, T, C); weight: (C, 1, K); state: (B, C, K−1). Returns u and the new state.
    Written as its K shifted products, summed in fp32 and rounded once, as the reference's conv1d does. F.conv1d
    computes the same, but its depthwise CPU kernel is slow: ~0.1 s per call at T = 1 in bf16, the whole budget
    of a decode step (tests/test_deltanet.py proves the two equal)."""
    B, T, C = x.shape
    K = weight.shape[-1]
    x = x.transpose(1, 2)  # (B, C, T): time last, so a shift is a slice
    if state is None:
        state = x.new_zeros(B, C, K - 1)
    x = torch.cat([state, x], dim=-1)  # (B, C, K−1+T): the past the first outputs look at
    xf, w = x.float(), weight[:, 0].float()  # (B, C, K−1+T), (C, K)
    # (B, C, T): output t sees inputs t..t+K−1 (the type checker cannot tell that sum's start, 0, never remains)
    u: torch.Tensor = sum(w[:, i, None] * xf[:, :, i:i + T] for i in range(K))  # type: ignore[assignment]
    # clone: a slice is a view that would keep the whole (B, C, K−1+T) prompt alive in the cache
    return F.silu(u.to(x.dtype)).transpose(1, 2), x[:, :, -(K - 1):].clone()  # rounded, then silu: as the reference


def _check(q, k, v, g, beta, state):
    """The shapes the kernels expect, checked up front; returns the dtype to compute in: fp32 for bf16/fp16/fp32
    inputs, float64 for float64 ones (so the two kernels can be compared to 1e-12)."""
    (B, T, H, dv), (Hk, dk) = v.shape, k.shape[2:]
    if H % Hk:
        raise ValueError(f"delta rule: v has {H} heads {tuple(v.shape)}, not a multiple of k's {Hk} {tuple(k.shape)}")
    want = dict(q=(B, T, Hk, dk), k=(B, T, Hk, dk), g=(B, T, H), beta=(B, T, H), state=(B, H, dk, dv))
    for name, x in dict(q=q, k=k, g=g, beta=beta, state=state).items():
        if x is not None and tuple(x.shape) != want[name]:
            raise ValueError(f"delta rule: {name} has shape {tuple(x.shape)}, expected {want[name]} "
                             f"(from v {tuple(v.shape)} = (B, T, H, dv) and k {tuple(k.shape)} = (B, T, Hk, dk))")
    wide = torch.float64 in (q.dtype, k.dtype, v.dtype, getattr(state, "dtype", None))
    return torch.float64 if wide else torch.float32


def recurrent_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                         state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule, one token at a time. q, k: (B, T, Hk, dk), l2-normalised, q scaled by dk^-½;
    v: (B, T, H, dv); g, beta: (B, T, H); state: (B, H, dk, dv) or None. H = Hk, or a multiple of it (value head h
    reads key head ⌊h / (H/Hk)⌋). Returns out (B, T, H, dv) in v's dtype and the final state (B, H, dk, dv) in the
    compute dtype (fp32, or float64 for float64 inputs)."""
    B, T, H, dv = v.shape
    out_dtype, dtype = v.dtype, _check(q, k, v, g, beta, state)
    r = H // k.shape[2]
    q, k = (x.repeat_interleave(r, dim=2).to(dtype) for x in (q, k))  # (B, T, H, dk): consecutive heads share
    v, g, beta = v.to(dtype), g.to(dtype), beta.to(dtype)
    S = q.new_zeros(B, H, k.shape[-1], dv) if state is None else state.to(dtype)  # (B, H, dk, dv)
    out = v.new_empty(B, T, H, dv)
    # Sᵀk = Σ_i k_i·S_i (row i of S weighted by k_i): an elementwise product summed over dk, in the order
    # transformers' recurrent step sums it, so that bf16 decode rounds as there
    for t in range(T):
        S = S * g[:, t, :, None, None].exp()  # forget: every memory fades by e^g ≤ 1
        prediction = (S * k[:, t, :, :, None]).sum(-2)  # what the memory returns for k: Sᵀk, (B, H, dv)
        delta = beta[:, t, :, None] * (v[:, t] - prediction)  # β·(v − Sᵀk): only the error is written
        S = S + k[:, t, :, :, None] * delta[:, :, None, :]  # S += k ⊗ delta
        out[:, t] = (S * q[:, t, :, :, None]).sum(-2)  # read: Sᵀq
    return out.to(out_dtype), S


def chunked_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                       state: torch.Tensor | None = None, chunk_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The same rule, a chunk of C tokens at a time (same arguments and results as `recurrent_delta_rule`).

    Inside a chunk, with G = cumsum(g) and Γ_ij = e^(G_i − G_j) for j ≤ i (0 above), the corrections U that the
    tokens write solve a unit lower-triangular system (I + strictly_lower(βKKᵀ ⊙ Γ)) U = βV − (βe^G K) S_prev.
    One triangular solve finds all of them; then O = (e^G Q) S_prev + (QKᵀ ⊙ Γ) U and
    S_next = e^(G_C) S_prev + (e^(G_C − G) K)ᵀ U. Only the step from chunk to chunk is a loop.
    """
    B, T, H, dv = v.shape
    Hk, dk = k.shape[2:]
    r, C = H // Hk, chunk_size
    out_dtype, dtype = v.dtype, _check(q, k, v, g, beta, state)
    pad = -T % C  # zeros at the end: g = 0 keeps the state, k = v = β = 0 write nothing
    N = (T + pad) // C

    def chunks(x, heads):  # (B, T, heads, ·) -> (B, Hk, heads // Hk, N, C, ·): value heads grouped by key head
        padded = x.new_zeros(B, heads, N * C, *x.shape[3:], dtype=dtype)  # zeros at the end, up to N·C tokens
        padded[:, :, :T] = x.transpose(1, 2)  # one copy, into the (head, token) order the matmuls want
        return padded.view(B, Hk, heads // Hk, N, C, *x.shape[3:])

    q, k, v = chunks(q, Hk), chunks(k, Hk), chunks(v, H)  # q, k: (B, Hk, 1, N, C, dk); v: (B, Hk, r, N, C, dv)
    g, beta = chunks(g, H), chunks(beta, H)  # (B, Hk, r, N, C)

    G = g.cumsum(-1)  # log of the decay from the chunk's start to each token, inclusive
    causal = torch.ones(C, C, dtype=torch.bool, device=v.device).tril()
    # Γ_ij = e^(G_i − G_j): the decay between token j's write and token i's read. Masked before the exp: above the
    # diagonal G_i − G_j > 0 can overflow to inf, and inf · 0 is nan
    Gamma = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # (B, Hk, r, N, C, C)
    KK = k @ k.transpose(-1, -2)  # (B, Hk, 1, N, C, C): once per key head, shared by its r value heads
    QK = q @ k.transpose(-1, -2)
    # A = I + strictly_lower(βKKᵀ ⊙ Γ). The solver is told the diagonal is 1 and reads only below it, so the
    # diagonal and the (zero) upper part of this product are never used. Solving against I gives A⁻¹ (C × C) in
    # one call; applying it to both right-hand sides is then two matrix products (faster than solving for each).
    eye = torch.eye(C, dtype=dtype, device=v.device)
    A_inv = torch.linalg.solve_triangular(beta[..., None] * KK * Gamma, eye, upper=False, unitriangular=True)
    U = (A_inv * beta[..., None, :]) @ v  # A⁻¹(βV): (B, Hk, r, N, C, dv)
    W = (A_inv * (beta * G.exp())[..., None, :]) @ k  # A⁻¹(βe^G K): (B, Hk, r, N, C, dk)
    P = QK * Gamma  # (B, Hk, r, N, C, C): within-chunk attention, with its diagonal (Γ_ii = 1)
    Qd = q * G.exp()[..., None]  # (B, Hk, r, N, C, dk): q reads a state that has decayed by e^G_i
    # k's write still decays by e^(G_C − G_j) before the chunk ends. Stored transposed, (…, dk, C): a matmul with a
    # transposed view as its left operand runs at half speed
    Kd_T = (k * (G[..., -1:] - G).exp()[..., None]).transpose(-1, -2).contiguous()
    chunk_decay = G[..., -1].exp()[..., None, None]  # (B, Hk, r, N, 1, 1)

    S = v.new_zeros(B, Hk, r, dk, dv) if state is None else state.to(dtype).reshape(B, Hk, r, dk, dv)
    out = torch.empty_like(v)  # (B, Hk, r, N, C, dv)
    for n in range(N):
        V_new = U[..., n, :, :] - W[..., n, :, :] @ S  # the corrections, now that the carried state is known
        out[..., n, :, :] = Qd[..., n, :, :] @ S + P[..., n, :, :] @ V_new
        S = chunk_decay[..., n, :, :] * S + Kd_T[..., n, :, :] @ V_new
    out = out.reshape(B, H, N * C, dv)[:, :, :T].transpose(1, 2)  # (B, T, H, dv)
    return out.to(out_dtype), S.reshape(B, H, dk, dv)


class DeltaNetCache:
    """What one linear-attention layer remembers between calls: the last K−1 pre-conv inputs `conv` (B, C, K−1),
    in the model dtype, and the fp32 recurrent `state` (B, Hv, dk, dv). Neither grows with the context."""

    def __init__(self) -> None:
        self.conv: torch.Tensor | None = None
        self.state: torch.Tensor | None = None


class GatedDeltaNet(nn.Module):
    """One linear-attention mixer, `layers.N.linear_attn.*`: (B, T, d) -> (B, T, d)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.Hk, self.Hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        self.dk, self.dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        assert self.Hv % self.Hk == 0, f"value heads ({self.Hv}) must be a multiple of key heads ({self.Hk})"
        C = 2 * self.Hk * self.dk + self.Hv * self.dv  # conv channels: [q | k | v]
        self.in_proj_qkv = nn.Linear(d, C, bias=False)
        self.in_proj_z = nn.Linear(d, self.Hv * self.dv, bias=False)  # the output gate
        self.in_proj_b = nn.Linear(d, self.Hv, bias=False)  # write strength β = sigmoid(b)
        self.in_proj_a = nn.Linear(d, self.Hv, bias=False)  # decay g = −e^A_log · softplus(a + dt_bias)
        self.conv1d = nn.Conv1d(C, C, cfg.linear_conv_kernel_dim, groups=C, bias=False)  # weight (C, 1, K)
        self.dt_bias = nn.Parameter(torch.ones(self.Hv))
        self.A_log = nn.Parameter(torch.zeros(self.Hv))
        self.norm = GatedRMSNorm(self.dv, cfg.rms_norm_eps)
        self.out_proj = nn.Linear(self.Hv * self.dv, d, bias=False)

    def split_heads(self, u, scale=True):
        """The conv's output (B, T, C) -> q, k (B, T, Hk, dk) and v (B, T, Hv, dv). q and k are l2-normalised in
        fp32 (so |q| = |k| = 1 exactly enough for the delta rule), q also scaled by dk^-½ unless scale=False (the
        fast decode step divides by √dk instead, as transformers' step does); key heads stay Hk: the kernels share
        them."""
        B, T, _ = u.shape
        q, k, v = u.split([self.Hk * self.dk, self.Hk * self.dk, self.Hv * self.dv], dim=-1)
        q = l2norm(q.reshape(B, T, self.Hk, self.dk).float())
        q = q * self.dk ** -0.5 if scale else q
        k = l2norm(k.reshape(B, T, self.Hk, self.dk).float())
        return q, k, v.reshape(B, T, self.Hv, self.dv)

    def gates(self, b, a):
        """in_proj_b's and in_proj_a's outputs (B, T, Hv) -> beta = sigmoid(b), the share of the error written, in
        the model dtype, and g, the log of the decay, in fp32 as the reference computes it (the kernel sums it into
        e^(G_i − G_j) over a chunk: bf16's 8 bits per term would shift every decay); softplus > 0 keeps g ≤ 0."""
        return b.sigmoid(), -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias.float())

    def output(self, o, z):
        """The rule's output o (B, T, Hv, dv) -> (B, T, d): per head normalised, then gated by z (in_proj_z's
        output, (B, T, Hv·dv)), then out_proj."""
        B, T = o.shape[:2]
        o = self.norm(o, z.reshape(B, T, self.Hv, self.dv))
        return self.out_proj(o.reshape(B, T, self.Hv * self.dv))

    def remember(self, qkv, b, a, cache=None):
        """The memory's part: in_proj_qkv's, in_proj_b's and in_proj_a's outputs (B, T, C), (B, T, Hv) twice ->
        the rule's output o (B, T, Hv, dv); the cache's conv window and state move on past the T tokens. It reads
        no projection weight, only the conv's kernel: a speculative rollback (qwen/speculative.py) replays it alone
        on the projections the verify pass already computed."""
        u, conv = causal_conv(qkv, self.conv1d.weight, cache.conv if cache is not None else None)
        q, k, v = self.split_heads(u)  # (B, T, Hk, dk) twice, (B, T, Hv, dv)
        beta, g = self.gates(b, a)  # (B, T, Hv) each
        state = cache.state if cache is not None else None
        rule = recurrent_delta_rule if qkv.shape[1] == 1 and state is not None else chunked_delta_rule
        o, state = rule(q, k, v, g, beta, state)  # (B, T, Hv, dv)
        if cache is not None:
            cache.conv, cache.state = conv, state
        return o

    def forward(self, x: torch.Tensor, cache: DeltaNetCache | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:  # (B, T) for the new tokens: a padded position must write nothing into the state
            x = x * mask[:, :, None].to(x.dtype)
        o = self.remember(self.in_proj_qkv(x), self.in_proj_b(x), self.in_proj_a(x), cache)  # (B, T, Hv, dv)
        return self.output(o, self.in_proj_z(x))  # (B, T, d): the gate z and out_proj serve the output alone
