"""Problem 208: cases and oracle.

Oracle: qwen/attention.py (`attention` with `causal_mask`, and `GatedAttention`), which tests/test_attention.py
proves equal to transformers' Qwen3_5Attention (eager: fp32 to 1e-5, bf16 bit for bit) and tests/test_practice.py
checks against transformers on every case here.
"""
import torch

from practice.grading import Case, Tol
from qwen.attention import GatedAttention, attention, causal_mask
from qwen.config import Config
from qwen.lang import tr
from qwen.rope import RotaryEmbedding
from qwen.weights import fill

# fp32: 1e-5·max(1, max|y|) + 1e-5·|y|. bf16: 1 grid step; the order of the statement (transformers' eager order)
# gives the same bits, a fused kernel does not.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-5)


def oracle_attend(q, k, v, mask):
    group = q.shape[1] // k.shape[1]
    allowed = causal_mask(q.shape[2], k.shape[2] - q.shape[2], mask, q.device)
    return attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), allowed)


def module(weights, eps):
    """GatedAttention with the given weights; its sizes read off the weights' shapes."""
    D = weights["q_norm.weight"].shape[0]
    cfg = Config(hidden_size=weights["q_proj.weight"].shape[1], num_attention_heads=weights["q_proj.weight"].shape[0]
                 // (2 * D), num_key_value_heads=weights["k_proj.weight"].shape[0] // D, head_dim=D, rms_norm_eps=eps)
    return fill(GatedAttention(cfg).to(weights["q_proj.weight"].dtype), weights)


@torch.no_grad()
def oracle_gated(x, weights, cos, sin, mask, eps):
    return module(weights, eps)(x, cos, sin, mask=mask)


def layer_weights(g, d, H, Hkv, D, dtype):
    """The six tensors of one attention layer, scaled like trained ones (unit-scale activations)."""
    w = {"q_proj.weight": torch.randn(2 * H * D, d, generator=g) / d ** 0.5,
         "k_proj.weight": torch.randn(Hkv * D, d, generator=g) / d ** 0.5,
         "v_proj.weight": torch.randn(Hkv * D, d, generator=g) / d ** 0.5,
         "o_proj.weight": torch.randn(d, H * D, generator=g) / (H * D) ** 0.5,
         "q_norm.weight": torch.randn(D, generator=g) * 0.3 + 0.3,  # zero-centred: scale 1 + w
         "k_norm.weight": torch.randn(D, generator=g) * 0.3 + 0.1}
    return {k: t.to(dtype) for k, t in w.items()}


def padding(B, T, pads):
    """(B, T) bool with pads[b] padding tokens on the left, and the positions generate() gives such a batch."""
    mask = torch.ones(B, T, dtype=torch.bool)
    for b, n in enumerate(pads):
        mask[b, :n] = False
    return mask, (mask.long().cumsum(-1) - 1).clamp_min(0)


# attend: (B, H, Hkv, T, S, D, dtype, left pads or None, scale of q and k, note)
ATTEND = [(1, 8, 2, 7, 7, 16, torch.float32, None, 1.0, tr("fp32, 8 query heads share 2 K/V heads",
                                                           "fp32，8 个查询头共用 2 个 K/V 头")),
          (1, 6, 2, 5, 9, 48, torch.float32, None, 1.0, tr("fp32, 3 query heads per K/V head, 4 keys from a cache",
                                                           "fp32，每个 K/V 头对应 3 个查询头，有 4 个键来自缓存")),
          (1, 4, 4, 1, 12, 32, torch.float32, None, 1.0,
           tr("fp32, one new token after 11 cached ones, no sharing",
              "fp32，缓存了 11 个 token 之后来一个新 token，K/V 头不共用")),
          (2, 4, 2, 6, 6, 64, torch.float32, [2, 0], 1.0, tr("fp32, left padding: 2 queries see no key",
                                                             "fp32，左填充：有 2 个查询看不到任何键")),
          (2, 8, 2, 4, 10, 256, torch.float32, [3, 0], 2.0, tr("fp32, D = 256 as in Qwen3.5, padded cache",
                                                               "fp32，D = 256（与 Qwen3.5 相同），缓存带填充")),
          (1, 2, 1, 64, 64, 16, torch.float32, None, 2.0, tr("fp32, 64 tokens", "fp32，64 个 token")),
          (2, 8, 2, 9, 9, 64, torch.bfloat16, [0, 4], 1.0, tr("bf16, left padding", "bf16，左填充")),
          (1, 8, 2, 5, 21, 256, torch.bfloat16, None, 2.0, tr("bf16, the 0.8B's heads: H 8, Hkv 2, D 256",
                                                              "bf16，0.8B 的头：H 8，Hkv 2，D 256")),
          (2, 4, 1, 16, 16, 16, torch.bfloat16, None, 3.0, tr("bf16, 4 query heads per K/V head, sharp scores",
                                                              "bf16，每个 K/V 头对应 4 个查询头，分数很尖")),
          (3, 4, 2, 1, 10, 32, torch.float32, [4, 0, 9], 1.0, tr("fp32, one new token (T = 1) after left padding",
                                                                 "fp32，左填充之后的一个新 token（T = 1）")),
          (2, 8, 2, 1, 21, 256, torch.bfloat16, [6, 0], 2.0, tr("bf16, a decode step (T = 1) after left padding",
                                                                "bf16，左填充之后的一步解码（T = 1）"))]
# gated_attention: (B, d, H, Hkv, D, T, partial_rotary_factor, rope_theta, eps, dtype, left pads, scale of x, note)
GATED = [(1, 64, 4, 2, 16, 6, 0.5, 1e4, 1e-6, torch.float32, None, 1.0, tr("fp32, d = H·D", "fp32，d = H·D")),
         (1, 48, 6, 2, 16, 5, 0.25, 1e7, 1e-5, torch.float32, None, 1.0,
          tr("fp32, 3 query heads per K/V head, eps 1e-5", "fp32，每个 K/V 头对应 3 个查询头，eps 1e-5")),
         (2, 64, 4, 2, 64, 7, 0.25, 1e7, 1e-6, torch.float32, [0, 3], 1.0,
          tr("fp32, the synthetic checkpoint's sizes, padded", "fp32，合成检查点的尺寸，带填充")),
         (1, 40, 4, 4, 8, 5, 1.0, 500.0, 1e-6, torch.float32, None, 1.0, tr("fp32, no sharing, every dim rotates",
                                                                            "fp32，K/V 头不共用，每一维都旋转")),
         (1, 128, 8, 2, 32, 3, 0.25, 1e7, 1e-6, torch.float32, None, 1.0, tr("fp32, 4 query heads per K/V head",
                                                                             "fp32，每个 K/V 头对应 4 个查询头")),
         (2, 64, 4, 2, 64, 9, 0.25, 1e7, 1e-6, torch.bfloat16, [2, 0], 1.0,
          tr("bf16, the synthetic checkpoint's sizes, pads", "bf16，合成检查点的尺寸，带填充")),
         (1, 1024, 8, 2, 256, 4, 0.25, 1e7, 1e-6, torch.bfloat16, None, 1.0, tr("bf16, the real 0.8B's sizes",
                                                                                "bf16，真实 0.8B 的尺寸")),
         (1, 96, 6, 2, 16, 6, 0.25, 1e4, 1e-6, torch.bfloat16, None, 1.0, tr("bf16, rope_theta 10000 (the default)",
                                                                             "bf16，rope_theta 10000（默认值）")),
         (1, 64, 4, 2, 16, 5, 0.25, 1e7, 1e-5, torch.float32, None, 0.01,
          tr("fp32, small activations (x ~ 0.01): eps 1e-5 is a tenth of q's mean square",
             "fp32，激活值很小（x ~ 0.01）：eps 1e-5 是 q 均方的十分之一")),
         (2, 64, 4, 2, 16, 5, 0.25, 1e7, 1e-5, torch.bfloat16, [1, 0], 0.01,
          tr("bf16, small activations with eps 1e-5, padded", "bf16，激活值很小，eps 1e-5，带填充"))]


def make_cases(tmp):
    e = torch.e
    cases = [
        Case("example 1", "attend", [("q", torch.tensor([[[[1.0, 0, 0, 0], [0, 2.0, 0, 0]]]])),
                                     ("k", torch.tensor([[[[2.0, 0, 0, 0], [0, 2.0, 0, 0]]]])),
                                     ("v", torch.tensor([[[[1.0, 2, 3, 4], [5.0, 6, 7, 8]]]])), ("mask", None)],
             torch.tensor([[[[1.0, 2, 3, 4], [1 + 4 * e ** 2 / (1 + e ** 2) + k for k in range(4)]]]]), TOL),
    ]
    g = torch.Generator().manual_seed(20800)
    q, k, v = torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 3, 8, generator=g), torch.randn(1, 2, 3, 8,
                                                                                                      generator=g)
    cases.append(Case("example 2", "attend", [("q", q), ("k", k), ("v", v), ("mask", None)], None, TOL))
    w = layer_weights(g, 32, 2, 1, 16, torch.float32)
    cos, sin = RotaryEmbedding(Config(head_dim=16, partial_rotary_factor=0.25, rope_theta=1e7))(
        torch.arange(4)[None], torch.float32)
    cases.append(Case("example 3", "gated_attention", [("x", torch.randn(1, 4, 32, generator=g)), ("weights", w),
                                                       ("cos", cos), ("sin", sin), ("mask", None), ("eps", 1e-6)],
                      None, TOL))
    n = 0
    for B, H, Hkv, T, S, D, dtype, pads, scale, note in ATTEND:
        n += 1
        g = torch.Generator().manual_seed(20800 + n)
        q = (torch.randn(B, H, T, D, generator=g) * scale).to(dtype)
        k = (torch.randn(B, Hkv, S, D, generator=g) * scale).to(dtype)
        v = torch.randn(B, Hkv, S, D, generator=g).to(dtype)
        mask = padding(B, S, pads)[0] if pads else None
        cases.append(Case(f"hidden {n}", "attend", [("q", q), ("k", k), ("v", v), ("mask", mask)], None, TOL,
                          20800 + n, note))
    for B, d, H, Hkv, D, T, partial, theta, eps, dtype, pads, scale, note in GATED:
        n += 1
        g = torch.Generator().manual_seed(20800 + n)
        w = layer_weights(g, d, H, Hkv, D, dtype)
        mask, pos = padding(B, T, pads or [0] * B)
        cos, sin = RotaryEmbedding(Config(head_dim=D, partial_rotary_factor=partial, rope_theta=theta))(pos, dtype)
        x = (torch.randn(B, T, d, generator=g) * scale).to(dtype)
        cases.append(Case(f"hidden {n}", "gated_attention", [("x", x), ("weights", w), ("cos", cos), ("sin", sin),
                                                             ("mask", mask if pads else None), ("eps", eps)],
                          None, TOL, 20800 + n, note))
    for c in cases:
        if c.expected is None:
            c.expected = (oracle_attend if c.fn == "attend" else oracle_gated)(*c.values())
    return cases
