"""Chapter 1's figures and the formula behind every tensor's shape.

Each figure function takes what the chapter already computed (tensor shapes by name, counts by part) and returns a
matplotlib Figure; matplotlib is imported inside, so the chapter script starts without it.
"""
from qwen.sizes import part_of, tensor_shapes

# The shape of each tensor of a layer, in the notation of book.notation: why it has that shape.
FORMULAS = {
    "input_layernorm.weight": ("(d,)", "one scale per channel of the residual stream"),
    "post_attention_layernorm.weight": ("(d,)", "the same, before the MLP"),
    "mlp.gate_proj.weight": ("(I, d)", "SwiGLU's gate, d -> I"),
    "mlp.up_proj.weight": ("(I, d)", "SwiGLU's value, d -> I"),
    "mlp.down_proj.weight": ("(d, I)", "back to the residual stream"),
    "linear_attn.in_proj_qkv.weight": ("(2·Hk·dk + Hv·dv, d)", "q, k and v in one matrix: [q | k | v]"),
    "linear_attn.in_proj_z.weight": ("(Hv·dv, d)", "the output gate z, one per value channel"),
    "linear_attn.in_proj_b.weight": ("(Hv, d)", "β, the write strength, one per value head"),
    "linear_attn.in_proj_a.weight": ("(Hv, d)", "the decay input, one per value head"),
    "linear_attn.conv1d.weight": ("(2·Hk·dk + Hv·dv, 1, K)", "depthwise: K taps for each q, k, v channel, no bias"),
    "linear_attn.dt_bias": ("(Hv,)", "added to the decay input"),
    "linear_attn.A_log": ("(Hv,)", "log of each value head's decay rate"),
    "linear_attn.norm.weight": ("(dv,)", "the gated RMSNorm, shared by the value heads"),
    "linear_attn.out_proj.weight": ("(d, Hv·dv)", "back to the residual stream"),
    "self_attn.q_proj.weight": ("(2·H·D, d)", "query and output gate, interleaved per head"),
    "self_attn.k_proj.weight": ("(Hkv·D, d)", "keys: Hkv heads, shared by H/Hkv query heads each"),
    "self_attn.v_proj.weight": ("(Hkv·D, d)", "values, likewise"),
    "self_attn.o_proj.weight": ("(d, H·D)", "back to the residual stream"),
    "self_attn.q_norm.weight": ("(D,)", "RMSNorm over each query head, shared by the heads"),
    "self_attn.k_norm.weight": ("(D,)", "RMSNorm over each key head"),
    "embed_tokens.weight": ("(V, d)", "one row per token id"),
    "norm.weight": ("(d,)", "the final norm, before the head"),
    "lm_head.weight": ("(V, d)", "stored only when the head is not tied to the embedding"),
}
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
        part = part_of(name)
        n = 1
        for s in shape:
            n *= s
        if part in ("linear_attention", "full_attention"):
            mixer[i] += n
        elif part == "mlp":
            mlp[i] += n
    return mixer, mlp


