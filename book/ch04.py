"""Chapter 4's figures: the angle of slow and fast frequencies against position, the score of a fixed q, k pair
against their distance, and which M-RoPE axis each frequency reads.

RoPE has no weights: every figure here follows from the config alone (head_dim, partial_rotary_factor,
rope_theta, mrope_section), so drawn with the real Qwen3.5-0.8B config it shows the real model. The q and k of
the score figure are random vectors, and the figure says so. Each function returns a matplotlib Figure.
"""
import math

import numpy as np
import torch

from qwen.rope import RotaryEmbedding, apply_rope, mrope_axes

AXES = ("T", "H", "W")
AXIS_COLOURS = ("#8ecae6", "#f4a261", "#b5e48c")


def wavelengths(rope):
    """Tokens per full turn of each frequency: 2π / inv_freq_j."""
    return (2 * math.pi / rope.inv_freq.double()).numpy()


def angle_vs_position(cfg, label, picks=(0, 4, 8, 16, 31)):
    """Left: cos(angle) of a few frequencies j over the first 64 positions. Right: the angle p · inv_freq_j itself
    over positions 1 … 10⁷ (log-log: straight lines); where a line crosses 2π the pair has made one full turn, at
    the frequency's wavelength in tokens."""
    import matplotlib.pyplot as plt

    rope = RotaryEmbedding(cfg)
    n = rope.R // 2
    picks = sorted({min(j, n - 1) for j in picks})
    lam = wavelengths(rope)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained")
    near = np.arange(0, 64)
    far = np.logspace(0, 7, 200)
    for j, colour in zip(picks, plt.cm.viridis(np.linspace(0, 0.9, len(picks)))):
        text = f"j = {j}: wavelength {lam[j]:,.0f} tokens" if lam[j] >= 10 else f"j = {j}: wavelength {lam[j]:.2f}"
        inv = rope.inv_freq[j].double().item()
        ax0.plot(near, np.cos(near * inv), color=colour, marker=".", ms=3, label=text)
        ax1.plot(far, far * inv, color=colour, lw=1.5, label=text)
        if lam[j] <= far[-1]:
            ax1.plot([lam[j]], [2 * math.pi], "o", color=colour)
    ax1.axhline(2 * math.pi, color="gray", ls="--", lw=1)
    ax1.text(1.2, 2 * math.pi * 1.5, "one full turn (2π)", fontsize=8, color="gray")
    ax0.set(xlabel="position p (token)", ylabel="cos(p · inv_freq_j)", title="the first 64 positions")
    ax1.set(xscale="log", yscale="log", xlabel="position p (log scale)", ylabel="angle p · inv_freq_j (radians)",
            title="positions 1 … 10⁷: a dot marks the first full turn")
    ax0.legend(fontsize=8, loc="lower left")
    fig.suptitle(f"RoPE angle against position for {len(picks)} of the {n} frequencies "
                 f"(θ = {cfg.rope_theta:g}, R = {rope.R}; {label})")
    return fig


def score_vs_distance(cfg, label, starts=(0, 1000, 50000), seed=0, max_distance=512):
    """q·k after RoPE for one fixed random pair (q at position m + Δ, k at m) against Δ, for several starting
    positions m: the curves lie on top of each other. Also q = k = all ones, the classic 'decay' curve."""
    import matplotlib.pyplot as plt

    rope = RotaryEmbedding(cfg)
    g = torch.Generator().manual_seed(seed)
    D, R = cfg.head_dim, rope.R
    q, k = torch.randn(1, 1, 1, D, generator=g), torch.randn(1, 1, 1, D, generator=g)
    ones = torch.ones(1, 1, 1, D)
    deltas = torch.arange(0, max_distance)

    def scores(a, b, m):
        cq, sq = rope((m + deltas)[None], torch.float32)
        ck, sk = rope(torch.full((1, len(deltas)), m), torch.float32)
        qa = apply_rope(a.expand(1, 1, len(deltas), D), cq, sq)
        kb = apply_rope(b.expand(1, 1, len(deltas), D), ck, sk)
        return (qa * kb).sum(-1)[0, 0].numpy()

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained")
    for m, style in zip(starts, ("-", "--", ":")):
        ax0.plot(deltas, scores(q, k, m), ls=style, lw=1.5, label=f"k at m = {m:,}, q at m + Δ")
        ax1.plot(deltas, scores(ones, ones, m), ls=style, lw=1.5, label=f"m = {m:,}")
    ax0.set(xlabel="distance Δ (tokens)", ylabel="q · k after RoPE", title="one random pair q, k")
    ax1.set(xlabel="distance Δ (tokens)", ylabel="q · k after RoPE",
            title=f"q = k = all ones: {D - R} unrotated dims add a constant {D - R}")
    for ax in (ax0, ax1):
        ax.legend(fontsize=8)
    fig.suptitle(f"The score depends only on the distance Δ, not on where the pair sits ({label}; random q, k)")
    return fig


def interleave_map(cfg, label):
    """Which axis (T, H, W) each of the R/2 frequencies takes its angle from: Qwen3.5's interleaved layout, above
    the contiguous blocks of Qwen2-VL's M-RoPE for comparison, with each frequency's wavelength."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    rope = RotaryEmbedding(cfg)
    n = rope.R // 2
    s = list(cfg.mrope_section)
    inter = mrope_axes(n, s).numpy()
    blocks = np.repeat([0, 1, 2], [n - s[1] - s[2], s[1], s[2]])[:n]  # Qwen2-VL: [T … | H … | W …]
    fig, ax = plt.subplots(figsize=(13, 2.9), layout="constrained")
    ax.imshow(np.stack([inter, blocks]), cmap=ListedColormap(AXIS_COLOURS), vmin=0, vmax=2, aspect="auto")
    for row, values in enumerate((inter, blocks)):
        for j, a in enumerate(values):
            ax.text(j, row, AXES[a], ha="center", va="center", fontsize=8)
    lam = wavelengths(rope)
    ax.set_xticks(range(n), [f"{j}\n{lam[j]:.0e}" if j % 4 == 0 else f"{j}" for j in range(n)], fontsize=7)
    ax.set_yticks([0, 1], ["Qwen3.5 (interleaved)", "contiguous blocks\n(Qwen2-VL)"])
    ax.set_xlabel("frequency j (fast → slow); under every 4th: its wavelength in tokens")
    counts = ", ".join(f"{a} {int((inter == i).sum())}" for i, a in enumerate(AXES))
    ax.set_title(f"Which position axis each frequency reads, mrope_section = {s}: {counts} ({label}).\n"
                 f"For text T = H = W, so every layout gives plain RoPE; for images the interleaved one gives "
                 f"each axis fast and slow frequencies.", fontsize=10)
    return fig
