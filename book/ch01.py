"""Chapter 1's figures and the formula behind every tensor's shape.

Each figure function takes what the chapter already computed (tensor shapes by name, counts by part) and returns a
matplotlib Figure; matplotlib is imported inside, so the chapter script starts without it.
"""

import numpy as np

from qwen.lang import tr
from qwen.sizes import param_group, tensor_shapes


def formulas():
    """The shape of each tensor of a layer, in the notation of book.notation, and why it has that shape (in the
    language the course speaks when called: the chapter calls it after --lang is read)."""
    return {
        "input_layernorm.weight": ("(d,)", tr("one scale per channel of the residual stream",
                                              "残差流每个通道一个比例")),
        "post_attention_layernorm.weight": ("(d,)", tr("the same, before the MLP", "同上，在 MLP 之前")),
        "mlp.gate_proj.weight": ("(I, d)", tr("SwiGLU's gate, d -> I", "SwiGLU 的门，d -> I")),
        "mlp.up_proj.weight": ("(I, d)", tr("SwiGLU's value, d -> I", "SwiGLU 的值，d -> I")),
        "mlp.down_proj.weight": ("(d, I)", tr("back to the residual stream", "投影回残差流")),
        "linear_attn.in_proj_qkv.weight": ("(2·Hk·dk + Hv·dv, d)", tr("q, k and v in one matrix: [q | k | v]",
                                                                      "q、k、v 合在一个矩阵里：[q | k | v]")),
        "linear_attn.in_proj_z.weight": ("(Hv·dv, d)", tr("the output gate z, one per value channel",
                                                          "输出门 z，每个值通道一个")),
        "linear_attn.in_proj_b.weight": ("(Hv, d)", tr("β, the write strength, one per value head",
                                                       "β，写入强度，每个值头一个")),
        "linear_attn.in_proj_a.weight": ("(Hv, d)", tr("the decay input, one per value head",
                                                       "衰减项的输入，每个值头一个")),
        "linear_attn.conv1d.weight": ("(2·Hk·dk + Hv·dv, 1, K)",
                                      tr("depthwise: K taps for each q, k, v channel, no bias",
                                         "逐通道卷积：每个 q、k、v 通道 K 个抽头，无偏置")),
        "linear_attn.dt_bias": ("(Hv,)", tr("added to the decay input", "加到衰减项的输入上")),
        "linear_attn.A_log": ("(Hv,)", tr("log of each value head's decay rate", "每个值头衰减率的对数")),
        "linear_attn.norm.weight": ("(dv,)", tr("the gated RMSNorm, shared by the value heads",
                                                "门控 RMSNorm，各值头共用")),
        "linear_attn.out_proj.weight": ("(d, Hv·dv)", tr("back to the residual stream", "投影回残差流")),
        "self_attn.q_proj.weight": ("(2·H·D, d)", tr("query and output gate, interleaved per head",
                                                     "查询和输出门，按头交错排列")),
        "self_attn.k_proj.weight": ("(Hkv·D, d)", tr("keys: Hkv heads, shared by H/Hkv query heads each",
                                                     "键：Hkv 个头，每个由 H/Hkv 个查询头共用")),
        "self_attn.v_proj.weight": ("(Hkv·D, d)", tr("values, likewise", "值，同上")),
        "self_attn.o_proj.weight": ("(d, H·D)", tr("back to the residual stream", "投影回残差流")),
        "self_attn.q_norm.weight": ("(D,)", tr("RMSNorm over each query head, shared by the heads",
                                               "对每个查询头做 RMSNorm，各头共用")),
        "self_attn.k_norm.weight": ("(D,)", tr("RMSNorm over each key head", "对每个键头做 RMSNorm")),
        "embed_tokens.weight": ("(V, d)", tr("one row per token id", "每个 token id 一行")),
        "norm.weight": ("(d,)", tr("the final norm, before the head", "最终归一化，在输出头之前")),
        "lm_head.weight": ("(V, d)", tr("stored only when the head is not tied to the embedding",
                                        "只在输出头不与嵌入共享时才存")),
    }


