"""Problem 209: cases and oracle.

Oracle: qwen/attention.py's GatedAttention with a KVCache filled by the same module from the earlier tokens.
tests/test_attention.py proves a prompt processed in pieces equal to the prompt at once (and to transformers' own
cached run); tests/test_practice.py checks, on every case here, that the expected output equals the tail of the
whole sequence processed at once, and that transformers' cached attention gives the same output and cache.
"""
import importlib.util
from pathlib import Path

import torch

from practice.grading import Case
from qwen.attention import KVCache
from qwen.config import Config
from qwen.lang import tr
from qwen.rope import RotaryEmbedding

_spec = importlib.util.spec_from_file_location(
    "practice_cases_208_for_209", Path(__file__).resolve().parent.parent / "208_gated_attention" / "cases.py")
P208 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P208)  # problem 208's weights, padding and oracle module: one source for both
TOL = P208.TOL


@torch.no_grad()
def oracle_step(x, weights, cos, sin, cache_k, cache_v, mask, eps):
    cache = KVCache()
    if cache_k.shape[2]:
        cache.update(cache_k, cache_v)
    out = P208.module(weights, eps)(x, cos, sin, cache=cache, mask=mask)
    return out, cache.k, cache.v


# (B, d, H, Hkv, D, cached S0, new T, partial_rotary_factor, dtype, left pads or None, eps, scale of x, note)
STEPS = [(1, 64, 4, 2, 16, 0, 5, 0.5, torch.float32, None, 1e-6, 1.0, tr("fp32, an empty cache: the prompt itself",
                                                                         "fp32，缓存为空：就是提示本身")),
         (1, 64, 4, 2, 16, 6, 1, 0.5, torch.float32, None, 1e-6, 1.0, tr("fp32, one new token after 6 cached ones",
                                                                         "fp32，缓存了 6 个 token 之后来一个新 token")),
         (2, 64, 4, 2, 64, 7, 3, 0.25, torch.float32, [3, 0], 1e-6, 1.0,
          tr("fp32, 3 new tokens after a padded cache of 7", "fp32，带填充的 7 个缓存 token 之后来 3 个新 token")),
         (1, 48, 6, 2, 16, 1, 6, 0.25, torch.float32, None, 1e-6, 1.0, tr("fp32, a first piece shorter than the next",
                                                                          "fp32，第一段比下一段短")),
         (1, 40, 4, 4, 8, 9, 2, 1.0, torch.float32, None, 1e-6, 1.0, tr("fp32, no K/V sharing, every dim rotates",
                                                                        "fp32，K/V 头不共用，每一维都旋转")),
         (2, 128, 8, 2, 32, 5, 1, 0.25, torch.float32, [0, 2], 1e-6, 1.0,
          tr("fp32, 4 query heads per K/V head, padded", "fp32，每个 K/V 头对应 4 个查询头，带填充")),
         (2, 64, 4, 2, 64, 8, 1, 0.25, torch.bfloat16, [2, 0], 1e-6, 1.0, tr("bf16, the synthetic checkpoint's sizes",
                                                                             "bf16，合成检查点的尺寸")),
         (1, 1024, 8, 2, 256, 12, 1, 0.25, torch.bfloat16, None, 1e-6, 1.0, tr("bf16, the real 0.8B's sizes, one token",
                                                                               "bf16，真实 0.8B 的尺寸，一个 token")),
         (1, 96, 6, 2, 16, 4, 4, 0.25, torch.bfloat16, None, 1e-6, 1.0, tr("bf16, 4 new tokens after 4",
                                                                           "bf16，4 个 token 之后来 4 个新 token")),
         (1, 64, 4, 2, 16, 0, 3, 0.25, torch.bfloat16, None, 1e-6, 1.0, tr("bf16, an empty cache", "bf16，缓存为空")),
         (1, 64, 4, 2, 16, 5, 2, 0.25, torch.float32, None, 1e-5, 0.01,
          tr("fp32, eps 1e-5 and small activations (x ~ 0.01): eps is a tenth of q's mean square",
             "fp32，eps 1e-5，激活值很小（x ~ 0.01）：eps 是 q 均方的十分之一")),
         (2, 48, 6, 2, 16, 6, 1, 0.25, torch.float32, [2, 0], 1e-4, 0.1, tr("fp32, eps 1e-4, one padded decode step",
                                                                            "fp32，eps 1e-4，带填充的一步解码"))]


def step_inputs(B, d, H, Hkv, D, S0, T, partial, dtype, pads, eps, scale, seed):
    """A sequence of S0 + T tokens: the first S0 run through the oracle to fill the cache, the last T are new."""
    g = torch.Generator().manual_seed(seed)
    w = P208.layer_weights(g, d, H, Hkv, D, dtype)
    mask, pos = P208.padding(B, S0 + T, pads or [0] * B)
    cos, sin = RotaryEmbedding(Config(head_dim=D, partial_rotary_factor=partial, rope_theta=1e7))(pos, dtype)
    x = (torch.randn(B, S0 + T, d, generator=g) * scale).to(dtype)
    mask = mask if pads else None
    cache = KVCache()
    if S0:
        with torch.no_grad():
            P208.module(w, eps)(x[:, :S0], cos[:, :S0], sin[:, :S0], cache=cache,
                                 mask=None if mask is None else mask[:, :S0])
    empty = torch.zeros(B, Hkv, 0, D, dtype=dtype)
    return [("x", x[:, S0:]), ("weights", w), ("cos", cos[:, S0:]), ("sin", sin[:, S0:]),
            ("cache_k", cache.k if S0 else empty), ("cache_v", cache.v if S0 else empty), ("mask", mask),
            ("eps", eps)], x, cos, sin


def make_cases(tmp):
    cases = []
    for n, (*sizes, note) in enumerate(STEPS):
        args = step_inputs(*sizes, 20900 + n)[0]
        label = f"example {n + 1}" if n < 2 else f"hidden {n - 1}"
        cases.append(Case(label, "attention_step", args, None, TOL, 20900 + n, note))
    for c in cases:
        c.expected = oracle_step(*c.values())
    return cases
