"""Problem 211: cases, oracle and known mistakes.

Oracle: qwen/deltanet.py's recurrent_delta_rule, which tests/test_deltanet.py proves equal to transformers'
torch_recurrent_gated_delta_rule (fp32, 1e-5), to hand computations, and to the chunked form (float64, 1e-12).
"""
import torch

from practice.grading import Case, Mistake, Tol
from qwen.deltanet import recurrent_delta_rule as oracle
from qwen.norm import l2norm

# fp32: 1e-5·max(1, max|y|) + 1e-5·|y| (the order of a sum moves the last bits); the bf16 output: one grid step.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-5)

# (B, T, Hk, Hv, dk, dv, with a state, v's dtype, note). dk = dv first: a transposed outer product still runs there.
HIDDEN = [(1, 12, 2, 2, 8, 8, False, torch.float32, "fp32, from an empty memory"),
          (2, 20, 2, 2, 16, 16, True, torch.float32, "fp32, continuing from a state"),
          (2, 9, 2, 4, 8, 8, True, torch.float32, "value heads = 2 × key heads"),
          (1, 9, 2, 6, 8, 8, False, torch.float32, "value heads = 3 × key heads (as in the 27B)"),
          (1, 1, 4, 4, 16, 16, True, torch.float32, "one token with a state: a decode step"),
          (2, 30, 2, 4, 16, 16, True, torch.bfloat16, "bf16 v and β, fp32 state"),
          (1, 40, 1, 2, 32, 32, False, torch.bfloat16, "bf16, a longer sequence"),
          (2, 64, 2, 2, 16, 16, True, torch.float32, "strong decays: g down to −20"),
          (1, 10, 2, 4, 8, 12, True, torch.float32, "dk ≠ dv"),
          (2, 7, 1, 3, 12, 4, False, torch.float32, "dk ≠ dv, 3 value heads")]


def inputs(g, B, T, Hk, Hv, dk, dv, with_state, dtype, decay=2.0):
    """As the layer makes them: unit q, k (q also scaled by dk^-½), fp32; v, β in the model dtype; g ≤ 0 fp32."""
    q = l2norm(torch.randn(B, T, Hk, dk, generator=g)) * dk ** -0.5
    k = l2norm(torch.randn(B, T, Hk, dk, generator=g))
    v = torch.randn(B, T, Hv, dv, generator=g).to(dtype)
    gate = -decay * torch.rand(B, T, Hv, generator=g)
    beta = torch.rand(B, T, Hv, generator=g).to(dtype)
    state = torch.randn(B, Hv, dk, dv, generator=g) * 0.5 if with_state else None
    return [("q", q), ("k", k), ("v", v), ("g", gate), ("beta", beta), ("state", state)]


