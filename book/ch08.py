"""Chapter 8's figures: the layer pattern, the residual stream's size through the layers, the logit lens, and where
the parameters and the time go. Each takes what the chapter computed and returns a matplotlib Figure."""

KIND = {"linear_attention": ("L", "C0", "Gated DeltaNet"), "full_attention": ("F", "C3", "gated attention")}


def _suffix(synthetic):
    return " (synthetic weights)" if synthetic else ""


def pattern_figure(layer_types):
    """One box per layer, L or F: the hybrid rhythm of the stack."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(min(14, 0.5 * len(layer_types) + 1), 1.6))
    for i, kind in enumerate(layer_types):
        letter, color, _ = KIND[kind]
        ax.add_patch(plt.Rectangle((i, 0), 0.9, 1, color=color, alpha=0.8))
        ax.text(i + 0.45, 0.5, letter, ha="center", va="center", color="white", fontweight="bold")
        ax.text(i + 0.45, -0.3, str(i), ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.2, len(layer_types))
    ax.set_ylim(-0.6, 1.1)
    ax.axis("off")
    ax.set_title(f"{len(layer_types)} decoder layers: L = Gated DeltaNet (linear attention), F = gated full attention")
    return fig


def residual_figure(rms, layer_types, synthetic):
    """RMS of the residual stream after the embedding (0) and after each layer, per position and its mean."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    depth = range(len(rms))
    ax.plot(depth, rms.mean(1), color="k", lw=2, label="mean over positions")
    ax.plot(depth, rms, color="gray", lw=0.5, alpha=0.4)
    for i, kind in enumerate(layer_types):
        if kind == "full_attention":
            ax.axvline(i + 1, color="C3", alpha=0.2)
    ax.set(xlabel="after layer (0 = the embedding); red lines: full-attention layers", ylabel="RMS of x",
           yscale="log", title=f"Size of the residual stream through the layers{_suffix(synthetic)}")
    ax.legend()
    return fig


def lens_figure(ranks, labels, synthetic):
    """Logit lens: the rank of each position's actual next token when the final norm and head read the residual
    stream after layer i. ranks: (layers + 1, T) ints; labels: the T next tokens as text."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(labels)), 4.5))
    image = ax.imshow(np.log10(1 + np.asarray(ranks)), aspect="auto", cmap="viridis_r", origin="lower")
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
    ax.set(xlabel="next token (the one the text continues with)", ylabel="after layer (0 = embedding)",
           title=f"Logit lens: rank of the actual next token at each depth{_suffix(synthetic)}")
    fig.colorbar(image, ax=ax, label="log10(1 + rank); 0 = top-1")
    return fig


def share_figure(params, seconds, synthetic):
    """Share of the parameters and of the forward time per component (two bars of stacked shares)."""
    import matplotlib.pyplot as plt

    parts = list(params)
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for row, values in enumerate((params, seconds)):
        total, left = sum(values.values()), 0.0
        for k, part in enumerate(parts):
            share = values.get(part, 0) / total
            ax.barh(row, share, left=left, color=f"C{k}", label=part if row == 0 else None)
            if share > 0.06:
                ax.text(left + share / 2, row, f"{share:.0%}", ha="center", va="center", color="white", fontsize=8)
            left += share
    ax.set_yticks([0, 1], ["parameters", "time"])
    ax.set_xlim(0, 1)
    ax.set_title(f"Where the parameters and the forward time go{_suffix(synthetic)}")
    ax.legend(ncol=3, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    return fig
