"""Problem 207: cases and oracle.

Oracle: qwen/mlp.py (MLP), which tests/test_mlp.py and tests/test_practice.py prove equal to transformers'
Qwen3_5MLP (fp32 to 1e-5, bf16 bit for bit), and torch.sigmoid for silu.
"""
import torch

from practice.grading import EXACT, Case, Tol
from qwen.config import Config
from qwen.lang import tr
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
MLPS = [(2, 5, 64, 192, torch.bfloat16, tr("the synthetic checkpoint's widths, bf16", "合成检查点的宽度，bf16")),
        (2, 5, 64, 192, torch.float32, tr("the synthetic checkpoint's widths, fp32", "合成检查点的宽度，fp32")),
        (1, 3, 1024, 3584, torch.bfloat16, tr("Qwen3.5-0.8B's widths, bf16", "Qwen3.5-0.8B 的宽度，bf16")),
        (1, 1, 1024, 3584, torch.float32, tr("Qwen3.5-0.8B, one token, fp32", "Qwen3.5-0.8B，一个 token，fp32")),
        (3, 4, 32, 32, torch.float32, tr("square: d = i", "方阵：d = i")),
        (2, 2, 48, 80, torch.bfloat16, tr("batch 2, other widths", "批次大小 2，其他宽度")),
        (2, 3, 1024, 3584, torch.bfloat16, tr("Qwen3.5-0.8B's widths, bf16, batch 2",
                                              "Qwen3.5-0.8B 的宽度，bf16，批次大小 2"))]
SILU = [((4, 64), 4.0, tr("fp32, (T, i)", "fp32，(T, i)")),
        ((2, 3, 16), 30.0, tr("large: silu(z) ≈ z above, ≈ 0 below", "输入很大：正半轴 silu(z) ≈ z，负半轴 ≈ 0")),
        ((100,), 1e-3, tr("tiny: silu(z) ≈ z / 2", "输入很小：silu(z) ≈ z / 2"))]


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
