"""Chapter 3's figures: RMS before and after the norms, the trained scales, the bf16 grid, and the gate.

Each function takes what it draws and returns a matplotlib Figure (the chapter shows it with book.show). Where the
real Qwen3.5-0.8B's value is known it is drawn beside the checkpoint's, marked "real Qwen3.5-0.8B".
"""
import numpy as np
import torch
import torch.nn.functional as F

from qwen.lang import tr
from qwen.norm import rms_normalize

# Printed by a run of chapter 3's measurements on the real Qwen3.5-0.8B weights (tests/test_book_ch03.py reads that
# printout back where $QWEN_SEEDS names its folder):
# RMS after layer 0's input norm and after the final norm (three random vectors), the stored w of those two norms,
# and the output RMS of layer 0's gated norm (four random head outputs) for gates −6, 0, +6.
REAL = {"layer0_rms": 1.24, "final_rms": 4.33,
        "layer0_w": dict(mean=0.238, min=-0.11, max=1.00), "final_w": dict(mean=3.309, min=-0.78, max=5.31),
        "gate_rms": {-6.0: 0.014, 0.0: 0.000, 6.0: 5.730}}
REAL_LABEL = "real Qwen3.5-0.8B"


def real_label():
    """REAL_LABEL in the language the course speaks now (read when drawing, after --lang has been applied)."""
    return tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B")


def _rms(t):
    return t.float().pow(2).mean(-1).sqrt().cpu().numpy()


@torch.no_grad()  # figures want plain tensors
def rms_before_after(vecs, after, synthetic=""):
    """Histograms of the RMS of `vecs` before and after each norm of `after` ({label: module}), on one log x scale
    for both panels; the real model's RMS after layer 0's input norm and the final norm are drawn as dashed lines."""
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4), sharex=True, layout="constrained")
    bins = np.logspace(-2.5, 2.5, 201)
    ax0.hist(_rms(vecs), bins=bins, color="gray", histtype="stepfilled")  # one polygon: fast to draw
    xlabel, ylabel = tr("RMS of a vector (log scale)", "向量的 RMS（对数刻度）"), tr("number of vectors", "向量个数")
    ax0.set(xscale="log", xlabel=xlabel, ylabel=ylabel, title=tr("before normalisation", "归一化前"))
    for (label, norm), color in zip(after.items(), ("C2", "C0", "C3")):
        y = _rms(norm(vecs))
        mean = y.mean()
        ax1.hist(y, bins=bins, color=color, alpha=0.8, histtype="stepfilled",
                 label=tr(f"{label}: mean {mean:.2f}", f"{label}：均值 {mean:.2f}"))
    real = real_label()
    for value, name, text_at in ((REAL["layer0_rms"], tr("layer 0 input norm", "第 0 层输入归一化"), (0.01, 0.9)),
                                 (REAL["final_rms"], tr("final norm", "最终归一化"), (8, 0.6))):
        ax1.axvline(value, color="black", ls="--", lw=1)
        ax1.annotate(tr(f"{real},\n{name}: {value}", f"{real}，\n{name}：{value}"), (value, 0.85),
                     xycoords=("data", "axes fraction"), xytext=text_at, textcoords=("data", "axes fraction"),
                     va="top", fontsize=8, arrowprops=dict(arrowstyle="->", color="black", lw=0.8))
    ax1.set(xlabel=xlabel, ylabel=ylabel, title=tr("after normalisation", "归一化后"))
    ax1.legend(loc="lower left", fontsize=8)
    n = len(vecs)
    fig.suptitle(tr(f"RMS of {n:,} random vectors before and after RMSNorm{synthetic}",
                    f"{n:,} 个随机向量在 RMSNorm 前后的 RMS{synthetic}"))
    return fig


def _boxes(ax, data, positions, color, width=0.35):
    ax.boxplot([t.float().cpu().numpy() for t in data], positions=positions, widths=width, patch_artist=True,
               boxprops=dict(facecolor=color, alpha=0.8), medianprops=dict(color="black"),
               flierprops=dict(marker=".", markersize=2, alpha=0.4), whiskerprops=dict(color=color),
               capprops=dict(color=color))


