"""Chapter 6's figures: attention maps of a sentence, the output gate's values, and the KV cache's size against the
context length for every dense Qwen3.5 size.

The first two draw whatever checkpoint they are given; on the synthetic one the weights are random, the titles say
so, and the patterns say nothing about the real model. The cache sizes are config arithmetic (qwen/family.py): they
hold for the real models as far as their configs (listed there, with where each number comes from) are right. Each
function returns a matplotlib Figure; its texts are in the language the course speaks (qwen.lang), drawn with a CJK
font as a fallback (book/ch02.py) so that the Chinese ones show.
"""

import numpy as np

from qwen.family import SIZES, cache_bytes
from qwen.lang import tr


def attention_maps(probs, tokens, heads, title):
    """One panel per head: the attention weights (T queries × T keys) of `probs` (H, T, T), tokens as tick
    labels; the upper triangle is exactly 0 (the causal mask)."""
    import matplotlib.pyplot as plt

    T = len(tokens)
    fig, axes = plt.subplots(1, len(heads), figsize=(4.3 * len(heads) + 1, 4.6), layout="constrained")
    axes = np.atleast_1d(axes)
    for ax, h in zip(axes, heads):
        image = ax.imshow(probs[h].float().numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_xticks(range(T), tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(T), tokens, fontsize=7)
        ax.set(title=tr(f"head {h}", f"头 {h}"), xlabel=tr("key (what is looked at)", "键（被看的一方）"))
    axes[0].set_ylabel(tr("query (who looks)", "查询（看的一方）"))
    fig.colorbar(image, ax=list(axes), shrink=0.8, label=tr("attention weight", "注意力权重"))
    fig.suptitle(title)
    return fig


def gate_distribution(gate, num_heads, title):
    """sigmoid(gate) for every (token, dimension) of one layer on a sentence: a histogram over all of them (left)
    and, per head, the mean and the share below 0.1 (right). gate: (T, H·D), the pre-sigmoid values."""
    import matplotlib.pyplot as plt

    s = 1 / (1 + np.exp(-gate.float().numpy()))  # (T, H·D)
    per_head = s.reshape(s.shape[0], num_heads, -1)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.2), layout="constrained",
                                   gridspec_kw=dict(width_ratios=[1.3, 1]))
    ax0.hist(s.ravel(), bins=np.linspace(0, 1, 51), color="C3", alpha=0.8)
    ax0.axvline(0.5, color="gray", ls=":", lw=1)
    ax0.set(xlabel=tr("sigmoid(gate): how much of each output dimension passes", "sigmoid(gate)：各输出维度放行多少"),
            ylabel=tr("number of (token, dim) pairs", "(token, 维度) 对的个数"),
            title=tr(f"{s.shape[0]} tokens × {s.shape[1]:,} dimensions; 0.5 is sigmoid(0)",
                     f"{s.shape[0]} 个 token × {s.shape[1]:,} 维；0.5 即 sigmoid(0)"))
    heads = np.arange(num_heads)
    ax1.bar(heads - 0.2, per_head.mean(axis=(0, 2)), width=0.4, color="C3", label=tr("mean", "均值"))
    ax1.bar(heads + 0.2, (per_head < 0.1).mean(axis=(0, 2)), width=0.4, color="gray",
            label=tr("share below 0.1", "小于 0.1 的占比"))
    ax1.set(xticks=heads, xlabel=tr("head", "头"), ylim=(0, 1), title=tr("per head", "按头统计"))
    ax1.legend()
    fig.suptitle(title)
    return fig


def kv_cache_bytes(sizes=SIZES, context=262_144):
    """The KV cache of one sequence in bf16 against its length, for each size (log-log), with the bytes per token
    in the legend; then each size's DeltaNet state (fp32 state + bf16 conv inputs, chapter 7), flat and dashed, since
    it does not grow (one line for the sizes that share it)."""
    import matplotlib.pyplot as plt

    lengths = np.geomspace(10, context, 100)
    fig, ax = plt.subplots(figsize=(11, 5.5), layout="constrained")
    ends = {}  # bytes per token -> the sizes that share it (their lines coincide: drawn dashed over solid)
    states = {}  # DeltaNet bytes -> (colour, linear layers, the sizes that share them)
    for (name, c), colour in zip(sizes.items(), plt.cm.viridis(np.linspace(0, 0.85, len(sizes)))):
        per, state = cache_bytes(c, 1)  # bf16 K and V per token; the DeltaNet layers' fixed bytes
        full = c.layer_types.count("full_attention")
        ends.setdefault(per, []).append(name)
        ax.plot(lengths, lengths * per, color=colour, lw=2, ls="-" if len(ends[per]) == 1 else (0, (4, 3)),
                label=tr(f"{name}: {full} full layers × 2 × {c.num_key_value_heads} × {c.head_dim} × 2 B = "
                         f"{per // 1024} KiB per token",
                         f"{name}：{full} 个全注意力层 × 2 × {c.num_key_value_heads} × {c.head_dim} × 2 B = "
                         f"每 token {per // 1024} KiB"))
        states.setdefault(state, (colour, c.layer_types.count("linear_attention"), []))[2].append(name)
    both, colon = tr(" and ", "、"), tr(": ", "：")
    for state, (colour, linear, names) in states.items():  # sizes with the same DeltaNet layers share one line
        ax.plot(lengths, np.full(lengths.shape, state), color=colour, lw=1.2, ls="--",
                label=tr(f"{both.join(names)}: DeltaNet state of {linear} linear layers, {state / 2 ** 20:.1f} MiB "
                         f"at any length",
                         f"{both.join(names)}：{linear} 个线性注意力层的 DeltaNet 状态，不论多长都是 "
                         f"{state / 2 ** 20:.1f} MiB"))
    for per, names in ends.items():
        ax.annotate(f"{both.join(names)}{colon}{per * context / 2 ** 30:.0f} GiB", (context, per * context),
                    xytext=(4, 0), textcoords="offset points", fontsize=8, va="center")
    for gib in (1, 16):
        ax.axhline(gib * 2 ** 30, color="gray", ls=":", lw=0.8)
        ax.text(context / 40, gib * 2 ** 30 * 1.15, f"{gib} GiB", fontsize=8, color="gray")
    ax.set(xscale="log", yscale="log",
           xlabel=tr("tokens in the sequence (prompt + generated)", "序列中的 token 数（提示词 + 生成部分）"),
           ylabel=tr("bytes (one sequence)", "字节（一条序列）"), xlim=(10, context * 8),
           title=tr("Cache of the dense Qwen3.5 sizes: K and V grow with every token (solid), the DeltaNet state "
                    "does not (dashed)",
                    "Qwen3.5 各稠密尺寸的缓存：K 和 V 每多一个 token 就增长一截（实线），DeltaNet 状态不增长（虚线）"))
    ax.legend(fontsize=7, loc="upper left")
    return fig
