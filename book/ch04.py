"""Chapter 4's figures: the angle of slow and fast frequencies against position, the score of a fixed q, k pair
against their distance, and which M-RoPE axis each frequency reads.

RoPE has no weights: every figure here follows from the config alone (head_dim, partial_rotary_factor,
rope_theta, mrope_section), so drawn with the real Qwen3.5-0.8B config it shows the real model. The q and k of
the score figure are random vectors, and the figure says so. Each function returns a matplotlib Figure.
"""
import math

import numpy as np
import torch

from qwen.lang import tr
from qwen.rope import RotaryEmbedding, apply_rope, mrope_axes

AXES = ("t", "h", "w")  # M-RoPE's position axes: time, height, width (T and H are tokens and heads)
AXIS_COLOURS = ("#8ecae6", "#f4a261", "#b5e48c")
# Qwen2-VL's M-RoPE, for comparison (transformers' Qwen2VLTextConfig and its rotary embedding): head_dim 128, all of
# it rotated, so 64 frequencies; rope_theta 1e6; mrope_section [16, 24, 24] as contiguous blocks, t then h then w.
QWEN2_VL = dict(n_freq=64, mrope_section=(16, 24, 24), rope_theta=1e6, head_dim=128)


def wavelengths(rope):
    """Tokens per full turn of each frequency: 2π / inv_freq_j."""
    return (2 * math.pi / rope.inv_freq.double()).numpy()


def angle_vs_position(cfg, label, picks=(0, 4, 8, 16, 31)):
    """Left: cos(angle) of a few frequencies j over the first 64 positions. Right: the angle p · inv_freq_j itself
    over positions 1 … 10⁸ (log-log: straight lines); where a line crosses 2π the pair has made one full turn, at
    the frequency's wavelength in tokens, and the dotted line marks the context length (max_position_embeddings).
    One legend for both panels, below them, so it hides no curve."""
    import matplotlib.pyplot as plt

    rope = RotaryEmbedding(cfg)
    n = rope.R // 2
    picks = sorted({min(j, n - 1) for j in picks})
    lam = wavelengths(rope)
    ctx = cfg.max_position_embeddings
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained")
    near = np.arange(0, 64)
    far = np.logspace(0, 8, 200)
    for j, colour in zip(picks, plt.cm.viridis(np.linspace(0, 0.9, len(picks)))):
        w = lam[j]
        text = tr(f"j = {j}: wavelength {w:,.0f} tokens", f"j = {j}：波长 {w:,.0f} 个 token") if w >= 10 else \
            tr(f"j = {j}: wavelength {w:.2f}", f"j = {j}：波长 {w:.2f}")
        inv = rope.inv_freq[j].double().item()
        ax0.plot(near, np.cos(near * inv), color=colour, marker=".", ms=3, label=text)
        ax1.plot(far, far * inv, color=colour, lw=1.5)
        if lam[j] <= far[-1]:
            ax1.plot([lam[j]], [2 * math.pi], "o", color=colour)
    ax1.axhline(2 * math.pi, color="gray", ls="--", lw=1)
    ax1.text(1.2, 2 * math.pi * 1.5, tr("one full turn (2π)", "转一整圈（2π）"), fontsize=8, color="gray")
    ax1.axvline(ctx, color="black", ls=":", lw=1.2)
    ax1.text(ctx * 1.15, 1e-6, tr(f"context: {ctx:,} tokens\n(max_position_embeddings)",
                                  f"上下文：{ctx:,} 个 token\n（max_position_embeddings）"), fontsize=8)
    ax0.set(xlabel=tr("position p (token)", "位置 p（token）"), ylabel="cos(p · inv_freq_j)",
            title=tr("the first 64 positions", "前 64 个位置"))
    ax1.set(xscale="log", yscale="log", xlabel=tr("position p (log scale)", "位置 p（对数刻度）"),
            ylabel=tr("angle p · inv_freq_j (radians)", "角度 p · inv_freq_j（弧度）"),
            title=tr("positions 1 … 10⁸: a dot marks the first full turn", "位置 1 … 10⁸：圆点标出转满第一圈之处"))
    fig.legend(*ax0.get_legend_handles_labels(), loc="outside lower center", ncol=len(picks), fontsize=8)
    k, theta, R = len(picks), cfg.rope_theta, rope.R
    fig.suptitle(tr(f"RoPE angle against position for {k} of the {n} frequencies (θ = {theta:g}, R = {R}; {label})",
                    f"RoPE 角度随位置的变化：{n} 个频率中选 {k} 个（θ = {theta:g}，R = {R}；{label}）"))
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
        ax0.plot(deltas, scores(q, k, m), ls=style, lw=1.5,
                 label=tr(f"k at m = {m:,}, q at m + Δ", f"k 位于 m = {m:,}，q 位于 m + Δ"))
        ax1.plot(deltas, scores(ones, ones, m), ls=style, lw=1.5, label=f"m = {m:,}")
    xlabel, ylabel = tr("distance Δ (tokens)", "距离 Δ（token）"), tr("q · k after RoPE", "RoPE 后的 q · k")
    ax0.set(xlabel=xlabel, ylabel=ylabel, title=tr("one random pair q, k", "一对随机的 q、k"))
    ax1.set(xlabel=xlabel, ylabel=ylabel,
            title=tr(f"q = k = all ones: {D - R} unrotated dims add a constant {D - R}",
                     f"q = k = 全 1：{D - R} 个不旋转的维度贡献一个常数 {D - R}"))
    for ax in (ax0, ax1):
        ax.legend(fontsize=8)
    fig.suptitle(tr(f"The score depends only on the distance Δ, not on where the pair sits ({label}; random q, k)",
                    f"分数只取决于距离 Δ，与这一对向量位于何处无关（{label}；q、k 随机）"))
    return fig


