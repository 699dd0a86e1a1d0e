"""Every figure function of chapter 6 (book/ch06.py) draws, and draws what it claims: the attention maps are the
probabilities given, tokens on both axes; the gate histogram counts every (token, dim) once; the KV-cache lines
are the bytes transformers' own cache holds per token, for every size."""
from dataclasses import fields

import matplotlib
import numpy as np
import pytest
import torch
from transformers import DynamicCache, Qwen3_5TextConfig

from book import ch06
from qwen import family, sizes
from qwen.attention import GatedAttention
from qwen.config import Config
from qwen.rope import RotaryEmbedding
from qwen.weights import Weights, fill

matplotlib.use("Agg")


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_attention_maps_show_the_probabilities(synthetic):
    cfg = Config.load(synthetic)
    T, heads = 6, [0, 3]
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(cfg.num_attention_heads, T, T, generator=g).masked_fill(
        ~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")), -1)
    tokens = [f"t{i}" for i in range(T)]
    fig = ch06.attention_maps(probs, tokens, heads, "title (synthetic weights)")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == len(heads)
    for ax, h in zip(panels, heads):
        np.testing.assert_array_equal(ax.images[0].get_array(), probs[h].numpy())
        assert [t.get_text() for t in ax.get_xticklabels()] == tokens == [t.get_text() for t in ax.get_yticklabels()]
        assert ax.get_title() == f"head {h}"
    assert fig.get_suptitle().endswith("(synthetic weights)")
    close(fig)


def test_gate_distribution_counts_every_value(synthetic):
    cfg = Config.load(synthetic)
    W = Weights(synthetic)
    attn = fill(GatedAttention(cfg), W, f"layers.{cfg.layer_types.index('full_attention')}.self_attn.")
    x = torch.randn(1, 7, cfg.hidden_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        gate = attn.q_proj(x).view(7, cfg.num_attention_heads, 2, cfg.head_dim)[:, :, 1].reshape(7, -1)
    fig = ch06.gate_distribution(gate, cfg.num_attention_heads, "gate (synthetic weights)")
    hist, bars = fig.axes[:2]
    assert sum(p.get_height() for p in hist.patches) == gate.numel()
    s = torch.sigmoid(gate).view(7, cfg.num_attention_heads, cfg.head_dim)
    means = [p.get_height() for p in bars.patches[:cfg.num_attention_heads]]
    np.testing.assert_allclose(means, s.mean(dim=(0, 2)).numpy(), rtol=1e-5)
    close(fig)


def test_kv_bytes_are_what_transformers_caches():
    """Per token, for each size: the bytes of K and V that transformers' DynamicCache holds after one bf16 token
    (it decides from the config which layers keep K/V and their shapes); and 12 KiB for the real 0.8B by hand."""
    for name, c in family.SIZES.items():
        hf = Qwen3_5TextConfig(**{f.name: getattr(c, f.name) for f in fields(c) if f.name != "source"})
        cache = DynamicCache(config=hf)
        for i, kind in enumerate(hf.layer_types):
            if kind == "full_attention":
                kv = torch.zeros(1, c.num_key_value_heads, 1, c.head_dim, dtype=torch.bfloat16)
                cache.update(kv, kv.clone(), i)
        held = sum(t.numel() * t.element_size() for layer in cache.layers if hasattr(layer, "keys")
                   and layer.keys is not None and layer.keys.numel() for t in (layer.keys, layer.values))
        assert held == family.cache_bytes(c, 1)[0], name
        assert hf.layer_types == c.layer_types, name
    assert family.cache_bytes(family.SIZES["0.8B"], 1)[0] == 6 * 2 * 2 * 256 * 2 == 12 * 1024
    assert family.SIZES["0.8B"].layer_types == sizes.real_config().layer_types  # the real config lists its own


def test_kv_cache_figure_lines():
    """Each size draws its own K/V line, and each size's own DeltaNet state is drawn flat (not the 0.8B's on every
    size), by hand: an fp32 (Hv, dk, dv) state and K − 1 bf16 conv inputs of 2·Hk·dk + Hv·dv channels per linear
    layer. The 0.8B and the 2B have the same 18 DeltaNet layers, as do the 4B and the 9B: one line each."""
    fig = ch06.kv_cache_bytes(family.SIZES, 262_144)
    ax = fig.axes[0]
    lines = ax.get_lines()
    n = len(family.SIZES)
    want = {}
    for line, (name, c) in zip(lines, family.SIZES.items()):
        x, y = line.get_data()
        np.testing.assert_allclose(y / x, c.num_hidden_layers // 4 * 2 * c.num_key_value_heads * c.head_dim * 2)
        assert x[-1] == 262_144
        linear = c.num_hidden_layers - c.num_hidden_layers // 4
        per_layer = c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim * 4 + \
            (c.linear_conv_kernel_dim - 1) * (2 * c.linear_num_key_heads * c.linear_key_head_dim
                                              + c.linear_num_value_heads * c.linear_value_head_dim) * 2
        want.setdefault(linear * per_layer, []).append(name)
    assert list(want.values()) == [["0.8B", "2B"], ["4B", "9B"], ["27B"]]
    flat = [float(line.get_ydata()[0]) for line in lines[n:n + len(want)]]
    assert flat == list(want) and all(len(set(line.get_ydata())) == 1 for line in lines[n:n + len(want)])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.split(":")[0] for t in legend if "DeltaNet" in t] == [" and ".join(v) for v in want.values()]
    close(fig)


def test_rope_tables_used_by_the_chapter_are_the_checkpoints(synthetic):
    """The chapter's attention maps come from the checkpoint's own RoPE (R = D · partial_rotary_factor)."""
    cfg = Config.load(synthetic)
    cos, sin = RotaryEmbedding(cfg)(torch.arange(5)[None], torch.float32)
    assert cos.shape == sin.shape == (1, 5, int(cfg.head_dim * cfg.partial_rotary_factor))


def test_scale_makes_the_spread_independent_of_D_only_for_independent_entries():
    """ch06's qualified claim, measured: with independent unit-variance entries, std(q·k/√D) is 1 at D = 64 and at
    D = 256; when q and k line up (k = q + a little noise) the scaled scores still grow like √D."""
    g = torch.Generator().manual_seed(0)
    for D in (64, 256):
        q, k = torch.randn(20000, D, generator=g), torch.randn(20000, D, generator=g)
        assert abs(float(((q * k).sum(-1) / D ** 0.5).std()) - 1) < 0.03
        aligned = q + 0.1 * torch.randn(20000, D, generator=g)
        assert float(((q * aligned).sum(-1) / D ** 0.5).mean()) == pytest.approx(D ** 0.5, rel=0.05)