def make_cases(tmp):
    one = [("q", torch.tensor([[[[0.6, 0.8]]]])), ("k", torch.tensor([[[[1.0, 0.0]]]])),
           ("v", torch.tensor([[[[2.0, -1.0]]]])), ("g", torch.tensor([[[-0.7]]])),
           ("beta", torch.tensor([[[0.25]]])), ("state", None)]
    g = torch.Generator().manual_seed(21100)
    cases = [Case("example 1", "recurrent_delta_rule", one, None, TOL),
             Case("example 2", "recurrent_delta_rule", inputs(g, 1, 3, 1, 2, 2, 2, True, torch.float32), None,
                  TOL, 21100, "two value heads share one key head")]
    for n, (B, T, Hk, Hv, dk, dv, with_state, dtype, note) in enumerate(HIDDEN, 1):
        seed = 21100 + n
        g = torch.Generator().manual_seed(seed)
        args = inputs(g, B, T, Hk, Hv, dk, dv, with_state, dtype, decay=20.0 if "strong" in note else 2.0)
        cases.append(Case(f"hidden {n}", "recurrent_delta_rule", args, None, TOL, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _rule(q, k, v, g, beta, state, order="decay_first", use_beta=True, outer="k_delta", dtype=torch.float32,
          heads="interleave", read="after"):
    """The delta rule with one thing changed, for recognising a learner's mistake."""
    B, T, Hv, dv = v.shape
    r = Hv // k.shape[2]
    grow = (lambda x: x.repeat_interleave(r, dim=2)) if heads == "interleave" else (lambda x: x.repeat(1, 1, r, 1))
    q, k, vv, g, beta = grow(q).to(dtype), grow(k).to(dtype), v.to(dtype), g.to(dtype), beta.to(dtype)
    S = q.new_zeros(B, Hv, k.shape[-1], dv) if state is None else state.to(dtype)
    out = torch.empty(B, T, Hv, dv, dtype=dtype)
    for t in range(T):
        if read == "before":
            out[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S * g[:, t, :, None, None].exp())
        if order == "decay_first":
            S = S * g[:, t, :, None, None].exp()
        delta = vv[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)
        if use_beta:
            delta = beta[:, t, :, None] * delta
        S = S + (torch.einsum("bhk,bhv->bhkv", k[:, t], delta) if outer == "k_delta"
                 else torch.einsum("bhi,bhj->bhij", delta, k[:, t]))
        if order == "decay_last":
            S = S * g[:, t, :, None, None].exp()
        if read == "after":
            out[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], S)
    return out.to(v.dtype), S


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("decay_after_update", "recurrent_delta_rule", lambda *a: _rule(*a, order="decay_last"),
            _hint("looks like the state decays after the write: forget first (S ← e^g·S), then correct it with "
                  "this token, so the new write is not decayed at once",
                  "看起来状态是在写入之后才衰减的：应先遗忘（S ← e^g·S），再用这个词修正，新写入的内容不应立刻被衰减")),
    Mistake("no_beta", "recurrent_delta_rule", lambda *a: _rule(*a, use_beta=False),
            _hint("looks like β is missing: the correction written is β·(v − Sᵀk), β = sigmoid(b) in (0, 1) is "
                  "how much of the error this token fixes",
                  "看起来漏了 β：写入的修正是 β·(v − Sᵀk)，β = sigmoid(b) ∈ (0, 1) 决定这个词修正多少误差")),
    Mistake("outer_transposed", "recurrent_delta_rule", lambda *a: _rule(*a, outer="delta_k"),
            _hint("looks like the outer product is transposed: S is (dk, dv), rows indexed by the key, so the "
                  "write is k ⊗ δ = k[:, None] · δ[None, :], and the read is Sᵀq",
                  "看起来外积转置了：S 的形状是 (dk, dv)，行按 key 索引，写入应为 k ⊗ δ = k[:, None] · δ[None, :]，"
                  "读出为 Sᵀq")),
    Mistake("state_in_bf16", "recurrent_delta_rule", lambda *a: _rule(*a, dtype=a[2].dtype),
            _hint("looks like the state was kept in the inputs' low precision: the memory sums thousands of small "
                  "writes, so keep it (and the arithmetic) in fp32 and round only the output",
                  "看起来状态保存在输入的低精度里：记忆要累加成千上万次小的写入，状态和运算都应在 fp32 里，"
                  "只把输出舍入")),
    Mistake("tiled_heads", "recurrent_delta_rule", lambda *a: _rule(*a, heads="tile"),
            _hint("looks like key heads were tiled (repeat: 0,1,0,1): value head h uses key head ⌊h / r⌋, "
                  "consecutive value heads share one key head (repeat_interleave: 0,0,1,1)",
                  "看起来 key 头是平铺重复的（repeat：0,1,0,1）：值头 h 使用 key 头 ⌊h / r⌋，相邻的值头共用一个 key 头"
                  "（repeat_interleave：0,0,1,1）")),
    Mistake("read_before_write", "recurrent_delta_rule", lambda *a: _rule(*a, read="before"),
            _hint("looks like o_t was read before token t's write: read after the update, o_t = S_tᵀ q_t",
                  "看起来 o_t 是在写入第 t 个词之前读的：应在更新之后读，o_t = S_tᵀ q_t")),
]
