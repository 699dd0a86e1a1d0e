"""Chapter 1's figures and the formula behind every tensor's shape.

Each figure function takes what the chapter already computed (tensor shapes by name, counts by part) and returns a
matplotlib Figure; matplotlib is imported inside, so the chapter script starts without it.
"""
import numpy as np

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
    columns = ((shapes, layer_types, "this checkpoint" + (" (synthetic weights)" if synthetic else "")),
               (real_shapes, real_types, "real Qwen3.5-0.8B, from its config"))
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
        bars.set(ylabel="parameters", ylim=(0, (mixer + mlp).max() * 1.3), xlim=(-0.5, len(types) - 0.5),
                 title=f"{title}:\nparameters per layer (the two norms are too small to see)")
        bars.yaxis.set_major_formatter("{x:,.0f}")
        bars.set_xticks(range(len(types)), [])
        heat = axes[1, col]
        image = heat.imshow(grid, aspect="auto", cmap="viridis", norm=norm, interpolation="nearest")
        heat.set_yticks(range(len(rows)), rows if col == 0 else [], fontsize=9)
        letters = ["F" if t == "full_attention" else "L" for t in types]
        heat.set_xticks(range(len(types)), [f"{i}\n{c}" for i, c in enumerate(letters)], fontsize=8)
        heat.set(xlabel="layer (L = linear attention, F = full attention)",
                 title=f"{title}:\neach tensor's size in each layer (empty: no such tensor)")
    axes[0, 0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C7")],
                      labels=["linear attention (Gated DeltaNet)", "full attention", "MLP"], ncol=3, loc="upper left",
                      fontsize=8)
    fig.colorbar(image, ax=axes[1, :], label="parameters in the tensor (log scale, both columns)", fraction=0.03,
                 pad=0.01)
    note = "; the pattern is the real one, the synthetic sizes are not" if synthetic else ""
    fig.suptitle(f"The tensors of the {len(layer_types)} layers: the [L, L, L, F] pattern{note}")
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