FORMULAS = formulas()  # the shapes (the reasons in the language at import: the chapter calls formulas() itself)
ORDER = ("input_layernorm", "linear_attn", "self_attn", "post_attention_layernorm", "mlp")


def within_layer(name):
    """'layers.3.self_attn.q_proj.weight' -> (3, 'self_attn.q_proj.weight'); (None, name) outside the layers."""
    if not name.startswith("layers."):
        return None, name
    _, i, rest = name.split(".", 2)
    return int(i), rest


def per_layer(shapes, n_layers):
    """Parameters of each layer's mixer (DeltaNet or attention) and MLP: two lists of n_layers numbers."""
    mixer, mlp = [0] * n_layers, [0] * n_layers
    for name, shape in shapes.items():
        i, _ = within_layer(name)
        part = param_group(name)
        n = 1
        for s in shape:
            n *= s
        if part in ("linear_attention", "full_attention"):
            mixer[i] += n
        elif part == "mlp":
            mlp[i] += n
    return mixer, mlp


def _size_grid(shapes, n_layers, rows):
    """(len(rows), n_layers) array: the parameters of tensor `rows[r]` in layer i, NaN where the layer has none."""
    import numpy as np

    sizes = np.full((len(rows), n_layers), np.nan)
    for name, shape in shapes.items():
        i, rest = within_layer(name)
        if i is not None:
            sizes[rows.index(rest), i] = np.prod(shape)
    return sizes


