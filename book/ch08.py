"""Chapter 8's figures: the layer pattern, the residual stream's size through the layers, the logit lens, and where
the parameters and the time go; and the FLOP count of a forward pass at any config's shapes (the real 0.8B's, when
the checkpoint is synthetic). Each figure takes what the chapter computed and returns a matplotlib Figure; its texts
are in the language the course speaks (qwen.lang), drawn with a CJK font as a fallback (book/ch02.py)."""

from qwen.lang import tr

KIND = {"linear_attention": ("L", "C0", "Gated DeltaNet"), "full_attention": ("F", "C3", "gated attention")}


def component_name(part):
    """A component's name as the reader reads it; the counts stay keyed by the English name."""
    return {"embedding + head": tr("embedding + head", "嵌入 + 输出头"),
            "DeltaNet mixers": tr("DeltaNet mixers", "DeltaNet 混合器"),
            "attention mixers": tr("attention mixers", "注意力混合器"), "MLPs": tr("MLPs", "MLP 层"),
            "norms": tr("norms", "归一化")}.get(part, part)


def flops_by_component(cfg, T):
    """FLOPs of one forward pass over T tokens at cfg's shapes, by component, counted by torch.utils.flop_counter
    while the course's own modules run on the meta device (shapes only: no weights, no memory, no time). It counts
    matrix products and convolutions (2 FLOPs per multiply-add), the work that dominates; norms, gates and other
    elementwise operations are left out. Layers of one kind are identical, so one of each is run and counted."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from qwen.model import DecoderLayer
    from qwen.rope import RotaryEmbedding

    with torch.device("meta"):
        layers = {kind: DecoderLayer(cfg, kind) for kind in set(cfg.layer_types)}
        head = torch.nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        x = torch.zeros(1, T, cfg.hidden_size)
        cos, sin = RotaryEmbedding(cfg)(torch.arange(T)[None], x.dtype)

    def count(run):
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            run()
        return counter.get_total_flops()

    n = {kind: cfg.layer_types.count(kind) for kind in layers}
    mixer = {kind: n[kind] * count(lambda layer=layer: layer.mix(x, cos, sin, None, None))
             for kind, layer in layers.items()}
    mlp = count(lambda: next(iter(layers.values())).mlp(x))
    return {"embedding + head": count(lambda: head(x)), "DeltaNet mixers": mixer.get("linear_attention", 0),
            "attention mixers": mixer.get("full_attention", 0), "MLPs": len(cfg.layer_types) * mlp, "norms": 0}


def _suffix(synthetic):
    return tr(" (synthetic weights)", "（合成权重）") if synthetic else ""


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
    n = len(layer_types)
    ax.set_title(tr(f"{n} decoder layers: L = Gated DeltaNet (linear attention), F = gated full attention",
                    f"{n} 个解码层：L = Gated DeltaNet（线性注意力），F = 门控全注意力"))
    return fig


def _depth_ticks(n_layers):
    """Positions 0..L of the stream: 0 is the embedding, i + 1 is the output of layer i (numbered from 0, as in the
    checkpoint's keys layers.0 … layers.{L−1}). At most about 13 ticks."""
    step = max(1, n_layers // 12)
    ticks = [0] + list(range(step, n_layers + 1, step))
    return ticks, [tr("embedding", "嵌入") if t == 0 else str(t - 1) for t in ticks]


def residual_figure(rms, layer_types, synthetic):
    """RMS of the residual stream after the embedding and after each layer, per position and its mean."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5), layout="constrained")
    depth = range(len(rms))
    ax.plot(depth, rms.mean(1), color="k", lw=2, label=tr("mean over positions", "各位置平均"))
    ax.plot(depth, rms, color="gray", lw=0.5, alpha=0.4)
    for i, kind in enumerate(layer_types):
        if kind == "full_attention":
            ax.axvline(i + 1, color="C3", alpha=0.2)
    ax.set_xticks(*_depth_ticks(len(layer_types)))
    ax.set(xlabel=tr("after layer (numbered from 0, as in the checkpoint); red lines: full-attention layers",
                     "第几层之后（与检查点一样从 0 编号）；红线：全注意力层"),
           ylabel=tr("RMS of x", "x 的 RMS"), yscale="log",
           title=tr(f"Size of the residual stream through the layers{_suffix(synthetic)}",
                    f"残差流的大小随层数的变化{_suffix(synthetic)}"))
    ax.legend()
    return fig


def lens_figure(ranks, labels, synthetic):
    """Logit lens: the rank of each position's actual next token when the final norm and head read the residual
    stream after the embedding (row 0) and after layer i (row i + 1). ranks: (layers + 1, T) ints; labels: the T
    next tokens as text."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(labels)), 4.5), layout="constrained")
    image = ax.imshow(np.log10(1 + np.asarray(ranks)), aspect="auto", cmap="viridis_r", origin="lower")
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
    ax.set_yticks(*_depth_ticks(len(ranks) - 1))
    ax.set(xlabel=tr("next token (the one the text continues with)", "下一个 token（文本中实际紧跟的那个）"),
           ylabel=tr("after layer", "第几层之后"),
           title=tr(f"Logit lens: rank of the actual next token at each depth{_suffix(synthetic)}",
                    f"logit lens：实际的下一个 token 在各深度的排名{_suffix(synthetic)}"))
    fig.colorbar(image, ax=ax, label=tr("log10(1 + rank); 0 = top-1", "log10(1 + 排名)；0 = top-1"))
    return fig


def share_figure(rows, synthetic):
    """Shares per component, one bar of stacked shares per row: rows = {label: {component: amount}}, e.g. the
    parameters, the measured forward time, the FLOPs at the real shapes. The components of the first row set the
    colours."""
    import matplotlib.pyplot as plt

    parts = list(next(iter(rows.values())))
    fig, ax = plt.subplots(figsize=(9, 1 + 0.9 * len(rows)), layout="constrained")
    for row, values in enumerate(rows.values()):
        total, left = sum(values.values()), 0.0
        for k, part in enumerate(parts):
            share = values.get(part, 0) / total
            ax.barh(row, share, left=left, color=f"C{k}", label=component_name(part) if row == 0 else None)
            if share > 0.06:
                ax.text(left + share / 2, row, f"{share:.0%}", ha="center", va="center", color="white", fontsize=8)
            left += share
    ax.set_yticks(range(len(rows)), list(rows))
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_title(tr(f"Where the parameters and the forward time go{_suffix(synthetic)}",
                    f"参数和前向时间花在哪里{_suffix(synthetic)}"))
    ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return fig
