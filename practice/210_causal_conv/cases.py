"""Problem 210: cases and oracle.

Oracle: qwen/deltanet.py's causal_conv, which tests/test_deltanet.py proves equal to transformers' causal_conv1d_fn
(no state) and causal_conv1d_update (with a state): bit for bit in bf16, to fp32 rounding in fp32.
"""
import torch

from practice.grading import Case, Tol
from qwen.deltanet import causal_conv as oracle

# bf16: one grid step (a sum in another order may round apart); fp32: 1e-6·max(1, max|y|) + 1e-5·|y|.
# The state is a copy of inputs: exact in any dtype, and the tolerance lets nothing else through.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-6)

# (B, T, C, K, with a state, dtype, note)
HIDDEN = [(1, 10, 8, 4, False, torch.float32, "fp32, from the start of a sequence"),
          (2, 7, 16, 4, True, torch.float32, "fp32, continuing from a state"),
          (2, 1, 24, 4, True, torch.float32, "one token with a state: a decode step"),
          (1, 2, 8, 4, True, torch.float32, "two tokens, fewer than K − 1: the new state mixes old and new"),
          (1, 2, 8, 4, False, torch.float32, "two tokens from the start"),
          (3, 33, 12, 3, True, torch.float32, "K = 3"),
          (2, 9, 6, 2, True, torch.float32, "K = 2"),
          (2, 40, 64, 4, False, torch.bfloat16, "bf16, from the start"),
          (2, 5, 64, 4, True, torch.bfloat16, "bf16, with a state"),
          (1, 1, 128, 4, True, torch.bfloat16, "bf16 decode step"),
          (4, 64, 96, 4, True, torch.float32, "a longer batch")]


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
