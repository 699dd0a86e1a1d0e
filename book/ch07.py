"""Chapter 7's figures; the memory bill's arithmetic and the sizes of the Qwen3.5 family are in qwen/family.py.

Each figure function takes what the chapter computed and returns a matplotlib Figure; matplotlib is imported inside,
so the chapter script starts without it. Every text is in the language the course speaks (qwen.lang).
"""
from qwen.family import SIZES, all_attention_bytes, cache_bytes, kv_bytes_per_token, linear_layer_bytes
from qwen.lang import tr


def memory_figure(errors, decays, tokens=40):
    """Left: recall error of the delta rule and of plain linear attention on the chapter's key → value tests.
    Right: what the forgetting gate leaves of a memory written n tokens ago, e^(g·n), for a few decays."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    names = list(errors)
    x = np.arange(len(names))
    for i, (label, colour) in enumerate(((tr("delta rule", "delta 规则"), "#2a9d8f"),
                                         (tr("plain linear attention", "普通线性注意力"), "#e76f51"))):
        values = [max(errors[n][i], 1e-17) for n in names]
        ax.bar(x + (i - 0.5) * 0.38, values, 0.38, label=label, color=colour)
    ax.set_yscale("log")
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylabel(tr("largest recall error |Sᵀk − v|", "最大读回误差 |Sᵀk − v|"))
    ax.set_title(tr("reading back what was written (float64: bars near 1e-15 are rounding, i.e. exact)",
                    "读回写入的内容（float64：1e-15 附近的柱子只是舍入误差，等于精确读回）"), fontsize=10)
    ax.legend()
    n = np.arange(tokens + 1)
    for e in decays:
        bx.plot(n, e ** n, label=f"e^g = {e:g}")
    bx.set_xlabel(tr("tokens since the write", "写入之后经过的 token 数"))
    bx.set_ylabel(tr("share of the memory left", "记忆剩下的比例"))
    bx.set_title(tr("the forgetting gate: every step multiplies the state by e^g", "遗忘门：每一步都把状态乘以 e^g"))
    bx.legend()
    return fig


def gates_figure(tokens, decay, beta, synthetic):
    """Heatmaps, one row per value head, one column per token: the decay as a half-life, ln ½ / g tokens (how long
    a memory lasts at that token's rate), on a log colour scale; and the write strength β."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    tag = tr(" (synthetic weights)", "（合成权重）") if synthetic else ""
    g = np.log(np.clip(np.asarray(decay, dtype=np.float64), 1e-300, 1.0))  # g ≤ 0
    half_life = np.clip(np.log(0.5) / np.minimum(g, -1e-12), 1e-2, 1e6)  # tokens; g → 0 is a memory that lasts
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 0.45 * len(tokens)), 5.5), layout="constrained", sharex=True)
    image = axes[0].imshow(half_life.T, aspect="auto", cmap="viridis",
                           norm=LogNorm(vmin=min(1e-2, half_life.min()), vmax=max(1e3, half_life.max())))
    axes[0].set_title(tr(f"half-life of a memory, ln ½ / g tokens (log scale), per token and value head, layer 0{tag}",
                         f"记忆的半衰期（ln ½ / g 个 token，对数刻度），逐 token、逐值头，第 0 层{tag}"))
    fig.colorbar(image, ax=axes[0], label=tr("tokens", "token 数"))
    image = axes[1].imshow(np.asarray(beta).T, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    axes[1].set_title(tr("write strength β = sigmoid(b), layer 0", "写入强度 β = sigmoid(b)，第 0 层"))  # tagged once
    fig.colorbar(image, ax=axes[1])
    for ax in axes:
        ax.set_ylabel(tr("value head", "值头"))
    axes[1].set_xticks(range(len(tokens)), tokens, rotation=60, fontsize=8)
    return fig


def state_norm_figure(tokens, norms, synthetic):
    """The Frobenius norm of each value head's state after each token (the memory filling up and fading)."""
    import matplotlib.pyplot as plt

    tag = tr(" (synthetic weights)", "（合成权重）") if synthetic else ""
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(tokens)), 3.8), layout="constrained")
    for h in range(norms.shape[1]):
        ax.plot(norms[:, h], marker=".", label=tr(f"head {h}", f"头 {h}"))
    ax.set_xticks(range(len(tokens)), tokens, rotation=60, fontsize=8)
    ax.set_ylabel(tr("‖S‖ (Frobenius)", "‖S‖（Frobenius 范数）"))
    ax.set_title(tr(f"the state's size as the sentence goes on, layer 0{tag}",
                    f"逐 token 看状态的大小，第 0 层{tag}"))
    ax.legend(fontsize=8, ncols=4)
    return fig


