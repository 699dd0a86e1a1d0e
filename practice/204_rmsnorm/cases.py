"""Problem 204: cases, oracle and known mistakes.

Oracle: qwen/norm.py (RMSNorm, GatedRMSNorm, l2norm), which tests/test_practice.py proves equal to transformers'
Qwen3_5RMSNorm (bit-exact in every dtype), Qwen3_5RMSNormGated (fp32 to 1e-6; bf16/fp16 bit-exact: the oracle
rounds in transformers' order) and l2norm (bit-exact).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from practice.grading import Case, Mistake, Tol
from qwen.norm import GatedRMSNorm, RMSNorm, l2norm as qwen_l2norm

# bf16/fp16: one grid step for RMSNorm (x / sqrt(...) and x * rsqrt(...) may round apart), two for the gated norm
# (the oracle rounds x̂ and x̂·w to the input dtype before the gate, as transformers does; a learner who rounds
# once, at the end, is up to two steps from it and is accepted); fp32: 1e-6 * max(1, max|y|) + 1e-5 * |y|.
NORM = Tol(steps=1, rtol=1e-5, atol=1e-6)
GATED = Tol(steps=2, rtol=1e-5, atol=1e-6)
L2 = Tol(rtol=1e-5, atol=1e-6)


@torch.no_grad()
def oracle_rms_norm(x, weight, eps):
    norm = RMSNorm(x.shape[-1], eps)
    norm.weight = nn.Parameter(weight.clone(), requires_grad=False)  # keeps weight's dtype, as a loaded model does
    return norm(x)


@torch.no_grad()
def oracle_gated(x, gate, weight, eps):
    norm = GatedRMSNorm(x.shape[-1], eps)
    norm.weight = nn.Parameter(weight.clone(), requires_grad=False)
    return norm(x, gate)


def oracle_l2norm(x, eps):
    return qwen_l2norm(x, eps)


def _rand(g, shape, dtype, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=g) * scale + shift).to(dtype)


# (dtype, shape, scale of x, eps, note). Tiny scales put mean(x²) at or below eps, so where eps goes matters.
RMS = [(torch.float32, (2, 3, 64), 1.0, 1e-6, "fp32, (B, T, D)"),
       (torch.float32, (4, 128), 1e-4, 1e-6, "fp32, tiny inputs: eps matters"),
       (torch.float32, (3, 32), 1e-3, 1e-5, "fp32, eps = 1e-5 matters"),
       (torch.bfloat16, (8, 1024), 1.0, 1e-6, "bf16, D = 1024"),
       (torch.bfloat16, (2, 5, 256), 30.0, 1e-6, "bf16, large inputs"),
       (torch.bfloat16, (16, 64), 1e-4, 1e-6, "bf16, tiny inputs"),
       (torch.bfloat16, (2, 4, 8, 64), 1.0, 1e-6, "bf16, per head (B, T, H, D) like q_norm"),
       (torch.float16, (4, 256), 100.0, 1e-6, "fp16, x² overflows fp16"),
       (torch.float32, (6, 16), 1.0, 1e-6, "fp32, a row of zeros")]
GATE = [(torch.float32, (2, 3, 4, 32), 1.0, 1e-6, "fp32, (B, T, Hv, dv)"),
        (torch.float32, (4, 64), 1e-4, 1e-6, "fp32, tiny inputs: eps matters"),
        (torch.float32, (3, 16), 1e-3, 1e-5, "fp32, eps = 1e-5 matters"),
        (torch.bfloat16, (64, 128), 1.0, 1e-6, "bf16, dv = 128"),
        (torch.bfloat16, (8, 4, 128), 3.0, 1e-6, "bf16, (T, Hv, dv)"),
        (torch.float16, (4, 128), 100.0, 1e-6, "fp16, x² overflows fp16")]
L2N = [(torch.float32, (2, 3, 4, 32), 1.0, 1e-6, "fp32, (B, T, H, dk)"),
       (torch.float32, (4, 128), 1e-4, 1e-6, "fp32, tiny inputs: eps matters"),
       (torch.float32, (3, 16), 1e-3, 1e-5, "fp32, eps = 1e-5 matters"),
       (torch.float32, (1, 7, 2, 64), 10.0, 1e-6, "fp32, large inputs"),
       (torch.float32, (5, 8), 1.0, 1e-6, "fp32, a row of zeros")]


def make_cases(tmp):
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    cases = [
        Case("example 1", "rms_norm", [("x", x), ("weight", torch.tensor([0.0, 1.0, 0.0, -0.5])), ("eps", 1e-6)],
             None, NORM),
        Case("example 2", "gated_rms_norm", [("x", x), ("gate", torch.tensor([[0.0, 1.0, -1.0, 2.0]])),
                                             ("weight", torch.tensor([1.0, 1.0, 0.5, 2.0])), ("eps", 1e-6)],
             None, GATED),
        Case("example 3", "l2norm", [("x", torch.tensor([[3.0, 4.0]])), ("eps", 1e-6)], None, L2),
        Case("example 4", "rms_norm", [("x", torch.tensor([[0.5, -1.0, 2.0, 0.25]]).bfloat16()),
                                       ("weight", torch.tensor([0.0, 0.5, -0.25, 1.0]).bfloat16()),
                                       ("eps", 1e-6)], None, NORM),
    ]
    k = 0
    for fn, table in (("rms_norm", RMS), ("gated_rms_norm", GATE), ("l2norm", L2N)):
        for dtype, shape, scale, eps, note in table:
            k += 1
            seed = 20400 + k
            g = torch.Generator().manual_seed(seed)
            x = _rand(g, shape, dtype, scale)
            if "zeros" in note:
                x[1] = 0
            D = shape[-1]
            if fn == "rms_norm":
                args = [("x", x), ("weight", _rand(g, (D,), dtype, 0.5)), ("eps", eps)]
                tol = NORM
            elif fn == "gated_rms_norm":
                gate = _rand(g, shape, dtype, 3.0)
                gate.view(-1)[:4] = torch.tensor([-20.0, 20.0, 0.0, -1.0]).to(dtype)  # a shut, an open and a zero gate
                args = [("x", x), ("gate", gate), ("weight", _rand(g, (D,), dtype, 0.3, 1.0)), ("eps", eps)]
                tol = GATED
            else:
                args = [("x", x), ("eps", eps)]
                tol = L2
            cases.append(Case(f"hidden {k}", fn, args, None, tol, seed, note))
    oracle = {"rms_norm": oracle_rms_norm, "gated_rms_norm": oracle_gated, "l2norm": oracle_l2norm}
    for c in cases:
        c.expected = oracle[c.fn](*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _x_hat(x, eps):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


def _low(x, eps):  # statistics in the input's own dtype
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _eps_outside(x, eps):
    xf = x.float()
    return xf / (xf.pow(2).mean(-1, keepdim=True).sqrt() + eps)


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("plain_weight", "rms_norm",
            lambda x, w, eps: (_x_hat(x, eps) * w.float()).to(x.dtype),
            _hint("looks like x̂ · w: Qwen3.5 stores the RMSNorm weight zero-centred, so the scale is (1 + w)",
                  "看起来算的是 x̂ · w：Qwen3.5 的 RMSNorm 权重是零中心的，比例应为 (1 + w)")),
    Mistake("low_precision_stats", "rms_norm",
            lambda x, w, eps: (_low(x, eps) * (1 + w)).to(x.dtype),
            _hint("looks like the statistics were computed in the input's dtype: square and average in fp32 "
                  "(x.float()), then cast the result back",
                  "看起来统计量是在输入的 dtype 里算的：先 x.float()，在 fp32 里平方、求均值，最后再转回去")),
    Mistake("eps_outside", "rms_norm",
            lambda x, w, eps: (_eps_outside(x, eps) * (1 + w.float())).to(x.dtype),
            _hint("looks like eps was added outside the root, x / (sqrt(mean(x²)) + eps): it belongs inside, "
                  "x / sqrt(mean(x²) + eps) (it matters when mean(x²) is near eps)",
                  "看起来 eps 加在了根号外 x / (sqrt(mean(x²)) + eps)：它应在根号内 x / sqrt(mean(x²) + eps)"
                  "（mean(x²) 接近 eps 时差别明显）")),
    Mistake("ignored_eps", "rms_norm",
            lambda x, w, eps: (_x_hat(x, 1e-6) * (1 + w.float())).to(x.dtype),
            _hint("looks like eps was fixed at 1e-6: use the eps argument", "看起来 eps 写死成了 1e-6："
                                                                            "请使用参数 eps")),
    Mistake("llama_order", "rms_norm",
            lambda x, w, eps: _x_hat(x, eps).to(x.dtype) * (1 + w.float()).to(x.dtype),
            _hint("looks like Llama's order, x̂ rounded to the input dtype before the scale: Qwen3.5 multiplies by "
                  "(1 + w) in fp32 and rounds once, at the end",
                  "看起来是 Llama 的顺序：先把 x̂ 转回输入 dtype 再乘比例。Qwen3.5 在 fp32 里乘 (1 + w)，"
                  "最后只舍入一次")),
    Mistake("mean_over_all", "rms_norm",
            lambda x, w, eps: (x.float() * torch.rsqrt(x.float().pow(2).mean() + eps) * (1 + w.float())).to(x.dtype),
            _hint("looks like the mean was taken over the whole tensor: take it over the last dimension only "
                  "(mean(-1, keepdim=True)), one statistic per vector",
                  "看起来均值是对整个张量求的：应只对最后一维求（mean(-1, keepdim=True)），每个向量一个统计量")),
    Mistake("sum_not_mean", "rms_norm",
            lambda x, w, eps: (x.float() * torch.rsqrt(x.float().pow(2).sum(-1, keepdim=True) + eps)
                               * (1 + w.float())).to(x.dtype),
            _hint("looks like sum(x²) instead of mean(x²): that is l2norm; RMSNorm divides by the root *mean* square",
                  "看起来用了 sum(x²) 而不是 mean(x²)：那是 l2norm；RMSNorm 除以均方根")),
    Mistake("no_root", "rms_norm",
            lambda x, w, eps: (x.float() / (x.float().pow(2).mean(-1, keepdim=True) + eps)
                               * (1 + w.float())).to(x.dtype),
            _hint("looks like the square root is missing: divide by sqrt(mean(x²) + eps)",
                  "看起来少了平方根：应除以 sqrt(mean(x²) + eps)")),
    Mistake("one_plus_w", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x, eps) * (1 + w.float()) * F.silu(z.float())).to(x.dtype),
            _hint("looks like (1 + w) on the gated norm: its weight is plain (initialised to 1), multiply by w itself",
                  "看起来带门的 RMSNorm 也用了 (1 + w)：它的权重是普通的（初始为 1），直接乘 w")),
    Mistake("silu_before_norm", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x.float() * F.silu(z.float()), eps) * w.float()).to(x.dtype),
            _hint("looks like the gate was applied before the norm: normalise x first, then multiply by silu(gate)",
                  "看起来先乘了门再归一化：应先归一化 x，再乘 silu(gate)")),
    Mistake("low_precision_stats", "gated_rms_norm",
            lambda x, z, w, eps: (_low(x, eps) * w * F.silu(z)).to(x.dtype),
            _hint("looks like the statistics were computed in the input's dtype: square and average in fp32",
                  "看起来统计量是在输入的 dtype 里算的：应在 fp32 里平方、求均值")),
    Mistake("eps_outside", "gated_rms_norm",
            lambda x, z, w, eps: (_eps_outside(x, eps) * w.float() * F.silu(z.float())).to(x.dtype),
            _hint("looks like eps was added outside the root: x / sqrt(mean(x²) + eps)",
                  "看起来 eps 加在了根号外：应为 x / sqrt(mean(x²) + eps)")),
    Mistake("ignored_eps", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x, 1e-6) * w.float() * F.silu(z.float())).to(x.dtype),
            _hint("looks like eps was fixed at 1e-6: use the eps argument", "看起来 eps 写死成了 1e-6："
                                                                            "请使用参数 eps")),
    Mistake("sigmoid_gate", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x, eps) * w.float() * torch.sigmoid(z.float())).to(x.dtype),
            _hint("looks like sigmoid(gate): the gate is silu(gate) = gate · sigmoid(gate)",
                  "看起来用了 sigmoid(gate)：门是 silu(gate) = gate · sigmoid(gate)")),
    Mistake("raw_gate", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x, eps) * w.float() * z.float()).to(x.dtype),
            _hint("looks like the gate was used as it is: multiply by silu(gate)", "看起来门没有过激活："
                                                                                   "应乘 silu(gate)")),
    Mistake("no_gate", "gated_rms_norm",
            lambda x, z, w, eps: (_x_hat(x, eps) * w.float()).to(x.dtype),
            _hint("looks like the gate is missing: multiply by silu(gate)", "看起来漏了门：应再乘 silu(gate)")),
    Mistake("mean_not_sum", "l2norm",
            lambda x, eps: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps),
            _hint("looks like mean(x²) instead of sum(x²): l2norm scales to unit length, sqrt(sum(x²))",
                  "看起来用了 mean(x²) 而不是 sum(x²)：l2norm 缩放到单位长度，除以 sqrt(sum(x²))")),
    Mistake("eps_outside", "l2norm",
            lambda x, eps: x / ((x * x).sum(-1, keepdim=True).sqrt() + eps),
            _hint("looks like eps was added outside the root: x / sqrt(sum(x²) + eps)",
                  "看起来 eps 加在了根号外：应为 x / sqrt(sum(x²) + eps)")),
    Mistake("f_normalize", "l2norm",
            lambda x, eps: F.normalize(x, dim=-1, eps=eps),
            _hint("looks like F.normalize, which divides by max(‖x‖, eps): here eps sits inside the root, "
                  "x / sqrt(sum(x²) + eps), as in the FLA kernels Qwen3.5 was trained with",
                  "看起来用了 F.normalize，它除以 max(‖x‖, eps)；这里 eps 在根号内：x / sqrt(sum(x²) + eps)")),
    Mistake("ignored_eps", "l2norm",
            lambda x, eps: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6),
            _hint("looks like eps was fixed at 1e-6: use the eps argument", "看起来 eps 写死成了 1e-6："
                                                                            "请使用参数 eps")),
    Mistake("no_root", "l2norm",
            lambda x, eps: x / ((x * x).sum(-1, keepdim=True) + eps),
            _hint("looks like the square root is missing: divide by sqrt(sum(x²) + eps)",
                  "看起来少了平方根：应除以 sqrt(sum(x²) + eps)")),
]

ERROR_HINTS = [
    (r"must match the size of tensor", "keepdim",
     _hint("the shapes do not broadcast: keep the reduced dimension, mean(-1, keepdim=True), so that (..., 1) "
           "divides (..., D)", "形状无法广播：求均值时保留被约去的那一维 mean(-1, keepdim=True)，"
                               "(..., 1) 才能去除 (..., D)")),
]