def layers_figure(shapes, layer_types, real_config, synthetic):
    """Parameters per layer for this checkpoint and for the real 0.8B (bars), and every tensor of every layer of
    this checkpoint (one row per name, one column per layer, coloured by size)."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LogNorm

    L = len(layer_types)
    letters = ["F" if t == "full_attention" else "L" for t in layer_types]
    cells = {within_layer(n): s for n, s in shapes.items() if n.startswith("layers.")}
    rows = sorted({rest for _, rest in cells}, key=lambda r: (ORDER.index(r.split(".")[0]), r))
    sizes = np.full((len(rows), L), np.nan)
    for (i, rest), shape in cells.items():
        sizes[rows.index(rest), i] = np.prod(shape)
    real_types = real_config["layer_types"]
    fig, axes = plt.subplots(3, 1, figsize=(13, 12), sharex=True, layout="constrained",
                             gridspec_kw=dict(height_ratios=[1, 1, 3]))
    tag = " (synthetic weights)" if synthetic else ""
    for ax, (mixer, mlp), types, title in (
            (axes[0], per_layer(shapes, L), layer_types, f"this checkpoint{tag}"),
            (axes[1], per_layer(tensor_shapes(real_config), len(real_types)), real_types,
             "real Qwen3.5-0.8B, from its config")):
        mixer, mlp = np.array(mixer), np.array(mlp)
        ax.bar(range(len(types)), mixer, color=["C1" if t == "full_attention" else "C0" for t in types])
        ax.bar(range(len(types)), mlp, bottom=mixer, color="C7")
        for kind, colour in (("linear_attention", "C0"), ("full_attention", "C1")):
            n = mixer[types.index(kind)] if kind in types else 0
            ax.text(types.index(kind) if kind in types else 0, n / 2, f"{n / 1e6:.2f} M", ha="center",
                    va="center", fontsize=8, color="white", weight="bold", rotation=90)
        ax.set(ylabel="parameters", ylim=(0, (mixer + mlp).max() * 1.3),
               title=f"{title}: parameters per layer (the two norms are too small to see)")
        ax.yaxis.set_major_formatter("{x:,.0f}")
    axes[0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C7")],
                   labels=["linear attention (Gated DeltaNet)", "full attention", "MLP"], ncol=3, loc="upper left")
    image = axes[2].imshow(sizes, aspect="auto", cmap="viridis", norm=LogNorm(), interpolation="nearest")
    axes[2].set_yticks(range(len(rows)), rows, fontsize=9)
    axes[2].set_xticks(range(L), [f"{i}\n{c}" for i, c in enumerate(letters)])
    axes[2].set(xlabel="layer (L = linear attention, F = full attention)",
                title=f"this checkpoint{tag}: one row per tensor name, its size in each layer (empty: no such tensor)"
                      + ("\nthe pattern is the real one; the sizes are at the synthetic widths" if synthetic else ""))
    fig.colorbar(image, ax=axes[2], label="parameters in the tensor (log scale)", fraction=0.03, pad=0.01)
    fig.suptitle(f"The tensors of the {L} layers: the [L, L, L, F] pattern{tag}")
    return fig


def parts_figure(counts, real_counts, n_linear, n_full, synthetic):
    """Parameters by part, this checkpoint beside the real 0.8B; counts as qwen.sizes.count_by_part gives.
    Both panels share one x scale, the share of the model, so the two proportions compare at a glance; each bar
    is labelled with its count."""
    import matplotlib.pyplot as plt
    import numpy as np

    parts = ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms")
    L = n_linear + n_full
    labels = ["embedding", "lm_head\n(0 when tied)", f"linear attention\n({n_linear} layers)",
              f"full attention\n({n_full} layers)", f"MLP\n({L} layers)", f"layer and final\nnorms ({2 * L + 1})"]
    tag = " (synthetic weights)" if synthetic else ""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4), layout="constrained", sharex=True)
    for ax, c, title in ((axes[0], counts, f"this checkpoint{tag}"),
                         (axes[1], real_counts, "real Qwen3.5-0.8B, from its config")):
        values = np.array([c[k] for k in parts])
        shares = 100 * values / values.sum()
        ax.barh(labels, shares, color=["C2", "C4", "C0", "C1", "C7", "C3"])
        for y, (v, share) in enumerate(zip(values, shares)):
            ax.text(share, y, f"  {v:,} ({share / 100:.1%})", va="center", fontsize=9)
        ax.invert_yaxis()
        ax.set(xlabel="share of the model's parameters (%)", title=f"{title}: {values.sum():,} parameters")
    axes[0].set_xlim(0, 130)  # room for the labels beside the longest bar
    axes[0].set_xticks(range(0, 101, 20))
    fig.suptitle("Parameters by part of the model (q/k norms and the gated norm count with their mixer)")
    return fig
