"""Every figure function of chapter 4 (book/ch04.py) draws, for the synthetic checkpoint's config and the real
0.8B's, and draws what it claims: wavelengths 2π/inv_freq, curves that depend only on the distance, the axis map."""
import math

import matplotlib
import numpy as np
import pytest

from book import ch04, real
from qwen.rope import mrope_axes
from qwen.weights import Config

matplotlib.use("Agg")


@pytest.fixture(scope="module", params=["synthetic", "real"])
def cfg(request, synthetic):
    return Config.load(synthetic) if request.param == "synthetic" else real.config()


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_angle_vs_position(cfg):
    fig = ch04.angle_vs_position(cfg, "a label")
    left, right = fig.axes[:2]
    R = int(cfg.head_dim * cfg.partial_rotary_factor)
    assert f"R = {R}" in fig.get_suptitle() and "a label" in fig.get_suptitle()
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    # hand math: wavelength of frequency j is 2π θ^(2j/R); j = 0 is 2π ≈ 6.28 whatever θ
    assert labels[0] == "j = 0: wavelength 6.28"
    j = R // 2 - 1
    assert labels[-1] == f"j = {j}: wavelength {2 * math.pi * cfg.rope_theta ** (2 * j / R):,.0f} tokens"
    x, y = left.lines[0].get_data()
    np.testing.assert_allclose(y, np.cos(x), atol=1e-6)  # pair 0 turns one radian per token
    close(fig)


def test_score_depends_only_on_distance(cfg):
    fig = ch04.score_vs_distance(cfg, "a label", starts=(0, 1000, 5000), max_distance=64)
    for ax in fig.axes[:2]:
        curves = [line.get_ydata() for line in ax.lines]
        assert len(curves) == 3
        scale = np.abs(curves[0]).max()
        for c in curves[1:]:  # the same curve from every starting position, up to fp32 rounding of the angles
            np.testing.assert_allclose(c, curves[0], atol=2e-3 * scale)
    ones = fig.axes[1].lines[0].get_ydata()
    assert ones[0] == pytest.approx(cfg.head_dim)  # distance 0: q·k of all ones is D
    close(fig)


def test_interleave_map(cfg):
    fig = ch04.interleave_map(cfg, "a label")
    n = int(cfg.head_dim * cfg.partial_rotary_factor) // 2
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (2, n)
    assert image[0].tolist() == mrope_axes(n, cfg.mrope_section).tolist()
    s = cfg.mrope_section
    assert image[1].tolist() == [0] * (n - s[1] - s[2]) + [1] * s[1] + [2] * s[2]  # contiguous blocks
    assert f"T {n - s[1] - s[2]}, H {s[1]}, W {s[2]}" in fig.axes[0].get_title()
    close(fig)
