"""Problem 204: cases and oracle.

Oracle: qwen/norm.py (RMSNorm, GatedRMSNorm, l2norm), which tests/test_practice.py proves equal to transformers'
Qwen3_5RMSNorm (bit-exact in every dtype), Qwen3_5RMSNormGated (fp32 to 1e-6; bf16/fp16 bit-exact: the oracle
rounds in transformers' order) and l2norm (bit-exact).
"""
import torch
import torch.nn as nn

from practice.grading import Case, Tol
from qwen.lang import tr
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


# (dtype, shape, scale of x, eps, a row of zeros, note). Tiny scales put mean(x²) at or below eps, so where eps goes
# matters.
TINY_INPUTS = tr("fp32, tiny inputs: eps matters", "fp32，输入极小：eps 的影响明显")
ONE_VECTOR = tr("fp32, one vector (D,), eps = 1e-5 matters", "fp32，单个向量 (D,)，eps = 1e-5 的影响明显")
FP16_OVERFLOW = tr("fp16, x² overflows fp16", "fp16，x² 在 fp16 里溢出")
ZERO_ROW = tr("fp32, a row of zeros", "fp32，有一行全零")
RMS = [(torch.float32, (2, 3, 64), 1.0, 1e-6, False, tr("fp32, (B, T, D)", "fp32，(B, T, D)")),
       (torch.float32, (4, 128), 1e-4, 1e-6, False, TINY_INPUTS),
       (torch.float32, (32,), 1e-3, 1e-5, False, ONE_VECTOR),
       (torch.bfloat16, (8, 1024), 1.0, 1e-6, False, tr("bf16, D = 1024", "bf16，D = 1024")),
       (torch.bfloat16, (2, 5, 256), 30.0, 1e-6, False, tr("bf16, large inputs", "bf16，输入很大")),
       (torch.bfloat16, (16, 64), 1e-4, 1e-5, False, tr("bf16, tiny inputs, eps = 1e-5", "bf16，输入极小，eps = 1e-5")),
       (torch.bfloat16, (2, 4, 8, 64), 1.0, 1e-6, False, tr("bf16, per head (B, T, H, D) like q_norm",
                                                            "bf16，像 q_norm 那样按头排列：(B, T, H, D)")),
       (torch.float16, (4, 256), 100.0, 1e-6, False, FP16_OVERFLOW),
       (torch.float32, (6, 16), 1.0, 1e-6, True, ZERO_ROW)]
GATE = [(torch.float32, (2, 3, 4, 32), 1.0, 1e-6, False, tr("fp32, (B, T, Hv, dv)", "fp32，(B, T, Hv, dv)")),
        (torch.float32, (4, 64), 1e-4, 1e-6, False, TINY_INPUTS),
        (torch.float32, (16,), 1e-3, 1e-5, False, ONE_VECTOR),
        (torch.bfloat16, (64, 128), 1.0, 1e-6, False, tr("bf16, dv = 128", "bf16，dv = 128")),
        (torch.bfloat16, (8, 4, 128), 3.0, 1e-6, False, tr("bf16, (T, Hv, dv)", "bf16，(T, Hv, dv)")),
        (torch.float16, (4, 128), 100.0, 1e-6, False, FP16_OVERFLOW)]
L2N = [(torch.float32, (2, 3, 4, 32), 1.0, 1e-6, False, tr("fp32, (B, T, H, dk)", "fp32，(B, T, H, dk)")),
       (torch.float32, (4, 128), 1e-4, 1e-6, False, TINY_INPUTS),
       (torch.float32, (16,), 1e-3, 1e-5, False, ONE_VECTOR),
       (torch.float32, (1, 7, 2, 64), 10.0, 1e-6, False, tr("fp32, large inputs", "fp32，输入很大")),
       (torch.float32, (5, 8), 1.0, 1e-6, True, ZERO_ROW)]


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
        for dtype, shape, scale, eps, zero_row, note in table:
            k += 1
            seed = 20400 + k
            g = torch.Generator().manual_seed(seed)
            x = _rand(g, shape, dtype, scale)
            if zero_row:
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
