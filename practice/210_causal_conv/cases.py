"""Problem 210: cases and oracle.

Oracle: qwen/deltanet.py's causal_conv, which tests/test_deltanet.py proves equal to transformers' causal_conv1d_fn
(no state) and causal_conv1d_update (with a state): bit for bit in bf16, to fp32 rounding in fp32.
"""
import torch

from practice.grading import Case, Tol
from qwen.deltanet import causal_conv as oracle
from qwen.lang import tr

# bf16: one grid step (a sum in another order may round apart); fp32: 1e-6·max(1, max|y|) + 1e-5·|y|.
# The state is a copy of inputs: exact in any dtype, and the tolerance lets nothing else through.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-6)

# (B, T, C, K, with a state, dtype, note)
HIDDEN = [(1, 10, 8, 4, False, torch.float32, tr("fp32, from the start of a sequence", "fp32，从序列开头算起")),
          (2, 7, 16, 4, True, torch.float32, tr("fp32, continuing from a state", "fp32，从给定的状态接着算")),
          (2, 1, 24, 4, True, torch.float32, tr("one token with a state: a decode step",
                                                "带状态的一个 token：一步解码")),
          (1, 2, 8, 4, True, torch.float32, tr("two tokens, fewer than K − 1: the new state mixes old and new",
                                               "两个 token，少于 K − 1：新状态里新旧输入都有")),
          (1, 2, 8, 4, False, torch.float32, tr("two tokens from the start", "从开头算起的两个 token")),
          (3, 33, 12, 3, True, torch.float32, "K = 3"),
          (2, 9, 6, 2, True, torch.float32, "K = 2"),
          (2, 40, 64, 4, False, torch.bfloat16, tr("bf16, from the start", "bf16，从开头算起")),
          (2, 5, 64, 4, True, torch.bfloat16, tr("bf16, with a state", "bf16，带状态")),
          (1, 1, 128, 4, True, torch.bfloat16, tr("bf16 decode step", "bf16 的一步解码")),
          (4, 64, 96, 4, True, torch.float32, tr("a longer batch", "更长的批次"))]


def _rand(g, shape, dtype, scale=1.0):
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def make_cases(tmp):
    x = torch.tensor([[[1.0], [10.0], [100.0], [1000.0], [0.0]]]) / 1000  # (1, 5, 1)
    w = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])  # one channel, K = 4
    cases = [Case("example 1", "causal_conv", [("x", x), ("weight", w), ("state", None)], None, TOL),
             Case("example 2", "causal_conv", [("x", x[:, :2]), ("weight", w),
                                               ("state", torch.tensor([[[0.5, -0.25, 0.125]]]))], None, TOL)]
    for k, (B, T, C, K, with_state, dtype, note) in enumerate(HIDDEN, 1):
        seed = 21000 + k
        g = torch.Generator().manual_seed(seed)
        args = [("x", _rand(g, (B, T, C), dtype)), ("weight", _rand(g, (C, 1, K), dtype, 0.5)),
                ("state", _rand(g, (B, C, K - 1), dtype) if with_state else None)]
        cases.append(Case(f"hidden {k}", "causal_conv", args, None, TOL, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
