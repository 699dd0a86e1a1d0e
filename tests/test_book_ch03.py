"""Every figure function of chapter 3 (book/ch03.py) draws on the synthetic checkpoint; the real Qwen3.5-0.8B values
it marks are the seed chapter's printout, and the signed gain it plots is silu(z)."""
import matplotlib
import pytest
import torch
import torch.nn.functional as F

from book import ch03
from qwen.norm import GatedRMSNorm, RMSNorm
from qwen.weights import Config, load, load_weights

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def ckpt(synthetic):
    return Config.load(synthetic), load_weights(synthetic)


def titles(fig):
    return fig.get_suptitle() + " ".join(ax.get_title() for ax in fig.axes)


def test_real_values_are_the_seed_printout():
    """The numbers the source chapter printed on the real weights (seed 004), read back from its text."""
    from pathlib import Path
    seeds = Path(__file__).resolve().parents[2] / "shared" / "seeds"  # shared/ sits beside the repository
    seed = next(seeds.glob("004_*.txt"), None)
    if seed is None:
        pytest.skip("the seed chapter is not on this machine")
    text = seed.read_text(encoding="utf-8")
    assert "['1.24', '1.24', '1.25']" in text and "['4.33', '4.32', '4.34']" in text
    assert "+0.238，范围 [-0.11, +1.00]" in text and "+3.309，范围 [-0.78, +5.31]" in text
    assert "0.014（silu(-6)" in text and "5.730（silu(+6)" in text
    assert ch03.REAL["layer0_w"] == dict(mean=0.238, min=-0.11, max=1.00) and ch03.REAL["gate_rms"][6.0] == 5.730


def test_rms_before_after_one_x_scale(ckpt):
    cfg, W = ckpt
    d = cfg.hidden_size
    vecs = torch.randn(200, d, generator=torch.Generator().manual_seed(0)) * 10
    with torch.no_grad():
        fig = ch03.rms_before_after(vecs, {"RMSNorm, weight 0": RMSNorm(d),
                                           "final norm": load(RMSNorm(d), W, "norm.")}, " (synthetic weights)")
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim() and fig.axes[0].get_xscale() == "log"
    assert "synthetic weights" in titles(fig)
    assert "real Qwen3.5-0.8B" in " ".join(t.get_text() for t in fig.axes[1].texts)


def test_scales_says_planted(ckpt):
    cfg, W = ckpt
    fig = ch03.scales(W, cfg.layer_types, " (synthetic weights)")
    assert "nothing in it was learned" in titles(fig)
    assert "learned" not in titles(ch03.scales(W, cfg.layer_types))  # real weights: no such note


def test_bf16_grid():
    fig = ch03.bf16_grid()
    assert "bf16" in titles(fig)


def test_gate_shows_the_sign(ckpt):
    cfg, W = ckpt
    gated = load(GatedRMSNorm(cfg.linear_value_head_dim), W, "layers.0.linear_attn.norm.")
    h = torch.randn(4, cfg.linear_value_head_dim, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        fig = ch03.gate(gated, h, " (synthetic weights)")
    z, gain = fig.axes[1].get_lines()[0].get_data()
    torch.testing.assert_close(torch.tensor(gain), F.silu(torch.tensor(z)), rtol=1e-5, atol=1e-6)  # signed: silu
    assert (gain[z < 0] < 0).all()
    assert len({ax.get_xlim() for ax in fig.axes[:3]}) == 1
