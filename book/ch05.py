"""Chapter 5's figures: silu against relu and gelu, and the gate activations of one MLP on a sentence.

Each function returns a matplotlib Figure. The activation curves are plain math. The gate figure draws whatever
checkpoint it is given; on the synthetic one the weights are random, the title says so, and its shape says
nothing about the real model.
"""
import numpy as np
import torch
import torch.nn.functional as F

from qwen.lang import tr


def activations():
    """silu(z) = z·sigmoid(z) against relu and gelu (left), and their slopes (right)."""
    import matplotlib.pyplot as plt

    z = torch.linspace(-6, 6, 601, requires_grad=True)
    curves = {"silu(z) = z · sigmoid(z)": F.silu, "relu(z) = max(z, 0)": F.relu, "gelu(z) = z · Φ(z)": F.gelu}
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained")
    for (name, f), colour in zip(curves.items(), ("C0", "gray", "C1")):
        y = f(z)
        (slope,) = torch.autograd.grad(y.sum(), z)
        ax0.plot(z.detach(), y.detach(), color=colour, lw=2 if "silu" in name else 1.2, label=name)
        ax1.plot(z.detach(), slope, color=colour, lw=2 if "silu" in name else 1.2, label=name.split("(")[0])
    zmin = -1.2785  # silu's minimum: where sigmoid(z)·(1 + z·(1 − sigmoid(z))) = 0
    ax0.plot([zmin], [F.silu(torch.tensor(zmin)).item()], "o", color="C0")
    ax0.annotate(tr("minimum −0.278 at z ≈ −1.28", "在 z ≈ −1.28 处取最小值 −0.278"), (zmin, -0.278),
                 xytext=(-5.8, 2.0), fontsize=9, arrowprops=dict(arrowstyle="->"))
    ax0.axhline(0, color="black", lw=0.5)
    ax0.set(xlabel="z", ylabel=tr("activation", "激活值"), ylim=(-1, 6),
            title=tr("the curves: silu is smooth and dips below 0", "曲线：silu 处处光滑，在 0 以下略微下探"))
    ax1.axhline(0, color="black", lw=0.5)
    ax1.set(xlabel="z", ylabel=tr("slope d/dz", "斜率 d/dz"),
            title=tr("their slopes: relu's jumps from 0 to 1, silu's overshoots 1",
                     "各自的斜率：relu 从 0 突变到 1，silu 会超过 1"))
    ax0.legend(loc="upper left")
    ax1.legend(loc="upper left")
    fig.suptitle(tr("The activation of the gate branch: silu (Qwen3.5), relu and gelu",
                    "门分支的激活函数：silu（Qwen3.5）、relu 和 gelu"))
    return fig


def gate_activations(gate, up, tokens, title):
    """For one MLP on one sentence: the histogram of the gate pre-activations z = gate_proj(x) and of silu(z)
    (left), and per token the share of hidden units whose |silu(z) · up| is below 1 % of that token's largest
    (right). gate, up: (T, I) tensors; tokens: T strings."""
    import matplotlib.pyplot as plt

    z = gate.float()
    h = F.silu(z) * up.float()  # what down_proj receives
    small = (h.abs() < 0.01 * h.abs().amax(-1, keepdim=True)).float().mean(-1).numpy()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained",
                                   gridspec_kw=dict(width_ratios=[1.2, 1]))
    bins = np.linspace(float(z.min()), float(z.max()), 80)
    ax0.hist(z.flatten().numpy(), bins=bins, color="gray", alpha=0.7, label="z = gate_proj(x)")
    ax0.hist(F.silu(z).flatten().numpy(), bins=bins, color="C0", alpha=0.7, label="silu(z)")
    units, T = z.shape[1], z.shape[0]
    ax0.set(xlabel=tr("value", "数值"), ylabel=tr("number of (token, unit) pairs", "(token, 单元) 对的个数"),
            title=tr(f"{units:,} units × {T} tokens: silu squeezes the negative side towards 0",
                     f"{units:,} 个单元 × {T} 个 token：silu 把负值一侧压向 0"))
    ax0.legend()
    ax1.bar(range(len(tokens)), 100 * small, color="C0")
    ax1.set_xticks(range(len(tokens)), tokens, rotation=60, ha="right", fontsize=8)
    ax1.set(ylabel=tr("% of units", "单元占比（%）"), ylim=(0, 100),
            title=tr("units with |silu(z) · up| < 1 % of the token's largest",
                     "|silu(z) · up| 小于该 token 最大值 1 % 的单元"))
    fig.suptitle(title)
    return fig
