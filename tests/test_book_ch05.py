"""Every figure function of chapter 5 (book/ch05.py) draws, and draws what it claims: silu, relu and gelu and their
slopes; the gate histogram and the share of units that pass almost nothing, on the synthetic checkpoint's layer 0;
the chapter's count of the real MLP against a 4d relu MLP."""
import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from book import ch05
from qwen.weights import Weights

matplotlib.use("Agg")


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_activations_by_hand():
    fig = ch05.activations()
    curves, slopes = fig.axes[:2]
    z, silu = curves.lines[0].get_data()
    np.testing.assert_allclose(silu, z / (1 + np.exp(-z)), atol=1e-6)  # silu(z) = z·sigmoid(z)
    np.testing.assert_allclose(curves.lines[1].get_ydata(), np.maximum(z, 0))
    np.testing.assert_allclose(curves.lines[2].get_ydata(), [z_ * 0.5 * (1 + math.erf(z_ / 2 ** 0.5)) for z_ in z],
                               atol=1e-6)
    s = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(slopes.lines[0].get_ydata(), s * (1 + z * (1 - s)), atol=1e-5)
    # the marked minimum: silu'(z) = 0 there
    zmin = -1.2785
    sm = 1 / (1 + math.exp(-zmin))
    assert abs(sm * (1 + zmin * (1 - sm))) < 1e-4 and abs(zmin * sm + 0.278) < 1e-3
    close(fig)


def test_gate_activations_on_the_checkpoint(synthetic):
    W = Weights(synthetic)
    x = torch.randn(6, W["layers.0.mlp.gate_proj.weight"].shape[1], generator=torch.Generator().manual_seed(0))
    gate = x @ W["layers.0.mlp.gate_proj.weight"].float().T
    up = x @ W["layers.0.mlp.up_proj.weight"].float().T
    tokens = ["a", "b", "c", "d", "e", "f"]
    fig = ch05.gate_activations(gate, up, tokens, "a title (synthetic weights)")
    assert fig.get_suptitle() == "a title (synthetic weights)"
    hist, bars = fig.axes[:2]
    assert sum(p.get_height() for p in hist.containers[0]) == gate.numel()
    h = (F.silu(gate) * up).abs()
    want = [100 * float((row < 0.01 * row.max()).float().mean()) for row in h]
    np.testing.assert_allclose([p.get_height() for p in bars.patches], want, rtol=1e-6)
    assert [t.get_text() for t in bars.get_xticklabels()] == tokens
    close(fig)


def test_swiglu_at_3_5_d_is_31_percent_more_than_a_4d_relu_mlp():
    """Chapter 5: transformers' Qwen3_5MLP at the real 0.8B config against the classic relu MLP of width 4 d (two
    bias-free linears), counted on the meta device: 10.5 d² against 8 d², 31 % more — not the same count."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5MLP

    from qwen.sizes import REAL_TEXT_CONFIG as TEXT_CONFIG
    config = transformers.Qwen3_5TextConfig(**{k: v for k, v in TEXT_CONFIG.items()
                                               if k not in ("model_type", "dtype")})
    d = config.hidden_size
    with torch.device("meta"):
        swiglu = sum(p.numel() for p in Qwen3_5MLP(config, intermediate_size=config.intermediate_size).parameters())
        relu = sum(p.numel() for p in torch.nn.Sequential(torch.nn.Linear(d, 4 * d, bias=False), torch.nn.ReLU(),
                                                          torch.nn.Linear(4 * d, d, bias=False)).parameters())
    assert (swiglu, relu) == (11_010_048, 8_388_608)
    assert f"{swiglu / relu - 1:.0%}" == "31%"
