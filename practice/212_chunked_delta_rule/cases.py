"""Problem 212: cases, oracle and known mistakes.

Oracle: the token-by-token rule, qwen/deltanet.py's recurrent_delta_rule, which tests/test_deltanet.py proves equal
to transformers' torch_recurrent_gated_delta_rule and to hand computations. The chunked form must give its answer:
the lengths are not multiples of the chunk, so the padding and the last, short chunk matter.
"""
import torch
import torch.nn.functional as F

from practice.grading import Case, Mistake, Tol
from qwen.deltanet import recurrent_delta_rule as oracle
from qwen.norm import l2norm

FP32 = Tol(rtol=1e-5, atol=1e-5)  # 1e-5·max(1, max|y|) + 1e-5·|y|: the two forms sum in different orders
FP64 = Tol(rtol=1e-10, atol=1e-10)  # float64 inputs: the two forms agree to rounding (1e-15 measured)

# (B, T, H, dk, dv, chunk_size, with a state, dtype, note)
HIDDEN = [(1, 20, 2, 8, 8, 8, False, torch.float32, "T = 20 in chunks of 8: two full chunks and a short one"),
          (2, 45, 2, 8, 8, 16, True, torch.float32, "with a state, chunks of 16"),
          (1, 5, 2, 8, 8, 64, True, torch.float32, "T shorter than one chunk"),
          (2, 64, 2, 16, 16, 64, False, torch.float32, "exactly one chunk"),
          (1, 100, 4, 16, 16, 32, True, torch.float32, "T = 100, chunks of 32"),
          (1, 70, 2, 8, 12, 16, True, torch.float32, "dk ≠ dv"),
          (2, 33, 2, 8, 8, 8, True, torch.float64, "float64: the two forms agree to rounding"),
          (1, 130, 2, 16, 16, 64, False, torch.float64, "float64, T = 130 = 2·64 + 2"),
          (1, 50, 2, 8, 8, 16, True, torch.float32, "strong decays: g down to −20"),
          (1, 1, 2, 8, 8, 64, True, torch.float32, "one token"),
          (1, 100, 2, 8, 8, 64, True, torch.float32, "strong decays in chunks of 64: e^G underflows to 0 in fp32")]


def inputs(g, B, T, H, dk, dv, with_state, dtype, decay=2.0):
    q = l2norm(torch.randn(B, T, H, dk, generator=g, dtype=torch.float64)) * dk ** -0.5
    k = l2norm(torch.randn(B, T, H, dk, generator=g, dtype=torch.float64))
    v = torch.randn(B, T, H, dv, generator=g, dtype=torch.float64)
    gate = -decay * torch.rand(B, T, H, generator=g, dtype=torch.float64)
    beta = torch.rand(B, T, H, generator=g, dtype=torch.float64)
    state = torch.randn(B, H, dk, dv, generator=g, dtype=torch.float64) * 0.5 if with_state else None
    named = [("q", q), ("k", k), ("v", v), ("g", gate), ("beta", beta), ("state", state)]
    return [(n, None if x is None else x.to(dtype)) for n, x in named]


def make_cases(tmp):
    g = torch.Generator().manual_seed(21200)
    cases = [Case("example 1", "chunked_delta_rule", inputs(g, 1, 10, 1, 4, 4, False, torch.float32)
                  + [("chunk_size", 4)], None, FP32, 21200, "T = 10 in chunks of 4"),
             Case("example 2", "chunked_delta_rule", inputs(g, 1, 7, 2, 4, 4, True, torch.float32)
                  + [("chunk_size", 4)], None, FP32, 21200, "with a state")]
    for n, (B, T, H, dk, dv, C, with_state, dtype, note) in enumerate(HIDDEN, 1):
        seed = 21200 + n
        g = torch.Generator().manual_seed(seed)
        args = inputs(g, B, T, H, dk, dv, with_state, dtype, decay=20.0 if "strong" in note else 2.0)
        cases.append(Case(f"hidden {n}", "chunked_delta_rule", args + [("chunk_size", C)], None,
                          FP64 if dtype == torch.float64 else FP32, seed, note))
    for c in cases:
        c.expected = oracle(*c.values()[:-1])  # the recurrent form has no chunks
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _chunked(q, k, v, g, beta, state=None, C=64, reset=True, unit=True, carry=True, out_diag=True):
    """The chunked rule with one thing changed, for recognising a learner's mistake."""
    B, T, H, dk = k.shape
    dv, pad = v.shape[-1], -T % C
    N = (T + pad) // C

    def chunks(x):
        x = F.pad(x.transpose(1, 2), (0, 0, 0, pad) if x.dim() == 4 else (0, pad))
        return x.reshape(B, H, N, C, *x.shape[3:])

    q, k, v, g, beta = (chunks(x) for x in (q, k, v, g, beta))
    G = g.cumsum(-1) if reset else g.reshape(B, H, N * C).cumsum(-1).reshape(B, H, N, C)
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    Gamma = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    L = (beta[..., None] * k @ k.transpose(-1, -2)) * Gamma
    A = torch.eye(C, dtype=q.dtype) + (L.tril(-1) if unit else L.tril())
    U = torch.linalg.solve_triangular(A, beta[..., None] * v, upper=False)
    W = torch.linalg.solve_triangular(A, (beta * G.exp())[..., None] * k, upper=False)
    P = (q @ k.transpose(-1, -2)) * (Gamma if out_diag else Gamma.tril(-1))
    S0 = q.new_zeros(B, H, dk, dv) if state is None else state
    S, out = S0, torch.empty_like(v)
    for n in range(N):
        start = S if carry else S0
        V_new = U[:, :, n] - W[:, :, n] @ start
        out[:, :, n] = (q[:, :, n] * G[:, :, n, :, None].exp()) @ start + P[:, :, n] @ V_new
        K_decayed = k[:, :, n] * (G[:, :, n, -1:] - G[:, :, n])[..., None].exp()
        S = G[:, :, n, -1, None, None].exp() * start + K_decayed.transpose(-1, -2) @ V_new
    return out.reshape(B, H, N * C, dv)[:, :, :T].transpose(1, 2), S


