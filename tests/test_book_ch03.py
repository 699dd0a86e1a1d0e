"""Every figure function of chapter 3 (book/ch03.py) draws on the synthetic checkpoint; the real Qwen3.5-0.8B values
it marks are those of a printed run on the real weights, and the signed gain it plots is silu(z)."""
import os
from pathlib import Path

import matplotlib
import pytest
import torch
import torch.nn.functional as F

from book import ch03
from qwen.config import Config
from qwen.norm import GatedRMSNorm, RMSNorm
from qwen.weights import Weights, fill

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def ckpt(synthetic):
    return Config.load(synthetic), Weights(synthetic)


def titles(fig):
    return fig.get_suptitle() + " ".join(ax.get_title() for ax in fig.axes)


def test_real_values_are_the_printed_ones():
    """book.ch03.REAL quotes a run of chapter 3's measurements on the real weights; its printout (004_*.txt) is read
    back from the folder $QWEN_SEEDS names (.ci/run sets it where that folder is at hand)."""
    folder = os.environ.get("QWEN_SEEDS")
    if not folder:
        pytest.skip("QWEN_SEEDS is not set: it names the folder of printed runs on the real weights (004_*.txt)")
    seed = next(Path(folder).expanduser().glob("004_*.txt"), None)
    assert seed is not None, f"$QWEN_SEEDS is {folder}, which has no 004_*.txt"
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
                                           "final norm": fill(RMSNorm(d), W, "norm.")}, " (synthetic weights)")
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim() and fig.axes[0].get_xscale() == "log"
    assert "synthetic weights" in titles(fig)
    assert "real Qwen3.5-0.8B" in " ".join(t.get_text() for t in fig.axes[1].texts)


def test_scales_says_planted(ckpt):
    cfg, W = ckpt
    fig = ch03.scales(W, cfg.layer_types, " (synthetic weights)")
    assert "nothing in it was learned" in titles(fig) and titles(fig).count("synthetic weights") == 1
    assert "learned" not in titles(ch03.scales(W, cfg.layer_types))  # real weights: no such note


def test_bf16_grid():
    fig = ch03.bf16_grid()
    assert "bf16" in titles(fig)


def inside(fig, legend):
    """The legend's box lies within its panel's box (in figure pixels)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box, frame = legend.get_window_extent(r), legend.axes.get_window_extent(r)
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


@pytest.mark.slow
def test_gate_shows_the_sign(ckpt):
    cfg, W = ckpt
    gated = fill(GatedRMSNorm(cfg.linear_value_head_dim), W, "layers.0.linear_attn.norm.")
    h = torch.randn(4, cfg.linear_value_head_dim, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        fig = ch03.gate(gated, h, " (synthetic weights)")
    z, silu = fig.axes[0].get_lines()[0].get_data()
    torch.testing.assert_close(torch.tensor(silu), F.silu(torch.tensor(z)))
    # the middle panel is not the silu curve again: each gate value's elements lie on a line of slope silu(z)
    points = [line for line in fig.axes[1].get_lines() if line.get_marker() == "."]
    assert len(points) == len(ch03.GATE_PICKS)
    for line, z_ in zip(points, ch03.GATE_PICKS):
        x, y = (torch.tensor(v, dtype=torch.float64) for v in line.get_data())
        slope = float((x * y).sum() / (x * x).sum())  # least squares through 0
        assert slope == pytest.approx(float(F.silu(torch.tensor(z_))), rel=1e-4, abs=1e-6)
        assert float((y - slope * x).abs().max()) < 1e-4 * float(x.abs().max())  # on the line
        if z_ < 0:
            assert (x * y <= 0).all()  # flipped
    assert all(inside(fig, ax.get_legend()) for ax in fig.axes[:3])


def bf16_step(value):
    v = torch.tensor(value).bfloat16()
    return float(torch.nextafter(v, torch.tensor(float("inf")).bfloat16()) - v)


def test_storing_w_saves_at_most_one_binade_for_trained_weights():
    """Chapter 3 §3: for the real weights' |w| of 1 to 5 the bf16 step at w is at most 2× finer than at 1 + w
    (one binade), and the same at the final norm's largest w; only near 0 is the gain large."""
    for w in (1.0, ch03.REAL["final_w"]["mean"], 2.5, 4.0):
        assert bf16_step(1 + w) / bf16_step(w) <= 2
    assert bf16_step(1 + ch03.REAL["final_w"]["max"]) == bf16_step(ch03.REAL["final_w"]["max"])
    assert bf16_step(1 + 1e-3) / bf16_step(1e-3) > 100  # near 0: the synthetic weights' best case


def test_bf16_mean_accumulates_in_fp32_and_a_bf16_running_sum_does_not():
    """Chapter 3's try-this, measured: torch's bf16 mean of x² is within about one bf16 rounding (2⁻⁸ relative) of
    the exact value at every d, while a sum kept in bf16 loses more and more: about half at d = 4096."""
    g = torch.Generator().manual_seed(4)
    running_errors = []
    for n in (256, 1024, 4096, 16384):
        v = (torch.randn(n, generator=g, dtype=torch.float64) * 3).bfloat16()
        exact = float(v.double().pow(2).mean())
        assert abs(float(v.pow(2).mean()) / exact - 1) <= 2 ** -8
        running = torch.zeros((), dtype=torch.bfloat16)
        for square in v.pow(2):
            running += square
        running_errors.append(float(running) / n / exact - 1)
    assert running_errors == sorted(running_errors, reverse=True)  # worse with every d
    assert -0.6 < running_errors[2] < -0.45 and running_errors[0] > -0.1
