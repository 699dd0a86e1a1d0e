"""Problem 209: cases, oracle and known mistakes.

Oracle: qwen/attention.py's GatedAttention with a KVCache filled by the same module from the earlier tokens.
tests/test_attention.py proves a prompt processed in pieces equal to the prompt at once (and to transformers' own
cached run); tests/test_practice.py checks, on every case here, that the expected output equals the tail of the
whole sequence processed at once, and that transformers' cached attention gives the same output and cache.
"""
import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F

from practice.grading import Case, Mistake
from qwen.attention import KVCache
from qwen.config import Config
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
STEPS = [(1, 64, 4, 2, 16, 0, 5, 0.5, torch.float32, None, 1e-6, 1.0, "fp32, an empty cache: the prompt itself"),
         (1, 64, 4, 2, 16, 6, 1, 0.5, torch.float32, None, 1e-6, 1.0, "fp32, one new token after 6 cached ones"),
         (2, 64, 4, 2, 64, 7, 3, 0.25, torch.float32, [3, 0], 1e-6, 1.0, "fp32, 3 new tokens after a padded cache "
                                                                          "of 7"),
         (1, 48, 6, 2, 16, 1, 6, 0.25, torch.float32, None, 1e-6, 1.0, "fp32, a first piece shorter than the next"),
         (1, 40, 4, 4, 8, 9, 2, 1.0, torch.float32, None, 1e-6, 1.0, "fp32, no K/V sharing, every dim rotates"),
         (2, 128, 8, 2, 32, 5, 1, 0.25, torch.float32, [0, 2], 1e-6, 1.0, "fp32, 4 query heads per K/V head, padded"),
         (2, 64, 4, 2, 64, 8, 1, 0.25, torch.bfloat16, [2, 0], 1e-6, 1.0, "bf16, the synthetic checkpoint's sizes"),
         (1, 1024, 8, 2, 256, 12, 1, 0.25, torch.bfloat16, None, 1e-6, 1.0, "bf16, the real 0.8B's sizes, one token"),
         (1, 96, 6, 2, 16, 4, 4, 0.25, torch.bfloat16, None, 1e-6, 1.0, "bf16, 4 new tokens after 4"),
         (1, 64, 4, 2, 16, 0, 3, 0.25, torch.bfloat16, None, 1e-6, 1.0, "bf16, an empty cache"),
         (1, 64, 4, 2, 16, 5, 2, 0.25, torch.float32, None, 1e-5, 0.01, "fp32, eps 1e-5 and small activations "
                                                                         "(x ~ 0.01): eps is a tenth of q's mean "
                                                                         "square"),
         (2, 48, 6, 2, 16, 6, 1, 0.25, torch.float32, [2, 0], 1e-4, 0.1, "fp32, eps 1e-4, one padded decode step")]


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


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _step(x, w, cos, sin, cache_k, cache_v, mask, eps, store="rotated", order="append", use_cache=True,
          offset=True, grow=True):
    """attention_step with one thing changed."""
    B, T, _ = x.shape
    D = w["q_norm.weight"].shape[0]
    H, Hkv = w["q_proj.weight"].shape[0] // (2 * D), w["k_proj.weight"].shape[0] // D
    q, gate = F.linear(x, w["q_proj.weight"]).view(B, T, H, 2 * D).split(D, dim=-1)
    q = _rope(_norm(q, w["q_norm.weight"], eps).transpose(1, 2), cos, sin)
    raw = F.linear(x, w["k_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    normed = _norm(raw, w["k_norm.weight"], eps)
    k_new = _rope(normed, cos, sin)
    v_new = F.linear(x, w["v_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    stored = {"rotated": k_new, "before_rope": normed, "before_norm": _rope(raw, cos, sin)}[store]
    if not use_cache:
        k, v, m = k_new, v_new, None if mask is None else mask[:, -T:]
    elif order == "append":
        k, v, m = torch.cat((cache_k, k_new), 2), torch.cat((cache_v, v_new), 2), mask
    else:
        k, v, m = torch.cat((k_new, cache_k), 2), torch.cat((v_new, cache_v), 2), mask
    out = P208._attend(q, k, v, m, offset=offset).transpose(1, 2).reshape(B, T, H * D)
    out = out * torch.sigmoid(gate.reshape(B, T, H * D))
    out = F.linear(out, w["o_proj.weight"])
    if not grow:
        return out, cache_k, cache_v
    if order == "prepend":
        return out, torch.cat((stored, cache_k), 2), torch.cat((v_new, cache_v), 2)
    return out, torch.cat((cache_k, stored), 2), torch.cat((cache_v, v_new), 2)


def _norm(t, weight, eps):
    tf = t.float()
    return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(t.dtype)


def _rope(t, cos, sin):
    R = cos.shape[-1]
    c, s = cos[:, None], sin[:, None]
    t1, t2 = t[..., :R // 2], t[..., R // 2:R]
    return torch.cat((t1 * c[..., :R // 2] - t2 * s[..., :R // 2], t2 * c[..., R // 2:] + t1 * s[..., R // 2:],
                      t[..., R:]), dim=-1)


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("cache_before_rope", "attention_step", lambda *a: _step(*a, store="before_rope"),
            _hint("looks like the keys were stored before RoPE: store them exactly as attention uses them, after "
                  "k_norm and RoPE, so that a cached key never has to be rotated again",
                  "看起来缓存的键是 RoPE 之前的：应按注意力使用它们的样子存，即 k_norm 和 RoPE 之后，"
                  "这样缓存的键不必再旋转")),
    Mistake("cache_before_norm", "attention_step", lambda *a: _step(*a, store="before_norm"),
            _hint("looks like the keys were stored before k_norm: store them after k_norm and RoPE",
                  "看起来缓存的键是 k_norm 之前的：应存 k_norm 和 RoPE 之后的键")),
    Mistake("cache_ignored", "attention_step", lambda *a: _step(*a, use_cache=False),
            _hint("looks like the new tokens attended only to each other: concatenate the cached keys and values "
                  "in front of the new ones (along S) and attend to all of them",
                  "看起来新词元只互相关注：应把缓存的键和值拼在新的前面（沿 S 维），再对全部做注意力")),
    Mistake("new_before_cached", "attention_step", lambda *a: _step(*a, order="prepend"),
            _hint("looks like the new keys were put before the cached ones: the cache holds the earlier tokens, so "
                  "torch.cat((cache_k, k_new), dim=2)",
                  "看起来新键放在了缓存的键前面：缓存里是更早的词元，应 torch.cat((cache_k, k_new), dim=2)")),
    Mistake("mask_no_offset", "attention_step", lambda *a: _step(*a, offset=False),
            _hint("looks like new token i was placed at position i: after S0 cached tokens it sits at S0 + i, and "
                  "sees every cached key plus the new ones up to itself",
                  "看起来第 i 个新词元被放在了位置 i：缓存 S0 个词元之后，它位于 S0 + i，"
                  "能看到所有缓存的键和它之前（含自己）的新键")),
    Mistake("eps_ignored", "attention_step", lambda *a: _step(*a[:7], 1e-6),
            P208.MISTAKES[[m.key for m in P208.MISTAKES].index("eps_ignored")].hint),
    Mistake("cache_not_grown", "attention_step", lambda *a: _step(*a, grow=False),
            _hint("looks like the cache was returned as it came in: return the keys and values of all S0 + T tokens, "
                  "so the next step can read the new ones too",
                  "看起来原样返回了传入的缓存：应返回全部 S0 + T 个词元的键和值，下一步才能读到这次的新词元")),
]