def _real_range(ax, x, stats):
    """The real model's mean scale 1 + w and its range, as a diamond with a bar, just left of the box."""
    mean, lo, hi = 1 + stats["mean"], 1 + stats["min"], 1 + stats["max"]
    ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="D", color="black", ms=5, capsize=3, zorder=5)


@torch.no_grad()  # figures want plain tensors
def scales(W, layer_types, synthetic=""):
    """Every norm's effective scale, one box per norm: 1 + w for the RMSNorms and q/k norms, plain w for the gated
    norms. W maps the checkpoint's names (without the language-model prefix) to tensors."""
    import matplotlib.pyplot as plt

    L = len(layer_types)
    letters = ["F" if t == "full_attention" else "L" for t in layer_types]
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(13, 7.5), sharex=True, layout="constrained")
    for k, (kind, color) in enumerate((("input_layernorm", "C0"), ("post_attention_layernorm", "C1"))):
        _boxes(ax0, [1 + W[f"layers.{i}.{kind}.weight"].float() for i in range(L)], np.arange(L) + (k - 0.5) * 0.4,
               color)
    _boxes(ax0, [1 + W["norm.weight"].float()], [L + 0.5], "C3", width=0.6)
    _real_range(ax0, -0.55, REAL["layer0_w"])
    _real_range(ax0, L - 0.05, REAL["final_w"])
    ax0.axhline(1, color="gray", ls="--", lw=1)
    ax0.set(ylabel=tr("scale 1 + w", "比例 1 + w"),
            title=tr("the RMSNorms of the residual stream", "残差流上的 RMSNorm"))
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C3")]
    handles.append(plt.Line2D([], [], marker="D", color="black", ls="none"))
    real = real_label()
    ax0.legend(handles=handles, labels=[tr("input_layernorm (before the mixer)", "input_layernorm（混合器之前）"),
                                        tr("post_attention_layernorm (before the MLP)",
                                           "post_attention_layernorm（MLP 之前）"),
                                        tr("final norm", "最终归一化"),
                                        tr(f"{real}: mean and range", f"{real}：均值和范围")],
               loc="upper left", ncol=2, fontsize=9)
    full = [i for i in range(L) if letters[i] == "F"]
    linear = [i for i in range(L) if letters[i] == "L"]
    _boxes(ax1, [1 + W[f"layers.{i}.self_attn.q_norm.weight"].float() for i in full], np.array(full) - 0.2, "C4")
    _boxes(ax1, [1 + W[f"layers.{i}.self_attn.k_norm.weight"].float() for i in full], np.array(full) + 0.2, "C5")
    _boxes(ax1, [W[f"layers.{i}.linear_attn.norm.weight"].float() for i in linear], linear, "C7", width=0.5)
    ax1.axhline(1, color="gray", ls="--", lw=1)
    ax1.set(ylabel=tr("scale", "比例"),
            xlabel=tr("layer (L = linear attention, F = full attention)", "层（L = 线性注意力，F = 全注意力）"),
            title=tr("per-head norms: q_norm and k_norm (1 + w) in full attention, the gated norm (plain w) in linear "
                     "attention",
                     "按头的归一化：全注意力里的 q_norm 和 k_norm（1 + w），线性注意力里的门控归一化（普通的 w）"))
    ax1.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C4", "C5", "C7")],
               labels=["q_norm: 1 + w", "k_norm: 1 + w", "linear_attn.norm: w"], loc="upper left", ncol=3)
    for ax in (ax0, ax1):  # head room for the legends
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.3 * (hi - lo))
    ax1.set_xticks(list(range(L)) + [L + 0.5], [f"{i}\n{letters[i]}" for i in range(L)] + [tr("final", "最终")])
    note = tr("\nsynthetic weights: every box is a random draw around the weight's initial value (qwen/synthetic.py); "
              "nothing in it was learned",
              "\n合成权重：每个箱体都只是在该权重初始值附近随机抽样（qwen/synthetic.py），"
              "没有学到任何东西") if synthetic else ""  # says it once: the note, not the tag too
    fig.suptitle(tr(f"The effective scale of every norm in the model{note}", f"模型中每个归一化的有效比例{note}"))
    return fig


def _gap(values, dtype):
    """Distance from each value (rounded to dtype) to the next representable number: add 1 to its bits."""
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[dtype]
    v = values.to(dtype)
    return ((v.view(bits) + 1).view(dtype).double() - v.double()).numpy()


