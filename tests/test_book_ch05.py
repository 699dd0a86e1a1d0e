"""Every figure function of chapter 5 (book/ch05.py) draws, and draws what it claims: silu, relu and gelu and their
slopes; the gate histogram and the share of nearly shut units, on the synthetic checkpoint's layer 0."""
import math

import matplotlib
import numpy as np
import torch
import torch.nn.functional as F

from book import ch05
from qwen.weights import load_weights

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
    W = load_weights(synthetic)
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