def layers_figure(shapes, layer_types, real_config, synthetic):
    """Two columns, this checkpoint (left) and the real 0.8B from its config (right): parameters per layer (bars)
    and every tensor of every layer (one row per name, one column per layer, coloured by size on one log scale
    shared by both columns, so the synthetic widths and the real ones compare at a glance)."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    real_shapes = tensor_shapes(real_config)
    real_types = real_config["layer_types"]
    names = {within_layer(n)[1] for n in list(shapes) + list(real_shapes) if n.startswith("layers.")}
    rows = sorted(names, key=lambda r: (ORDER.index(r.split(".")[0]), r))
    columns = ((shapes, layer_types, tr("this checkpoint", "本检查点")),  # the title says synthetic, once
               (real_shapes, real_types, tr("real Qwen3.5-0.8B, from its config",
                                             "真实 Qwen3.5-0.8B（由其 config 算出）")))
    grids = [_size_grid(sh, len(types), rows) for sh, types, _ in columns]
    norm = LogNorm(min(float(g[g == g].min()) for g in grids), max(float(g[g == g].max()) for g in grids))
    fig, axes = plt.subplots(2, 2, figsize=(17, 10), layout="constrained", gridspec_kw=dict(height_ratios=[1, 2.2]))
    for col, ((sh, types, title), grid) in enumerate(zip(columns, grids)):
        mixer, mlp = (np.asarray(v) for v in per_layer(sh, len(types)))
        bars = axes[0, col]
        bars.bar(range(len(types)), mixer, color=["C1" if t == "full_attention" else "C0" for t in types])
        bars.bar(range(len(types)), mlp, bottom=mixer, color="C7")
        for kind in ("linear_attention", "full_attention"):
            if kind in types:
                n = mixer[types.index(kind)]
                bars.text(types.index(kind), n / 2, f"{n / 1e6:.2f} M", ha="center", va="center", fontsize=8,
                          color="white", weight="bold", rotation=90)
        bars.set(ylabel=tr("parameters", "参数量"), ylim=(0, (mixer + mlp).max() * 1.3), xlim=(-0.5, len(types) - 0.5),
                 title=tr(f"{title}:\nparameters per layer (the two norms are too small to see)",
                          f"{title}：\n每层的参数量（两个归一化太小，看不见）"))
        bars.yaxis.set_major_formatter("{x:,.0f}")
        bars.set_xticks(range(len(types)), [])
        heat = axes[1, col]
        image = heat.imshow(grid, aspect="auto", cmap="viridis", norm=norm, interpolation="nearest")
        heat.set_yticks(range(len(rows)), rows if col == 0 else [], fontsize=9)
        letters = ["F" if t == "full_attention" else "L" for t in types]
        heat.set_xticks(range(len(types)), [f"{i}\n{c}" for i, c in enumerate(letters)], fontsize=8)
        heat.set(xlabel=tr("layer (L = linear attention, F = full attention)", "层（L = 线性注意力，F = 全注意力）"),
                 title=tr(f"{title}:\neach tensor's size in each layer (empty: no such tensor)",
                          f"{title}：\n每层中每个张量的大小（空白：该层没有这个张量）"))
    axes[0, 0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C7")],
                      labels=[tr("linear attention (Gated DeltaNet)", "线性注意力（Gated DeltaNet）"),
                              tr("full attention", "全注意力"), "MLP"], ncol=3, loc="upper left", fontsize=8)
    fig.colorbar(image, ax=axes[1, :], label=tr("parameters in the tensor (log scale, both columns)",
                                                "张量的参数量（对数刻度，两列共用）"), fraction=0.03, pad=0.01)
    note = tr("; synthetic weights: the pattern is the real one, the sizes are not",
              "；合成权重：这个排列是真实的，尺寸则不是") if synthetic else ""
    fig.suptitle(tr(f"The tensors of the {len(layer_types)} layers: the [L, L, L, F] pattern{note}",
                    f"{len(layer_types)} 层的张量：[L, L, L, F] 排列{note}"))
    return fig


def parts_figure(counts, real_counts, n_linear, n_full, synthetic):
    """Parameters by part, this checkpoint beside the real 0.8B; counts as qwen.sizes.count_by_part gives.
    Both panels share one x scale, the share of the model, so the two proportions compare at a glance; each bar
    is labelled with its count."""
    import matplotlib.pyplot as plt

    parts = ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms")
    L = n_linear + n_full
    labels = [tr("embedding", "嵌入"), tr("lm_head\n(0 when tied)", "lm_head\n（共享时为 0）"),
              tr(f"linear attention\n({n_linear} layers)", f"线性注意力\n（{n_linear} 层）"),
              tr(f"full attention\n({n_full} layers)", f"全注意力\n（{n_full} 层）"),
              tr(f"MLP\n({L} layers)", f"MLP\n（{L} 层）"),
              tr(f"layer and final\nnorms ({2 * L + 1})", f"层归一化与\n最终归一化（{2 * L + 1}）")]
    tag = tr(" (synthetic weights)", "（合成权重）") if synthetic else ""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4), layout="constrained", sharex=True)
    for ax, c, title in ((axes[0], counts, tr(f"this checkpoint{tag}", f"本检查点{tag}")),
                         (axes[1], real_counts, tr("real Qwen3.5-0.8B, from its config",
                                                   "真实 Qwen3.5-0.8B（由其 config 算出）"))):
        values = np.array([c[k] for k in parts])
        shares = 100 * values / values.sum()
        ax.barh(labels, shares, color=["C2", "C4", "C0", "C1", "C7", "C3"])
        for y, (v, share) in enumerate(zip(values, shares)):
            ax.text(share, y, f"  {v:,} ({share / 100:.1%})", va="center", fontsize=9)
        ax.invert_yaxis()
        ax.set(xlabel=tr("share of the model's parameters (%)", "占模型参数量的比例（%）"),
               title=tr(f"{title}: {values.sum():,} parameters", f"{title}：{values.sum():,} 个参数"))
    axes[0].set_xlim(0, 130)  # room for the labels beside the longest bar
    axes[0].set_xticks(range(0, 101, 20))
    fig.suptitle(tr("Parameters by part of the model (q/k norms and the gated norm count with their mixer)",
                    "模型各部分的参数量（q/k 归一化和门控归一化计入所在的混合器）"))
    return fig
