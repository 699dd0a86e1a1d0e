"""Problem 211: cases and oracle.

Oracle: qwen/deltanet.py's recurrent_delta_rule, which tests/test_deltanet.py proves equal to transformers'
torch_recurrent_gated_delta_rule (fp32, 1e-5), to hand computations, and to the chunked form (float64, 1e-12).
"""
import torch

from practice.grading import Case, Tol
from qwen.deltanet import recurrent_delta_rule as oracle
from qwen.lang import tr
from qwen.norm import l2norm

# fp32: 1e-5·max(1, max|y|) + 1e-5·|y| (the order of a sum moves the last bits); the bf16 output: one grid step.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-5)

# (B, T, Hk, Hv, dk, dv, with a state, v's dtype, g's range, note). dk = dv first: a transposed outer product still
# runs there.
HIDDEN = [(1, 12, 2, 2, 8, 8, False, torch.float32, 2.0, tr("fp32, from an empty memory", "fp32，从空记忆开始")),
          (2, 20, 2, 2, 16, 16, True, torch.float32, 2.0, tr("fp32, continuing from a state",
                                                             "fp32，从给定的状态接着算")),
          (2, 9, 2, 4, 8, 8, True, torch.float32, 2.0, tr("value heads = 2 × key heads", "值头数 = 2 × 键头数")),
          (1, 9, 2, 6, 8, 8, False, torch.float32, 2.0, tr("value heads = 3 × key heads (as in the 27B)",
                                                           "值头数 = 3 × 键头数（与 27B 相同）")),
          (1, 1, 4, 4, 16, 16, True, torch.float32, 2.0, tr("one token with a state: a decode step",
                                                            "带状态的一个 token：一步解码")),
          (2, 30, 2, 4, 16, 16, True, torch.bfloat16, 2.0, tr("bf16 v and β, fp32 state",
                                                              "v 和 β 为 bf16，状态为 fp32")),
          (1, 40, 1, 2, 32, 32, False, torch.bfloat16, 2.0, tr("bf16, a longer sequence", "bf16，更长的序列")),
          (2, 64, 2, 2, 16, 16, True, torch.float32, 20.0, tr("strong decays: g down to −20", "强衰减：g 低至 −20")),
          (1, 10, 2, 4, 8, 12, True, torch.float32, 2.0, "dk ≠ dv"),
          (2, 7, 1, 3, 12, 4, False, torch.float32, 2.0, tr("dk ≠ dv, 3 value heads", "dk ≠ dv，3 个值头"))]


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
                  TOL, 21100, tr("two value heads share one key head", "两个值头共用一个键头"))]
    for n, (B, T, Hk, Hv, dk, dv, with_state, dtype, decay, note) in enumerate(HIDDEN, 1):
        seed = 21100 + n
        g = torch.Generator().manual_seed(seed)
        args = inputs(g, B, T, Hk, Hv, dk, dv, with_state, dtype, decay=decay)
        cases.append(Case(f"hidden {n}", "recurrent_delta_rule", args, None, TOL, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
