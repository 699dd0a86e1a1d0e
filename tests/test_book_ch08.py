"""book/ch08.py: each figure draws on the synthetic checkpoint's numbers and says 'synthetic weights' exactly when
they are random weights' (each of these figures would have another shape on the real model)."""
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from book import ch08  # noqa: E402
from qwen.config import Config
from qwen.model import load_model  # noqa: E402
from qwen.sizes import real_config  # noqa: E402


@pytest.fixture(scope="module")
def model(synthetic):
    return load_model(synthetic, dtype=torch.float32)


def titles(fig):
    return " | ".join(ax.get_title() for ax in fig.axes)


def test_pattern_figure(synthetic):
    types = Config.load(synthetic).layer_types
    fig = ch08.pattern_figure(types)
    letters = [t.get_text() for t in fig.axes[0].texts if t.get_text() in "LF"]
    assert "".join(letters) == "LLLF" * 6 and "synthetic" not in titles(fig)


def test_residual_and_lens_figures(model):
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        x = model.embed_tokens(ids)
        cos, sin = model.rotary(torch.arange(5)[None], x.dtype)
        stream = [x]
        for layer in model.layers:
            stream.append(layer(stream[-1], cos, sin))
        # the hand loop is the model: its last state through norm and head gives the model's logits
        torch.testing.assert_close(model.lm_head(model.norm(stream[-1])), model(ids))
    rms = torch.stack([s[0].pow(2).mean(-1).sqrt() for s in stream]).numpy()
    assert "synthetic weights" in titles(ch08.residual_figure(rms, model.cfg.layer_types, True))
    ranks = np.random.default_rng(0).integers(0, 1000, (25, 4))
    fig = ch08.lens_figure(ranks, ["a", "b", "c", "d"], True)
    assert "synthetic weights" in titles(fig) and len(fig.axes[0].get_xticklabels()) == 4
    assert "synthetic" not in titles(ch08.lens_figure(ranks, ["a", "b", "c", "d"], False))


def test_share_figure():
    fig = ch08.share_figure({"parameters": {"MLPs": 3, "norms": 1}, "time": {"MLPs": 0.5, "norms": 0.5},
                             "FLOPs": {"MLPs": 9, "norms": 1}}, True)
    widths = sorted(round(p.get_width(), 3) for p in fig.axes[0].patches)
    assert widths == [0.1, 0.25, 0.5, 0.5, 0.75, 0.9] and "synthetic weights" in titles(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["parameters", "time", "FLOPs"]


def test_depth_axis_names_the_embedding_and_layers_from_0():
    fig = ch08.residual_figure(np.ones((9, 3)), (["linear_attention"] * 3 + ["full_attention"]) * 2, False)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["embedding"] + [str(i) for i in range(8)]
    assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_color() == "C3"] == [4, 8]  # layers 3, 7


def test_flops_at_the_real_shapes_by_hand():
    """torch's FLOP counter around our modules on the meta device, against hand counts at the real 0.8B shapes
    (2 FLOPs per multiply-add): the head, the MLPs and the attention layers exactly; the DeltaNet layers at least
    their projections (their kernel adds the chunked products on top)."""
    c, T = real_config(), 12
    d, V, I = c.hidden_size, c.vocab_size, c.intermediate_size
    H, Hkv, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    Hk, Hv, dk, dv = c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim
    flops = ch08.flops_by_component(c, T)
    assert flops["embedding + head"] == 2 * T * d * V  # the lookup is free; the head is one (T, d) @ (d, V)
    assert flops["MLPs"] == 24 * 2 * T * 3 * d * I
    projections = 2 * T * d * (2 * H * D + 2 * Hkv * D) + 2 * T * H * D * d
    assert flops["attention mixers"] == 6 * (projections + 2 * 2 * H * T * T * D)  # q·kᵀ and probs·v, T × T
    conv = 2 * Hk * dk + Hv * dv
    linear = 2 * T * d * (conv + Hv * dv + 2 * Hv) + 2 * T * Hv * dv * d
    assert 18 * linear < flops["DeltaNet mixers"] < 18 * 2 * linear
