"""Chapter 6's figures: attention maps of a sentence, the output gate's values, and the KV cache's size against the
context length for every dense Qwen3.5 size.

The first two draw whatever checkpoint they are given; on the synthetic one the weights are random, the titles say
so, and the patterns say nothing about the real model. The cache sizes are config arithmetic (qwen/sizes.py): they
hold for the real models as far as their configs (listed there, with where each number comes from) are right. Each
function returns a matplotlib Figure.
"""
import numpy as np

from qwen.sizes import SIZES, cache_bytes


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
        ax.set(title=f"head {h}", xlabel="key (what is looked at)")
    axes[0].set_ylabel("query (who looks)")
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="attention weight")
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
    ax0.set(xlabel="sigmoid(gate): how much of each output dimension passes", ylabel="number of (token, dim) pairs",
            title=f"{s.shape[0]} tokens × {s.shape[1]:,} dimensions; 0.5 is sigmoid(0)")
    heads = np.arange(num_heads)
    ax1.bar(heads - 0.2, per_head.mean(axis=(0, 2)), width=0.4, color="C3", label="mean")
    ax1.bar(heads + 0.2, (per_head < 0.1).mean(axis=(0, 2)), width=0.4, color="gray", label="share below 0.1")
    ax1.set(xticks=heads, xlabel="head", ylim=(0, 1), title="per head")
    ax1.legend()
    fig.suptitle(title)
    return fig


def kv_cache_bytes(sizes=SIZES, context=262_144, deltanet_bytes=None):
    """The KV cache of one sequence in bf16 against its length, for each size (log-log), with the bytes per token
    in the legend; `deltanet_bytes`, if given, is the 0.8B's constant DeltaNet state (chapter 7), drawn flat."""
    import matplotlib.pyplot as plt

    lengths = np.geomspace(10, context, 100)
    fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")
    ends = {}  # bytes per token -> the sizes that share it (their lines coincide: drawn dashed over solid)
    for (name, c), colour in zip(sizes.items(), plt.cm.viridis(np.linspace(0, 0.85, len(sizes)))):
        per = cache_bytes(c, 1)[0]  # bf16
        ends.setdefault(per, []).append(name)
        ax.plot(lengths, lengths * per, color=colour, lw=2, ls="-" if len(ends[per]) == 1 else (0, (4, 3)),
                label=f"{name}: {c.layer_types.count('full_attention')} full layers × 2 × "
                      f"{c.num_key_value_heads} × {c.head_dim} × 2 B = {per // 1024} KiB per token")
    for per, names in ends.items():
        ax.annotate(f"{' and '.join(names)}: {per * context / 2 ** 30:.0f} GiB", (context, per * context),
                    xytext=(4, 0), textcoords="offset points", fontsize=8, va="center")
    if deltanet_bytes is not None:
        ax.axhline(deltanet_bytes, color="C3", ls="--", lw=1.5,
                   label=f"0.8B's DeltaNet state (chapter 7): {deltanet_bytes / 2 ** 20:.1f} MiB at any length")
    for gib in (1, 16):
        ax.axhline(gib * 2 ** 30, color="gray", ls=":", lw=0.8)
        ax.text(context / 40, gib * 2 ** 30 * 1.15, f"{gib} GiB", fontsize=8, color="gray")
    ax.set(xscale="log", yscale="log", xlabel="tokens in the sequence (prompt + generated)",
           ylabel="bytes of K and V (bf16, one sequence)", xlim=(10, context * 8),
           title="KV cache of the dense Qwen3.5 sizes: only every 4th layer keeps one, and it grows with every token")
    ax.legend(fontsize=8, loc="lower right")
    return fig