def bf16_grid():
    """The gap between neighbouring numbers of bf16, fp16 and fp32 against magnitude, and the bf16 numbers near 1."""
    import matplotlib.pyplot as plt

    xs = torch.logspace(-4, 1, 3000, dtype=torch.float64)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw=dict(width_ratios=[1.3, 1]),
                                   layout="constrained")
    for dtype, color in ((torch.bfloat16, "C3"), (torch.float16, "C1"), (torch.float32, "C0")):
        ax0.step(xs.numpy(), _gap(xs, dtype), where="post", color=color, label=str(dtype).replace("torch.", ""))
    ax0.axhline(2e-3, color="gray", ls=":", lw=1)
    ax0.text(1.2e-4, 2.6e-3, tr("gap 0.002: an update of 0.001 is rounded away above this line",
                                "间距 0.002：在这条线以上，0.001 的更新会被舍掉"), fontsize=9, color="gray")
    for value, text, offset in ((1.0, tr("1 + 0.001 → 1.0\n(gap 2⁻⁷ ≈ 0.0078)",
                                         "1 + 0.001 → 1.0\n（间距 2⁻⁷ ≈ 0.0078）"), (-110, 20)),
                                (1e-3, tr("0.001 → 0.000999\n(gap ≈ 7.6e-6)", "0.001 → 0.000999\n（间距 ≈ 7.6e-6）"),
                                 (15, 25))):
        g = _gap(torch.tensor([value], dtype=torch.float64), torch.bfloat16)[0]
        ax0.plot(value, g, "o", color="black", zorder=3)
        ax0.annotate(text, (value, g), xytext=offset, textcoords="offset points", fontsize=9,
                     arrowprops=dict(arrowstyle="-", color="black", lw=0.8))
    ax0.set(xscale="log", yscale="log",
            xlabel=tr("magnitude of the stored number (log scale)", "所存数值的大小（对数刻度）"),
            ylabel=tr("gap to the next representable number (log scale)", "到下一个可表示数的间距（对数刻度）"),
            title=tr("spacing of representable numbers", "可表示数的间距"),
            ylim=(3e-12, 1.0))  # room for the labels above the curves
    ax0.legend(loc="lower right")

    grid = torch.arange(0x3F79, 0x3F85, dtype=torch.int16).view(torch.bfloat16).float().numpy()  # bf16 around 1
    ax1.vlines(grid, 0, 1, color="C3", lw=1.5, label=tr("a bf16 number", "一个 bf16 数"))
    ax1.axvspan(1 - 2 ** -9, 1 + 2 ** -8, color="C3", alpha=0.15, label=tr("rounds to 1.0", "舍入为 1.0"))
    ax1.plot([1.001], [0.5], "o", color="black", label="1.001")
    ax1.annotate("", xy=(1.0, 0.5), xytext=(1.001, 0.5), arrowprops=dict(arrowstyle="->", color="black", lw=1.5))
    ax1.text(1.001, 0.62, "1.001 → 1.0", fontsize=10, ha="center", bbox=dict(fc="white", ec="none"), zorder=4)
    ax1.set(xlim=(grid[0] - 0.002, grid[-1] + 0.002), ylim=(0, 1), yticks=[], xlabel=tr("value", "数值"),
            title=tr("the bf16 numbers around 1: gaps of 2⁻⁸ below, 2⁻⁷ above",
                     "1 附近的 bf16 数：下方间距 2⁻⁸，上方 2⁻⁷"))
    ax1.legend(loc="upper right", fontsize=9)
    fig.suptitle(tr("The bf16 grid: fine near 0, coarse near 1 — one reason Qwen3.5 stores w, not 1 + w",
                    "bf16 的网格：0 附近细，1 附近粗——这是 Qwen3.5 存 w 而不存 1 + w 的一个原因"))
    return fig


GATE_PICKS = (-6.0, -1.2785, 0.0, 1.0, 3.0)  # the gate values of the middle panel: shut, most negative, 0, open