def contiguous_axes(n_freq, mrope_section):
    """Qwen2-VL's layout: the first s_t frequencies read t, the next s_h read h, the last s_w read w."""
    return np.repeat([0, 1, 2], list(mrope_section))[:n_freq]


def interleave_map(cfg, label):
    """Which axis (t, h, w) each frequency takes its angle from: Qwen3.5's interleaved layout (this config's R/2
    frequencies) above Qwen2-VL's contiguous blocks (its own 64 frequencies and mrope_section [16, 24, 24]), each
    with its frequencies' wavelengths."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    rope = RotaryEmbedding(cfg)
    n = rope.R // 2
    s = list(cfg.mrope_section)
    inter = mrope_axes(n, s).numpy()
    vl = QWEN2_VL
    blocks = contiguous_axes(vl["n_freq"], vl["mrope_section"])
    vl_lam = 2 * math.pi * vl["rope_theta"] ** (2 * np.arange(vl["n_freq"]) / vl["head_dim"])
    fig, axes = plt.subplots(2, 1, figsize=(13, 4.6), layout="constrained")
    section, n_freq, head_dim, theta = list(vl["mrope_section"]), vl["n_freq"], vl["head_dim"], vl["rope_theta"]
    rows = ((axes[0], inter, wavelengths(rope), tr(f"Qwen3.5 ({label}): interleaved, mrope_section = {s}",
                                                   f"Qwen3.5（{label}）：交错排列，mrope_section = {s}")),
            (axes[1], blocks, vl_lam, tr(f"Qwen2-VL: contiguous blocks, mrope_section = {section}, {n_freq} "
                                         f"frequencies (head_dim {head_dim}, θ = {theta:g})",
                                         f"Qwen2-VL：连续分块，mrope_section = {section}，{n_freq} 个频率"
                                         f"（head_dim {head_dim}，θ = {theta:g}）")))
    for ax, values, lam, title in rows:
        ax.imshow(values[None], cmap=ListedColormap(AXIS_COLOURS), vmin=0, vmax=2, aspect="auto")
        for j, a in enumerate(values):
            ax.text(j, 0, AXES[a], ha="center", va="center", fontsize=8 if len(values) <= 32 else 6)
        step = 4 if len(values) <= 32 else 8
        ax.set_xticks(range(0, len(values), step), [f"{j}\n{lam[j]:.0e}" for j in range(0, len(values), step)],
                      fontsize=7)
        ax.set_yticks([])
        counts = tr(", ", "，").join(f"{a} {int((values == i).sum())}" for i, a in enumerate(AXES))
        ax.set_title(tr(f"{title}: {counts}", f"{title}：{counts}"), fontsize=10)
    axes[1].set_xlabel(tr("frequency j (fast → slow); under every 4th (Qwen3.5) or 8th (Qwen2-VL): its wavelength in "
                          "tokens",
                          "频率 j（从快到慢）；每隔 4 个（Qwen3.5）或 8 个（Qwen2-VL）在下方标出波长（单位：token）"))
    fig.suptitle(tr("Which position axis (t time, h height, w width) each frequency reads. For text t = h = w, so "
                    "every layout gives plain RoPE;\nfor images the interleaved one gives each axis fast and slow "
                    "frequencies, the blocks give t only the fastest",
                    "每个频率读取哪个位置轴（t：时间，h：高，w：宽）。文本的 t = h = w，任何布局都等价于普通 RoPE；\n"
                    "图像则不同：交错布局让每个轴都分到快、慢两种频率，连续分块只把最快的频率分给 t"), fontsize=10)
    return fig
