"""book/ch07.py and the memory bill of qwen/family.py: the formulas against hand counts and against the caches our
layer and transformers' really keep, and each figure drawn on the synthetic checkpoint."""
import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from book import ch07  # noqa: E402
from qwen import family  # noqa: E402
from qwen.config import Config  # noqa: E402
from qwen.deltanet import DeltaNetCache, GatedDeltaNet  # noqa: E402
from qwen.weights import Weights, fill  # noqa: E402


def figure_text(fig):
    return " | ".join([fig.get_suptitle()] + [ax.get_title() for ax in fig.axes])


def test_bill_by_hand():
    """0.8B: state 16·128·128·4 B = 1 MiB, conv 3·(2·16·128 + 16·128)·2 B = 36,864 B; KV 2·2·256·2 B per token."""
    s = family.SIZES["0.8B"]
    assert family.linear_layer_bytes(s) == 1_048_576 + 36_864
    assert family.kv_bytes_per_token(s) == 2048
    assert family.cache_bytes(s, 32768) == (6 * 32768 * 2048, 18 * 1_085_440)
    assert family.all_attention_bytes(s, 32768) == 24 * 32768 * 2048
    big = family.SIZES["27B"]  # 48 value heads, 16 full-attention layers of 4 KV heads
    assert family.cache_bytes(big, 0) == (0, 48 * (48 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 48 * 128) * 2))
    assert family.cache_bytes(big, 1)[0] == 16 * 2 * 4 * 256 * 2


def test_bill_is_what_the_caches_hold(synthetic):
    """The formula against the bytes our DeltaNetCache and transformers' cache really hold, in bf16."""
    from transformers import AutoConfig, DynamicCache
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    cfg = Config.load(synthetic)
    layer = fill(GatedDeltaNet(cfg), Weights(synthetic), "layers.0.linear_attn.").to(torch.bfloat16)
    x = torch.randn(1, 50, cfg.hidden_size).bfloat16()
    cache = DeltaNetCache()
    with torch.no_grad():
        layer(x, cache=cache)
    held = sum(t.numel() * t.element_size() for t in (cache.state, cache.conv))
    assert held == family.linear_layer_bytes(cfg)
    hcfg = AutoConfig.from_pretrained(synthetic).text_config
    theirs, hf_cache = Qwen3_5GatedDeltaNet(hcfg, 0).to(torch.bfloat16), DynamicCache(config=hcfg)
    with torch.no_grad():
        theirs(x, cache=hf_cache)
    state, conv = hf_cache.layers[0].recurrent_states[0], hf_cache.layers[0].conv_states[0]
    assert state.dtype == torch.float32 and state.numel() == \
        cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
    assert conv.shape[-1] == cfg.linear_conv_kernel_dim  # transformers keeps K inputs; the newest K − 1 are read again


def test_memory_figure():
    fig = ch07.memory_figure({"a": (1e-16, 0.5), "b": (0.0, 2.0)}, (0.5, 0.9))
    assert len(fig.axes[0].patches) == 4 and len(fig.axes[1].lines) == 2
    assert "synthetic" not in figure_text(fig)


@pytest.fixture(scope="module")
def gates(synthetic):
    cfg = Config.load(synthetic)
    T, Hv = 7, cfg.linear_num_value_heads
    g = torch.Generator().manual_seed(0)
    return [f"t{i}" for i in range(T)], torch.rand(T, Hv, generator=g), torch.rand(T, Hv, generator=g)


def test_gates_and_state_figures(gates):
    import matplotlib.pyplot as plt

    tokens, decay, beta = gates
    fig = ch07.gates_figure(tokens, decay, beta, True)
    assert figure_text(fig).count("synthetic weights") == 1  # once for the figure, not once per panel
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == tokens
    fig = ch07.state_norm_figure(tokens, decay.cumsum(0), True)
    assert len(fig.axes[0].lines) == decay.shape[1] and "synthetic weights" in figure_text(fig)
    assert "synthetic" not in figure_text(ch07.state_norm_figure(tokens, decay, False))
    plt.close("all")


def test_chunk_and_bill_figures():
    import matplotlib.pyplot as plt

    G = -torch.rand(6).cumsum(0)
    Gamma = (G[:, None] - G[None, :]).exp().tril()
    fig = ch07.chunk_figure(Gamma, torch.eye(6) + Gamma.tril(-1) * 0.3, 2, True)
    assert "synthetic weights" in figure_text(fig) and "value head 2" in figure_text(fig)
    fig = ch07.memory_bill_figure()
    assert len(fig.axes[1].patches) == 2 * len(family.SIZES)
    heights = [p.get_height() for p in fig.axes[1].patches]
    assert heights[0] == pytest.approx((18 * 1_085_440 + 6 * 32768 * 2048) / 2 ** 30)  # the 0.8B, as counted above
    plt.close("all")


def test_state_is_fp32_whatever_mamba_ssm_dtype_says(synthetic):
    """qwen/family.py counts the state at 4 bytes (STATE_BYTES): transformers' cache and ours keep it in fp32 even
    when the config says mamba_ssm_dtype = "bfloat16" and the layer runs in bf16."""
    from transformers import AutoConfig, DynamicCache
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    hcfg = AutoConfig.from_pretrained(synthetic).text_config
    hcfg.mamba_ssm_dtype = "bfloat16"
    x = torch.randn(1, 9, hcfg.hidden_size).bfloat16()
    theirs, hf_cache = Qwen3_5GatedDeltaNet(hcfg, 0).to(torch.bfloat16), DynamicCache(config=hcfg)
    ours, cache = fill(GatedDeltaNet(Config.load(synthetic)), Weights(synthetic), "layers.0.linear_attn.") \
        .to(torch.bfloat16), DeltaNetCache()
    with torch.no_grad():
        theirs(x, cache=hf_cache)
        ours(x, cache=cache)
    assert hf_cache.layers[0].recurrent_states[0].dtype == cache.state.dtype == torch.float32
    assert family.STATE_BYTES == 4


def test_half_life_toy_gamma_and_crossing():
    """The gates figure shows ln ½ / g (by hand: e^g = 0.5 → 1 token, 0.99 → 68.97); the toy Γ is 0.95^(i − j); the
    bill's crossing is the 0.8B's 1,085,440 bytes of layer state over 2,048 bytes of K and V per token."""
    import math

    import matplotlib.pyplot as plt
    import numpy as np

    decay = torch.tensor([[0.5, 0.99], [0.9, 0.5]])
    fig = ch07.gates_figure(["a", "b"], decay, torch.rand(2, 2), False)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), [[1.0, math.log(0.5) / math.log(0.9)],
                                                                   [math.log(0.5) / math.log(0.99), 1.0]], rtol=1e-5)
    assert "log scale" in figure_text(fig)
    i, j = np.tril_indices(6)
    G = torch.full((6,), math.log(0.95)).cumsum(0)
    Gamma = (G[:, None] - G[None, :]).exp().tril()
    fig = ch07.toy_gamma_figure(Gamma, 0.95)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array()[i, j], 0.95 ** (i - j), rtol=1e-6)
    fig = ch07.memory_bill_figure()
    assert fig.axes[0].get_xscale() == "log"
    assert any(t.get_text().startswith(f"equal at {1_085_440 / 2048:,.0f} tokens") for t in fig.axes[0].texts)
    plt.close("all")
