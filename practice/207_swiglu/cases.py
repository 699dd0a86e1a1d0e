"""Problem 207: cases, oracle and known mistakes.

Oracle: qwen/mlp.py (MLP), which tests/test_mlp.py and tests/test_practice.py prove equal to transformers'
Qwen3_5MLP (fp32 to 1e-5, bf16 bit for bit), and torch.sigmoid for silu.
"""
import torch
import torch.nn.functional as F

from practice.grading import EXACT, Case, Mistake, Tol
from qwen.config import Config
from qwen.mlp import MLP

FP32 = Tol(rtol=1e-5, atol=1e-6)  # bf16 cases are EXACT: the same ops in the same dtype give the same bits


@torch.no_grad()
def oracle_mlp(x, gate_weight, up_weight, down_weight):
    mlp = MLP(Config(hidden_size=x.shape[-1], intermediate_size=gate_weight.shape[0])).to(x.dtype)
    for p, w in ((mlp.gate_proj, gate_weight), (mlp.up_proj, up_weight), (mlp.down_proj, down_weight)):
        p.weight.copy_(w)
    return mlp(x)


def oracle_silu(z):
    return z.double().mul(torch.sigmoid(z.double())).float()  # exact to fp32 rounding, independent of F.silu


# (B, T, d, i, dtype, note)
MLPS = [(2, 5, 64, 192, torch.bfloat16, "the synthetic checkpoint's widths, bf16"),
        (2, 5, 64, 192, torch.float32, "the synthetic checkpoint's widths, fp32"),
        (1, 3, 1024, 3584, torch.bfloat16, "Qwen3.5-0.8B's widths, bf16"),
        (1, 1, 1024, 3584, torch.float32, "Qwen3.5-0.8B, one token, fp32"),
        (3, 4, 32, 32, torch.float32, "square: d = i"),
        (2, 2, 48, 80, torch.bfloat16, "batch 2, other widths"),
        (2, 3, 1024, 3584, torch.bfloat16, "Qwen3.5-0.8B's widths, bf16, batch 2")]
SILU = [((4, 64), 4.0, "fp32, (T, i)"), ((2, 3, 16), 30.0, "large: silu(z) ≈ z above, ≈ 0 below"),
        ((100,), 1e-3, "tiny: silu(z) ≈ z / 2")]


