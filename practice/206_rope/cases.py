"""Problem 206: cases, oracle and known mistakes.

Oracle: qwen/rope.py (RotaryEmbedding, apply_rope), which tests/test_rope.py and tests/test_practice.py prove
bit-exact against transformers' Qwen3_5TextRotaryEmbedding and apply_rotary_pos_emb.
"""
import torch

from practice.grading import EXACT, Case, Mistake, Tol
from qwen.config import Config
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
FREQS = [(256, 0.25, 1e7, "Qwen3.5: 64 of 256 dims, θ = 1e7"),
         (256, 0.25, 10000.0, "θ = 10000, the default when rope_theta is absent"),
         (128, 0.5, 1e6, "head_dim 128, half the dims"),
         (64, 1.0, 500000.0, "every dim rotates"),
         (96, 0.25, 1e7, "R = 24"),
         (64, 0.25, 1e7, "the synthetic checkpoint's heads")]
# (B, T, positions from, positions below, R, theta, dtype, note)
TABLES = [(2, 9, 0, 4096, 64, 1e7, torch.bfloat16, "Qwen3.5 in bf16"),
          (2, 9, 0, 4096, 64, 1e7, torch.float32, "Qwen3.5 in fp32"),
          (1, 1, 29000, 30000, 64, 1e7, torch.bfloat16, "one decode step far into the text"),
          (3, 5, 0, 100, 32, 10000.0, torch.float16, "fp16, θ = 10000"),
          (2, 6, 0, 50, 16, 1e6, torch.float32, "R = 16"),
          (2, 7, 25000, 30000, 64, 1e7, torch.float32, "fp32, positions between 25000 and 30000")]
# (B, H, T, D, R, dtype, note)
APPLIES = [(2, 8, 5, 256, 64, torch.bfloat16, "Qwen3.5 query heads, bf16"),
           (2, 2, 5, 256, 64, torch.float32, "Qwen3.5 key heads, fp32"),
           (1, 4, 7, 64, 16, torch.bfloat16, "the synthetic checkpoint's heads"),
           (2, 3, 4, 32, 32, torch.float32, "every dim rotates"),
           (1, 2, 6, 128, 64, torch.float32, "head_dim 128, half the dims"),
           (3, 1, 1, 256, 64, torch.bfloat16, "one new token, batch 3")]


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


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _hint(en, zh):
    return {"en": en, "zh": zh}


