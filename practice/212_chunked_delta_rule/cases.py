"""Problem 212: cases and oracle.

Oracle: the token-by-token rule, qwen/deltanet.py's recurrent_delta_rule, which tests/test_deltanet.py proves equal
to transformers' torch_recurrent_gated_delta_rule and to hand computations. The chunked form must give its answer:
the lengths are not multiples of the chunk, so the padding and the last, short chunk matter.
"""
import torch

from practice.grading import Case, Tol
from qwen.deltanet import recurrent_delta_rule as oracle
from qwen.lang import tr
from qwen.norm import l2norm

FP32 = Tol(rtol=1e-5, atol=1e-5)  # 1e-5·max(1, max|y|) + 1e-5·|y|: the two forms sum in different orders
FP64 = Tol(rtol=1e-10, atol=1e-10)  # float64 inputs: the two forms agree to rounding (1e-15 measured)

# (B, T, H, dk, dv, chunk_size, with a state, dtype, g's range, note)
HIDDEN = [(1, 20, 2, 8, 8, 8, False, torch.float32, 2.0, tr("T = 20 in chunks of 8: two full chunks and a short one",
                                                            "T = 20，每块 8 个：两个整块加一个短块")),
          (2, 45, 2, 8, 8, 16, True, torch.float32, 2.0, tr("with a state, chunks of 16", "带状态，每块 16 个")),
          (1, 5, 2, 8, 8, 64, True, torch.float32, 2.0, tr("T shorter than one chunk", "T 比一块还短")),
          (2, 64, 2, 16, 16, 64, False, torch.float32, 2.0, tr("exactly one chunk", "恰好一块")),
          (1, 100, 4, 16, 16, 32, True, torch.float32, 2.0, tr("T = 100, chunks of 32", "T = 100，每块 32 个")),
          (1, 70, 2, 8, 12, 16, True, torch.float32, 2.0, "dk ≠ dv"),
          (2, 33, 2, 8, 8, 8, True, torch.float64, 2.0, tr("float64: the two forms agree to rounding",
                                                           "float64：两种形式只差舍入")),
          (1, 130, 2, 16, 16, 64, False, torch.float64, 2.0, tr("float64, T = 130 = 2·64 + 2",
                                                                "float64，T = 130 = 2·64 + 2，最后一块不满")),
          (1, 50, 2, 8, 8, 16, True, torch.float32, 20.0, tr("strong decays: g down to −20", "强衰减：g 低至 −20")),
          (1, 1, 2, 8, 8, 64, True, torch.float32, 2.0, tr("one token", "一个 token")),
          (1, 100, 2, 8, 8, 64, True, torch.float32, 20.0,
           tr("strong decays in chunks of 64: e^G underflows to 0 in fp32",
              "强衰减，每块 64 个：fp32 里 e^G 下溢成 0"))]


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
                  + [("chunk_size", 4)], None, FP32, 21200, tr("T = 10 in chunks of 4", "T = 10，每块 4 个")),
             Case("example 2", "chunked_delta_rule", inputs(g, 1, 7, 2, 4, 4, True, torch.float32)
                  + [("chunk_size", 4)], None, FP32, 21200, tr("with a state", "带状态"))]
    for n, (B, T, H, dk, dv, C, with_state, dtype, decay, note) in enumerate(HIDDEN, 1):
        seed = 21200 + n
        g = torch.Generator().manual_seed(seed)
        args = inputs(g, B, T, H, dk, dv, with_state, dtype, decay=decay)
        cases.append(Case(f"hidden {n}", "chunked_delta_rule", args + [("chunk_size", C)], None,
                          FP64 if dtype == torch.float64 else FP32, seed, note))
    for c in cases:
        c.expected = oracle(*c.values()[:-1])  # the recurrent form has no chunks
    return cases