@torch.no_grad()  # figures want plain tensors
def gate(gated, h, synthetic=""):
    """GatedRMSNorm against the gate z (the same for every dimension). Left: silu(z). Middle: every output element
    against its ungated value (w · x̂)_i for a few gate values — each a line through 0 of slope silu(z), so below
    z = 0 the head comes out with its sign flipped. Right: the output RMS, |silu(z)| times the head's size, with
    the real model's values. Every legend sits inside its panel. gated: a GatedRMSNorm; h: (N, dv) head outputs."""
    import matplotlib.pyplot as plt

    zs = torch.linspace(-8, 8, 321, device=h.device)
    heads = h.expand(len(zs), *h.shape)  # the same N head outputs under every gate value
    out = gated(heads, zs.view(-1, 1, 1).expand_as(heads)).float()  # (321, N, dv)
    ungated = rms_normalize(h, gated.eps) * gated.weight.float()  # w · x̂: the output before the gate, (N, dv)
    z, s = zs.cpu().numpy(), F.silu(zs).cpu().numpy()
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(15, 4.3), layout="constrained")
    ax0.plot(z, s, color="C0", label="silu(z) = z · sigmoid(z)")
    ax0.plot(z, z, color="gray", ls=":", lw=1, label="z")
    ax0.axhline(0, color="black", lw=0.5)
    zmin = -1.2785
    ax0.plot([zmin], [F.silu(torch.tensor(zmin)).item()], "o", color="C0")
    ax0.annotate(tr("minimum −0.278 at z ≈ −1.278;\nnegative for every z < 0",
                    "在 z ≈ −1.278 处取最小值 −0.278；\nz < 0 时处处为负"), (zmin, -0.278), xytext=(-7.8, 3),
                 fontsize=9, arrowprops=dict(arrowstyle="->"))
    ax0.set(xlabel=tr("gate value z", "门值 z"), ylabel="silu(z)", ylim=(-1, 8.5),
            title=tr("the silu curve", "silu 曲线"))
    ax0.legend(loc="upper left", fontsize=9)
    x = ungated.flatten().cpu().numpy()
    for z_, colour in zip(GATE_PICKS, ("C7", "C3", "black", "C2", "C0")):
        y = gated(h, torch.full_like(h, z_)).float().flatten().cpu().numpy()
        slope = F.silu(torch.tensor(z_))
        ax1.plot(x, y, ".", ms=3, color=colour,
                 label=tr(f"z = {z_:+g}: slope silu(z) = {slope:+.3f}", f"z = {z_:+g}：斜率 silu(z) = {slope:+.3f}"))
    ax1.axhline(0, color="black", lw=0.5)
    ax1.axvline(0, color="black", lw=0.5)
    ax1.set(xlabel=tr("ungated output (w · x̂)_i", "门控之前的输出 (w · x̂)_i"), ylabel=tr("output y_i", "输出 y_i"),
            title=tr("every element: y = silu(z) · w · x̂; below z = 0 the sign flips",
                     "每个元素：y = silu(z) · w · x̂；z < 0 时符号翻转"))
    ax1.legend(loc="upper left", fontsize=8, markerscale=3)
    rms = out.pow(2).mean(-1).sqrt().mean(-1).cpu().numpy()
    ax2.plot(z, rms, color="C3", lw=2, label=tr("output RMS of GatedRMSNorm", "GatedRMSNorm 输出的 RMS"))
    ax2.plot(z, np.abs(s) * ungated.pow(2).mean(-1).sqrt().mean().item(), color="black", ls="--", lw=1,
             label="|silu(z)| × RMS(w · x̂)")
    ax2.plot(list(REAL["gate_rms"]), list(REAL["gate_rms"].values()), "D", color="black", ms=5,
             label=tr(f"{real_label()}, layer 0's weight\n(on its own 4 random vectors)",
                      f"{real_label()}，第 0 层的权重\n（在它自己的 4 个随机向量上）"))
    ax2.set(xlabel=tr("gate value z", "门值 z"), ylabel=tr("RMS of the output", "输出的 RMS"),
            title=tr("the size: |silu(z)| times the head's size", "大小：|silu(z)| 乘以头的大小"))
    ax2.legend(loc="upper left", fontsize=8)
    n = len(h)
    fig.suptitle(tr(f"The gate of GatedRMSNorm, layer 0, {n} random head outputs{synthetic}",
                    f"GatedRMSNorm 的门：第 0 层，{n} 个随机的头输出{synthetic}"))
    return fig
