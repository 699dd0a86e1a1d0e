"""Problem 206: cases and oracle.

Oracle: qwen/rope.py (RotaryEmbedding, apply_rope), which tests/test_rope.py and tests/test_practice.py prove
bit-exact against transformers' Qwen3_5TextRotaryEmbedding and apply_rotary_pos_emb.
"""
import torch

from practice.grading import EXACT, Case, Tol
from qwen.config import Config
from qwen.lang import tr
from qwen.rope import RotaryEmbedding, apply_rope as qwen_apply_rope

FREQ = Tol(rtol=1e-6)  # θ^(−2j/R) and 1/θ^(2j/R) may round 1-2 fp32 steps apart
TABLE = Tol(steps=1, rtol=1e-5, atol=1e-6)  # from the same fp32 angles; bf16: one step at y
APPLY = Tol(rtol=1e-5, atol=1e-6)  # fp32; bf16 cases are EXACT: the same few ops in x's dtype give the same bits


def oracle_inv_frequencies(head_dim, partial_rotary_factor, rope_theta):
    return RotaryEmbedding(Config(head_dim=head_dim, partial_rotary_factor=partial_rotary_factor,
                                  rope_theta=rope_theta)).inv_freq


def oracle_tables(positions, inv_freq, dtype):
    rope = RotaryEmbedding(Config(head_dim=2 * inv_freq.numel(), partial_rotary_factor=1.0))
    rope.inv_freq = inv_freq.clone()  # the given frequencies; text positions, so the M-RoPE axes play no part
    return rope(positions, dtype)


# (head_dim, partial_rotary_factor, rope_theta, note)
FREQS = [(256, 0.25, 1e7, tr("Qwen3.5: 64 of 256 dims, θ = 1e7", "Qwen3.5：256 维里的 64 维，θ = 1e7")),
         (256, 0.25, 10000.0, tr("θ = 10000, the default when rope_theta is absent",
                                 "θ = 10000，配置里没有 rope_theta 时的默认值")),
         (128, 0.5, 1e6, tr("head_dim 128, half the dims", "head_dim 128，旋转一半的维度")),
         (64, 1.0, 500000.0, tr("every dim rotates", "每一维都旋转")),
         (96, 0.25, 1e7, "R = 24"),
         (64, 0.25, 1e7, tr("the synthetic checkpoint's heads", "合成检查点的头"))]
# (B, T, positions from, positions below, R, theta, dtype, note)
TABLES = [(2, 9, 0, 4096, 64, 1e7, torch.bfloat16, tr("Qwen3.5 in bf16", "Qwen3.5 的形状，用 bf16")),
          (2, 9, 0, 4096, 64, 1e7, torch.float32, tr("Qwen3.5 in fp32", "Qwen3.5 的形状，用 fp32")),
          (1, 1, 29000, 30000, 64, 1e7, torch.bfloat16, tr("one decode step far into the text",
                                                           "文本中很靠后的一步解码")),
          (3, 5, 0, 100, 32, 10000.0, torch.float16, tr("fp16, θ = 10000", "fp16，θ = 10000")),
          (2, 6, 0, 50, 16, 1e6, torch.float32, "R = 16"),
          (2, 7, 25000, 30000, 64, 1e7, torch.float32, tr("fp32, positions between 25000 and 30000",
                                                          "fp32，位置在 25000 到 30000 之间"))]
# (B, H, T, D, R, dtype, note)
APPLIES = [(2, 8, 5, 256, 64, torch.bfloat16, tr("Qwen3.5 query heads, bf16", "Qwen3.5 的查询头，bf16")),
           (2, 2, 5, 256, 64, torch.float32, tr("Qwen3.5 key heads, fp32", "Qwen3.5 的键头，fp32")),
           (1, 4, 7, 64, 16, torch.bfloat16, tr("the synthetic checkpoint's heads", "合成检查点的头")),
           (2, 3, 4, 32, 32, torch.float32, tr("every dim rotates", "每一维都旋转")),
           (1, 2, 6, 128, 64, torch.float32, tr("head_dim 128, half the dims", "head_dim 128，旋转一半的维度")),
           (3, 1, 1, 256, 64, torch.bfloat16, tr("one new token, batch 3", "一个新 token，批次大小 3"))]


def _positions(g, B, T, top, low=0):
    return torch.randint(low, top, (B, T), generator=g)


def make_cases(tmp):
    small = torch.tensor([1.0, 0.1])
    cases = [
        Case("example 1", "inv_frequencies", [("head_dim", 8), ("partial_rotary_factor", 0.5),
                                              ("rope_theta", 100.0)], None, FREQ),
        Case("example 2", "rope_tables", [("positions", torch.tensor([[0, 1, 2]])), ("inv_freq", small),
                                          ("dtype", torch.float32)], None, TABLE),
        Case("example 3", "apply_rope", [("x", torch.tensor([[[[1.0, 0.0, 0.0, 0.0, 5.0, 6.0]]]])),
                                         ("cos", torch.tensor([[[0.0, 1.0, 0.0, 1.0]]])),
                                         ("sin", torch.tensor([[[1.0, 0.0, 1.0, 0.0]]]))], None, APPLY),
        Case("example 4", "inv_frequencies", [("head_dim", 256), ("partial_rotary_factor", 0.25),
                                              ("rope_theta", 1e7)], None, FREQ),
    ]
    k = 0
    for head_dim, factor, theta, note in FREQS:
        k += 1
        cases.append(Case(f"hidden {k}", "inv_frequencies", [("head_dim", head_dim),
                                                             ("partial_rotary_factor", factor),
                                                             ("rope_theta", theta)], None, FREQ, None, note))
    for B, T, low, top, R, theta, dtype, note in TABLES:
        k += 1
        g = torch.Generator().manual_seed(20600 + k)
        inv_freq = oracle_inv_frequencies(R, 1.0, theta)
        cases.append(Case(f"hidden {k}", "rope_tables", [("positions", _positions(g, B, T, top, low)),
                                                         ("inv_freq", inv_freq), ("dtype", dtype)],
                          None, TABLE, 20600 + k, note))
    for B, H, T, D, R, dtype, note in APPLIES:
        k += 1
        g = torch.Generator().manual_seed(20600 + k)
        cos, sin = oracle_tables(_positions(g, B, T, 2000), oracle_inv_frequencies(R, 1.0, 1e7), dtype)
        x = (torch.randn(B, H, T, D, generator=g) * 2).to(dtype)
        cases.append(Case(f"hidden {k}", "apply_rope", [("x", x), ("cos", cos), ("sin", sin)], None,
                          APPLY if dtype == torch.float32 else EXACT, 20600 + k, note))
    for c in cases:
        if c.fn == "inv_frequencies":
            c.expected = oracle_inv_frequencies(*c.values())
        elif c.fn == "rope_tables":
            c.expected = tuple(oracle_tables(*c.values()))
        else:
            c.expected = qwen_apply_rope(*c.values())
    return cases