def make_cases(tmp):
    ex_x = torch.tensor([[[1.0]]])
    cases = [
        Case("example 1", "silu", [("z", torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0]))], None, FP32),
        Case("example 2", "swiglu_mlp", [("x", ex_x), ("gate_weight", torch.tensor([[1.0], [-1.0]])),
                                         ("up_weight", torch.tensor([[2.0], [3.0]])),
                                         ("down_weight", torch.tensor([[1.0, 1.0]]))], None, FP32),
        Case("example 3", "swiglu_mlp", [("x", torch.tensor([[[1.0, 2.0]]])),
                                         ("gate_weight", torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])),
                                         ("up_weight", torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, -1.0]])),
                                         ("down_weight", torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))],
             None, FP32),
    ]
    k = 0
    for shape, scale, note in SILU:
        k += 1
        g = torch.Generator().manual_seed(20700 + k)
        cases.append(Case(f"hidden {k}", "silu", [("z", torch.randn(shape, generator=g) * scale)], None, FP32,
                          20700 + k, note))
    for B, T, d, i, dtype, note in MLPS:
        k += 1
        g = torch.Generator().manual_seed(20700 + k)
        args = [("x", (torch.randn(B, T, d, generator=g) * 2).to(dtype)),
                ("gate_weight", (torch.randn(i, d, generator=g) / d ** 0.5).to(dtype)),
                ("up_weight", (torch.randn(i, d, generator=g) / d ** 0.5).to(dtype)),
                ("down_weight", (torch.randn(d, i, generator=g) / i ** 0.5).to(dtype))]
        cases.append(Case(f"hidden {k}", "swiglu_mlp", args, None, FP32 if dtype == torch.float32 else EXACT,
                          20700 + k, note))
    for c in cases:
        c.expected = oracle_silu(*c.values()) if c.fn == "silu" else oracle_mlp(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _hint(en, zh):
    return {"en": en, "zh": zh}


def _mlp(act, x, g, u, d, where="gate"):
    gate, up = F.linear(x, g), F.linear(x, u)
    if where == "gate":
        h = act(gate) * up
    elif where == "up":
        h = gate * act(up)
    else:  # after the product
        h = act(gate * up)
    return F.linear(h, d)


def _fp32(x, g, u, d):
    return _mlp(F.silu, x.float(), g.float(), u.float(), d.float()).to(x.dtype)


MISTAKES = [
    Mistake("sigmoid_only", "silu", torch.sigmoid,
            _hint("looks like sigmoid(z): silu(z) = z · sigmoid(z)", "看起来算的是 sigmoid(z)："
                                                                     "silu(z) = z · sigmoid(z)")),
    Mistake("silu_on_up", "swiglu_mlp", lambda x, g, u, d: _mlp(F.silu, x, g, u, d, where="up"),
            _hint("looks like silu went to the up branch (or gate_weight and up_weight were swapped, which gives "
                  "the same): silu belongs on gate_proj's output, down(silu(x·W_gateᵀ) ⊙ x·W_upᵀ)",
                  "看起来 silu 作用在了 up 分支上（或者 gate_weight 与 up_weight 用反了，结果相同）："
                  "silu 应作用在 gate_proj 的输出上，"
                  "down(silu(x·W_gateᵀ) ⊙ x·W_upᵀ)")),
    Mistake("sigmoid_gate", "swiglu_mlp", lambda x, g, u, d: _mlp(torch.sigmoid, x, g, u, d),
            _hint("looks like sigmoid(gate) ⊙ up (a GLU): SwiGLU uses silu(gate) = gate · sigmoid(gate)",
                  "看起来是 sigmoid(gate) ⊙ up（GLU）：SwiGLU 用的是 silu(gate) = gate · sigmoid(gate)")),
    Mistake("silu_after_product", "swiglu_mlp", lambda x, g, u, d: _mlp(F.silu, x, g, u, d, where="after"),
            _hint("looks like silu(gate ⊙ up): apply silu to the gate alone, then multiply by up",
                  "看起来算的是 silu(gate ⊙ up)：silu 只作用在 gate 上，然后再乘 up")),
    Mistake("not_transposed", "swiglu_mlp", lambda x, g, u, d: F.silu(x @ g) * (x @ u) @ d,
            _hint("looks like x @ W: a linear layer's weight is stored (out, in), so it computes x @ Wᵀ "
                  "(F.linear(x, W))", "看起来算的是 x @ W：线性层的权重按 (out, in) 存放，"
                                      "计算的是 x @ Wᵀ（F.linear(x, W)）")),
    Mistake("two_roundings", "swiglu_mlp",
            lambda x, g, u, d: F.linear((F.linear(x, g) * torch.sigmoid(F.linear(x, g))) * F.linear(x, u), d),
            _hint("in bf16, gate · sigmoid(gate) rounds twice (the sigmoid, then the product); transformers uses "
                  "F.silu, which rounds once. Use F.silu, or compute silu in fp32 and round the result",
                  "在 bf16 里 gate · sigmoid(gate) 会舍入两次（sigmoid 一次、乘积一次）；transformers 用 F.silu，"
                  "只舍入一次。"
                  "请用 F.silu，或在 fp32 里算 silu 再舍入结果")),
    Mistake("fp32_down_proj", "swiglu_mlp",
            lambda x, g, u, d: F.linear((F.silu(F.linear(x, g)) * F.linear(x, u)).float(), d.float()).to(x.dtype),
            _hint("looks like down_proj was computed in fp32 and rounded once: transformers calls F.linear on the "
                  "bf16 tensors, and the bf16 kernel does not round a long sum (i = 3584 terms) the way an fp32 "
                  "matmul rounded at the end does: a few outputs land one bf16 step away. Call F.linear on the bf16 "
                  "tensors",
                  "看起来 down_proj 是在 fp32 里算完再舍入一次的：transformers 直接对 bf16 张量调用 F.linear，"
                  "bf16 内核对长求和（i = 3584 项）的舍入方式与 fp32 矩阵乘最后舍入一次不同："
                  "少数输出会差一个 bf16 步长。"
                  "请直接对 bf16 张量调用 F.linear")),
    Mistake("fp32_compute", "swiglu_mlp", _fp32,
            _hint("looks like the MLP was computed in fp32 and rounded at the end: transformers runs the three "
                  "projections, silu and the product in x's dtype, and a bf16 model must match it bit for bit",
                  "看起来整个 MLP 在 fp32 里算完才舍入：transformers 在 x 的 dtype 里做三次投影、silu 和乘积，"
                  "bf16 模型要与它逐位一致")),
]

ERROR_HINTS = [
    (r"mat1 and mat2 shapes cannot be multiplied|size mismatch|must match the size", "not_transposed",
     MISTAKES[4].hint),
]