def chunk_figure(Gamma, A, head, synthetic):
    """One chunk of one value head: the decay matrix Γ and the unit lower-triangular matrix A of the system."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tag = tr(" (synthetic weights)", "（合成权重）") if synthetic else ""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    below = A.tril(-1)  # A's diagonal is all ones: drawn apart, it would set the colour scale
    for ax, values, title, cmap in ((axes[0], Gamma, tr("Γ_ij = e^(G_i − G_j), 0 above the diagonal",
                                                        "Γ_ij = e^(G_i − G_j)，对角线以上为 0"), "viridis"),
                                    (axes[1], below, tr("A − I = strictly_lower(βKKᵀ ⊙ Γ); A's diagonal is 1",
                                                        "A − I = strictly_lower(βKKᵀ ⊙ Γ)；A 的对角线为 1"),
                                     "coolwarm")):
        limit = max(float(abs(values).max()), 1e-12) if cmap == "coolwarm" else 1.0
        image = ax.imshow(values, cmap=cmap, vmin=-limit if cmap == "coolwarm" else 0, vmax=limit)
        ax.set_xlabel(tr("j (the token that wrote)", "j（写入的 token）"))
        ax.set_ylabel(tr("i (the token that reads)", "i（读取的 token）"))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # token positions: no 2.5
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax)
    fig.suptitle(tr(f"one chunk of value head {head}, layer 0{tag}", f"值头 {head} 的一个块，第 0 层{tag}"))
    return fig


def toy_gamma_figure(Gamma, e):
    """Γ of a toy chunk in which every token decays the memory by the same e^g = e: Γ_ij = e^(i − j) below the
    diagonal, 0 above; with the values printed on a small chunk."""
    import matplotlib.pyplot as plt
    import numpy as np

    Gamma = np.asarray(Gamma, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
    image = ax.imshow(Gamma, cmap="viridis", vmin=0, vmax=1)
    n = Gamma.shape[0]
    for i in range(n):
        for j in range(i + 1):
            if (i - j) % 5 == 0:
                ax.text(j, i, f"{Gamma[i, j]:.2f}", ha="center", va="center", fontsize=6,
                        color="black" if Gamma[i, j] > 0.6 else "white")
    ax.set(xlabel=tr("j (the token that wrote)", "j（写入的 token）"),
           ylabel=tr("i (the token that reads)", "i（读取的 token）"),
           title=tr(f"Γ_ij = e^(G_i − G_j) of a toy chunk with e^g = {e:g} at every token: {e:g}^(i − j)",
                    f"玩具块（每个 token 的 e^g 都是 {e:g}）的 Γ_ij = e^(G_i − G_j) = {e:g}^(i − j)"))
    ax.title.set_fontsize(9)
    fig.colorbar(image, ax=ax)
    return fig


def memory_bill_figure(sizes=SIZES, tokens=32768):
    """Left: bytes one layer keeps for one sequence, by context length (log axes), in the 0.8B: a linear-attention
    layer's state (flat) and a full-attention layer's KV cache (a line), with the length where they cross. Right:
    the whole model's cache at `tokens` for each size, against the same model with full attention in every layer."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
    s = sizes["0.8B"]
    T = np.geomspace(1, tokens, 200)
    state = linear_layer_bytes(s) / 2 ** 20
    ax.plot(T, T * kv_bytes_per_token(s) / 2 ** 20, label=tr("full attention: KV cache (grows)",
                                                              "全注意力：键值缓存（增长）"))
    ax.plot(T, np.full(T.shape, state), label=tr("Gated DeltaNet: state + conv state (fixed)",
                                                 "Gated DeltaNet：状态 + 卷积状态（固定）"))
    even = linear_layer_bytes(s) / kv_bytes_per_token(s)  # the context at which the two lines cross
    ax.plot([even], [state], "ko")
    ax.axvline(even, color="gray", ls=":", lw=1)
    ax.annotate(tr(f"equal at {even:,.0f} tokens ({state:.2f} MiB)",
                   f"两者在 {even:,.0f} 个 token 处持平（{state:.2f} MiB）"), (even, state), xytext=(0.05, 0.75),
                textcoords="axes fraction", arrowprops=dict(arrowstyle="->"))
    ax.set(xscale="log", yscale="log", xlim=(1, tokens))
    ax.set_xlabel(tr("tokens in the context (log scale)", "上下文中的 token 数（对数刻度）"))
    ax.set_ylabel(tr("MiB per layer, per sequence (log scale)", "每层每条序列占的 MiB（对数刻度）"))
    ax.set_title(tr("one layer of the real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B 的一层"))
    ax.legend(loc="lower right")
    names = list(sizes)
    x = np.arange(len(names))
    hybrid = [sum(cache_bytes(sizes[n], tokens)) / 2 ** 30 for n in names]
    full = [all_attention_bytes(sizes[n], tokens) / 2 ** 30 for n in names]
    bx.bar(x - 0.2, hybrid, 0.4, label=tr("Qwen3.5 ([L, L, L, F] layers)", "Qwen3.5（层型 [L, L, L, F]）"),
           color="#2a9d8f")
    bx.bar(x + 0.2, full, 0.4, label=tr("the same with full attention everywhere", "同一模型每层都用全注意力"),
           color="#bbbbbb")
    for i, a in enumerate(hybrid):
        bx.text(i - 0.2, a, f"{a:.2f}", ha="center", va="bottom", fontsize=8)
    bx.set_xticks(x, [f"Qwen3.5-{n}" for n in names])
    bx.set_ylabel(tr(f"GiB for one sequence of {tokens:,} tokens", f"一条 {tokens:,} 个 token 的序列占的 GiB"))
    bx.set_title(tr("the whole model's cache (sizes from the published model cards)",
                    "整个模型的缓存（尺寸取自已发布的模型卡）"))
    bx.legend()
    return fig