def _adjacent(x, cos, sin):
    """GPT-J / Llama-Meta pairing: dims (2i, 2i+1) turn together by angle i."""
    R = cos.shape[-1]
    c, s = cos[:, None, :, : R // 2], sin[:, None, :, : R // 2]
    even, odd = x[..., 0:R:2], x[..., 1:R:2]
    rot = torch.stack((even * c - odd * s, odd * c + even * s), dim=-1).flatten(-2)
    return torch.cat((rot, x[..., R:]), dim=-1)


def _turn(x, cos, sin, sign=1, where="first"):
    R = cos.shape[-1]
    x_rot = x[..., :R] if where == "first" else x[..., -R:]
    x1, x2 = x_rot.chunk(2, dim=-1)
    out = x_rot * cos[:, None] + sign * torch.cat((-x2, x1), dim=-1) * sin[:, None]
    return torch.cat((out, x[..., R:]), dim=-1) if where == "first" else torch.cat((x[..., :-R], out), dim=-1)


def _fp32_apply(x, cos, sin):
    return qwen_apply_rope(x.float(), cos.float(), sin.float()).to(x.dtype)


def _tables(positions, inv_freq, dtype, interleave=False):
    angle = positions[..., None].float() * inv_freq
    angle = angle.repeat_interleave(2, dim=-1) if interleave else torch.cat((angle, angle), dim=-1)
    return angle.cos().to(dtype), angle.sin().to(dtype)


MISTAKES = [
    Mistake("all_dims", "inv_frequencies",
            lambda D, f, theta: 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32) / D)),
            _hint("looks like head_dim/2 frequencies, θ^(−2j/head_dim): only the first R = int(head_dim · "
                  "partial_rotary_factor) dims of a head rotate (64 of 256 in Qwen3.5), so there are R/2 "
                  "frequencies, θ^(−2j/R), j = 0 … R/2 − 1",
                  "看起来算了 head_dim/2 个频率 θ^(−2j/head_dim)：每个头只有前 R = int(head_dim · "
                  "partial_rotary_factor) "
                  "维旋转（Qwen3.5 是 256 维中的 64 维），所以只有 R/2 个频率 θ^(−2j/R)，j = 0 … R/2 − 1")),
    Mistake("wrong_theta", "inv_frequencies",
            lambda D, f, theta: oracle_inv_frequencies(D, f, 10000.0),
            _hint("looks like θ = 10000 (the RoFormer and Llama 2 value): use the rope_theta argument (1e7 in "
                  "Qwen3.5's configs)",
                  "看起来用了 θ = 10000（RoFormer 和 Llama 2 的取值）："
                  "请使用参数 rope_theta（Qwen3.5 的配置里是 1e7）")),
    Mistake("wrong_theta", "inv_frequencies",
            lambda D, f, theta: oracle_inv_frequencies(D, f, 1e7),
            _hint("looks like θ fixed at 1e7: use the rope_theta argument", "看起来 θ 写死成了 1e7："
                                                                            "请使用参数 rope_theta")),
    Mistake("exponent_j_over_R", "inv_frequencies",
            lambda D, f, theta: 1.0 / (theta ** (torch.arange(0, int(D * f) // 2, dtype=torch.float32) / int(D * f))),
            _hint("looks like θ^(−j/R): the exponent is −2j/R (torch.arange(0, R, 2) / R), so the frequencies "
                  "run from 1 down to θ^(−(R−2)/R), close to 1/θ, not to θ^(−1/2)",
                  "看起来用了 θ^(−j/R)：指数应为 −2j/R（torch.arange(0, R, 2) / R），频率从 1 降到 θ^(−(R−2)/R)，"
                  "接近 1/θ，而不是 θ^(−1/2)")),
    Mistake("fp32_tables", "rope_tables",
            lambda p, inv, dtype: _tables(p, inv, torch.float32),
            _hint("looks like cos and sin kept in fp32: transformers rounds them to the model dtype (`dtype`) "
                  "before they touch q and k, and so must you",
                  "看起来 cos、sin 保留在 fp32：transformers 在用于 q、k 之前把它们舍入到模型的 dtype（参数 dtype），"
                  "你也要这样做")),
    Mistake("adjacent_pairs", "rope_tables",
            lambda p, inv, dtype: _tables(p, inv, dtype, interleave=True),
            _hint("looks like each angle repeated in place (a0, a0, a1, a1, …), the layout of adjacent-pair RoPE: "
                  "Qwen3.5 writes the R/2 angles twice side by side (a0 … a31, a0 … a31)",
                  "看起来每个角度原地重复（a0, a0, a1, a1, …），这是相邻配对 RoPE 的布局："
                  "Qwen3.5 把 R/2 个角度并排写两遍"
                  "（a0 … a31, a0 … a31）")),
    Mistake("adjacent_pairs", "apply_rope", _adjacent,
            _hint("looks like adjacent pairs (2i, 2i+1) were rotated (GPT-J style): Qwen3.5 pairs dim i with dim "
                  "i + R/2 (rotate_half). The two pairings differ by a permutation of each head's dims, so the "
                  "adjacent one is wrong unless the q/k weights are permuted to match",
                  "看起来旋转的是相邻的维度对 (2i, 2i+1)（GPT-J 风格）："
                  "Qwen3.5 把第 i 维与第 i + R/2 维配对（rotate_half）。"
                  "两种配对只差每个头内维度的一个置换，除非把 q/k 的权重相应置换，相邻配对就是错的")),
    Mistake("wrong_sign", "apply_rope", lambda x, c, s: _turn(x, c, s, sign=-1),
            _hint("looks like the rotation goes the wrong way: rotate_half(x) is (−x2, x1), so x_i → x_i·cos − "
                  "x_{i+R/2}·sin and x_{i+R/2} → x_{i+R/2}·cos + x_i·sin",
                  "看起来旋转方向反了：rotate_half(x) 是 (−x2, x1)，所以 x_i → x_i·cos − x_{i+R/2}·sin，"
                  "x_{i+R/2} → x_{i+R/2}·cos + x_i·sin")),
    Mistake("last_dims", "apply_rope", lambda x, c, s: _turn(x, c, s, where="last"),
            _hint("looks like the last R dims were rotated: in Qwen3.5 the first R dims of each head rotate and the "
                  "rest pass through", "看起来旋转的是最后 R 维：Qwen3.5 旋转每个头的前 R 维，其余原样通过")),
    Mistake("fp32_apply", "apply_rope", _fp32_apply,
            _hint("looks like the rotation was computed in fp32 and rounded once: transformers multiplies and adds "
                  "in x's dtype (x·cos + rotate_half(x)·sin), and a bf16 model must match it bit for bit",
                  "看起来旋转在 fp32 里算完才舍入一次：transformers 在 x 的 dtype 里做乘法和加法"
                  "（x·cos + rotate_half(x)·sin），bf16 模型要与它逐位一致")),
]

ERROR_HINTS = [
    (r"index -?\d+ is out of bounds for dimension \d+ with size \d+", "short_table",
     _hint("a position past the end of a table: positions go as far as the text does (up to 30000 in these "
           "cases, further in a long chat). Compute the angles from the positions you are given, positions[..., None]"
           ".float() · inv_freq, instead of looking them up in a table of fixed length",
           "位置超出了表的长度：位置可以和文本一样长（这些用例里到 30000，长对话里更远）。请直接用给定的位置计算角度，"
           "positions[..., None].float() · inv_freq，而不是查一张固定长度的表")),
    (r"must match the size of tensor .* at non-singleton dimension [12]", "heads_axis",
     _hint("cos and sin are (B, T, R) and x is (B, H, T, D): add the head axis, cos[:, None], so that one angle "
           "table serves every head", "cos、sin 是 (B, T, R)，x 是 (B, H, T, D)：加上头的那一维 cos[:, None]，"
                                      "让同一张角度表作用于每个头")),
]