def _not_finite(got, case):
    """NaN or ±inf in the learner's result where every expected value is finite."""
    parts = got if isinstance(got, (tuple, list)) else (got,)
    return all(bool(torch.isfinite(e).all()) for e in case.expected) and any(
        isinstance(p, torch.Tensor) and p.is_floating_point() and not bool(torch.isfinite(p).all()) for p in parts)


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("decay_not_reset", "chunked_delta_rule", lambda *a: _chunked(*a[:6], C=a[6], reset=False),
            _hint("looks like the cumulative decay G runs over the whole sequence: take cumsum(g) within each "
                  "chunk, so G counts from the chunk's start, where the carried state was last updated",
                  "看起来累积衰减 G 是对整个序列求的：应在每个块内部求 cumsum(g)，"
                  "让 G 从块的开头算起——那里是携带的状态最后"
                  "一次更新的地方")),
    Mistake("diagonal_in_system", "chunked_delta_rule", lambda *a: _chunked(*a[:6], C=a[6], unit=False),
            _hint("looks like the diagonal β_i k_i·k_i went into the system: A = I + strictly_lower(βKKᵀ ⊙ Γ) has "
                  "ones on its diagonal (token i's correction does not depend on itself); use tril(-1)",
                  "看起来把对角线 β_i k_i·k_i 也放进了方程组：A = I + 严格下三角(βKKᵀ ⊙ Γ)，"
                  "对角线全是 1（第 i 个词的修正"
                  "不依赖它自己）；请用 tril(-1)")),
    Mistake("state_not_carried", "chunked_delta_rule", lambda *a: _chunked(*a[:6], C=a[6], carry=False),
            _hint("looks like the state is not carried from chunk to chunk: each chunk must start from the state the "
                  "previous one left, S ← e^(G_C) S + (e^(G_C − G) K)ᵀ U",
                  "看起来状态没有从一个块传到下一个块：每个块都应从上一个块留下的状态开始，"
                  "S ← e^(G_C) S + (e^(G_C − G) K)ᵀ U")),
    Mistake("gamma_not_finite", "chunked_delta_rule", None,
            _hint("NaN or inf where every expected value is finite: with strong decays e^(G_i) underflows to 0 "
                  "(G below about −104 in fp32), so e^(G_i) / e^(G_j) is 0/0; and above the diagonal e^(G_i − G_j) "
                  "overflows to inf, which a 0 mask multiplies into NaN. Subtract first and mask before the exp: "
                  "(G_i − G_j).masked_fill(j > i, −inf).exp()",
                  "期望值全是有限数，你的结果里却有 NaN 或 inf：衰减很强时 e^(G_i) 下溢为 0（fp32 里 G 低于约 −104），"
                  "e^(G_i) / e^(G_j) 就成了 0/0；对角线之上 e^(G_i − G_j) 上溢为 inf，再乘 0 掩码就得到 NaN。"
                  "应先相减、在 exp 之前遮挡：(G_i − G_j).masked_fill(j > i, −inf).exp()"),
            check=_not_finite),
    Mistake("output_without_diagonal", "chunked_delta_rule", lambda *a: _chunked(*a[:6], C=a[6], out_diag=False),
            _hint("looks like the output skips each token's own write: (QKᵀ ⊙ Γ) keeps its diagonal (Γ_ii = 1), "
                  "since o_t is read after token t writes",
                  "看起来输出漏掉了每个词自己的写入：(QKᵀ ⊙ Γ) 要保留对角线（Γ_ii = 1），"
                  "因为 o_t 是在第 t 个词写入之后读的")),
]
