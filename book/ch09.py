"""Chapter 9's figures: the sampling rules on a next-token distribution, prefill against decode time, and the cache's
size as a conversation grows; and what a cache holds, counted from its tensors. The timings and the bandwidth
probes behind the time figure are qwen/measure.py's (bench/ measures with the same functions).

Each figure function returns a matplotlib Figure. The distribution figure draws whatever logits it is given (on the
synthetic checkpoint they come from random weights, and the caller's title says so); the cache figure is computed
from a config alone (qwen/family.py). Every text is in the language the course speaks (qwen.lang).
"""
import torch

from qwen.family import cache_bytes
from qwen.lang import tr
from qwen.sampling import CARD, filter_logits


def sampling_rules(logits, tokens, top_k=CARD[True]["top_k"], top_p=CARD[True]["top_p"], coding_temperature=0.6,
                   title="", show=25, glyphs=None):
    """The next-token distribution before and after the rules, with the model card's settings: the thinking set
    (temperature 1.0, top-k 20, top-p 0.95; its min-p 0 cuts nothing) rule by rule, then the "precise coding" set
    (temperature 0.6, the same top-k and top-p). The presence penalty needs generated tokens, so a first step has
    nothing to penalise. logits: (V,) for one position; tokens: a callable id -> text. Bars, on a log scale: the
    `show` most likely tokens of the original distribution; a cut token is an empty outline at its original height.
    glyphs: book.ch02.Glyphs, which draws CJK text when a CJK font is installed (chapter 2's rule for the rest)."""
    import matplotlib.pyplot as plt

    from book.ch02 import Glyphs

    glyphs = glyphs or Glyphs()
    logits = logits.float()[None]
    original = filter_logits(logits)
    stages = [(tr("original (temperature 1.0)", "原始分布（温度 1.0）"), original),
              (f"+ top-k {top_k}", filter_logits(logits, 1.0, top_k)),
              (tr(f"+ top-p {top_p}: the card's thinking set", f"+ top-p {top_p}：模型卡的思考模式设置"),
               filter_logits(logits, 1.0, top_k, top_p, 0.0)),
              (tr(f"temperature {coding_temperature}, top-k {top_k}, top-p {top_p}:\nthe card's precise-coding set",
                  f"温度 {coding_temperature}，top-k {top_k}，top-p {top_p}：\n模型卡的精确编程设置"),
               filter_logits(logits, coding_temperature, top_k, top_p, 0.0))]
    order = logits[0].argsort(descending=True)[:show]
    before = original.softmax(-1)[0][order]
    fig, axes = plt.subplots(1, len(stages), figsize=(17, 4.6), sharey=True, layout="constrained")
    for ax, (name, x) in zip(axes, stages):
        p = x.softmax(-1)[0]
        kept = torch.isfinite(x[0])[order]
        ax.bar(range(show), torch.where(kept, p[order], before).tolist(), color=["C0" if k else "none" for k in kept],
               edgecolor="C0")
        ax.set_yscale("log")
        left, top = int(torch.isfinite(x[0]).sum()), float(p.max())
        ax.set_title(tr(f"{name}\n{left:,} tokens left, top one {top:.1%}",
                        f"{name}\n剩 {left:,} 个 token，最高概率 {top:.1%}"), fontsize=9)
        ax.set_xticks(range(show), [glyphs.shown(tokens(int(i)), 8) for i in order], rotation=90, fontsize=7,
                      fontfamily=glyphs.families)
    axes[0].set_ylabel(tr("probability (log scale); outline: cut", "概率（对数刻度）；空心柱：被截掉的 token"))
    fig.suptitle((title or tr("What each sampling rule does to the next-token distribution",
                              "每条采样规则怎样改变下一个 token 的分布")) + "\n" + glyphs.caption(),
                 fontsize=10)
    return fig


def held_bytes(cache, buffers=False):
    """Bytes a model's cache holds: each full-attention layer's keys and values written so far (with `buffers`, its
    whole preallocated buffers instead), each DeltaNet layer's conv window and state."""
    names = ("keys", "values", "conv", "state") if buffers else ("k", "v", "conv", "state")
    tensors = (getattr(layer, n, None) for layer in cache.layers for n in names)
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def prefill_vs_decode(measured, real=None, title=""):
    """Milliseconds per token, prefill against decode. measured: {bar label: seconds per token} for this
    checkpoint (prefill, decode, the bound); real: the same for the real 0.8B's shapes (estimates), drawn beside."""
    import matplotlib.pyplot as plt

    panels = [(tr("this checkpoint, measured", "这个检查点，实测"), measured)] + \
        ([(tr("real Qwen3.5-0.8B shapes, estimated", "按真实 Qwen3.5-0.8B 的形状估算"), real)] if real else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.2), layout="constrained", squeeze=False)
    for ax, (name, bars) in zip(axes[0], panels):
        ms = [v * 1e3 for v in bars.values()]
        ax.bar(list(bars), ms, color=["C0", "C1", "gray", "silver"][:len(ms)])
        for i, v in enumerate(ms):
            ax.text(i, v, f"{v:.3g} ms", ha="center", va="bottom")
        ax.set(ylabel=tr("milliseconds per token", "每个 token 的毫秒数"), title=name)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(title or tr("Prefill shares each weight read among many tokens",
                             "预填充让许多 token 分摊每一次权重读取"))
    return fig


def cache_growth(configs, max_tokens=32768, dtype_bytes=2):
    """The cache of one conversation against its length, for each (name, cfg): KV of the full-attention layers
    (growing) and the DeltaNet state (flat), in MiB."""
    import matplotlib.pyplot as plt

    lengths = torch.linspace(0, max_tokens, 65).long().tolist()
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    for (name, cfg), colour in zip(configs, ("C0", "C1", "C2")):
        kv = [cache_bytes(cfg, n, dtype_bytes)[0] / 2 ** 20 for n in lengths]
        flat = cache_bytes(cfg, 0, dtype_bytes)[1] / 2 ** 20
        ax.plot(lengths, kv, color=colour, label=tr(f"{name}: KV cache (full attention layers)",
                                                    f"{name}：键值缓存（全注意力层）"))
        ax.plot(lengths, [flat] * len(lengths), color=colour, ls="--",
                label=tr(f"{name}: DeltaNet state (fixed)", f"{name}：DeltaNet 状态（固定）"))
    ax.set(xlabel=tr("tokens in the conversation", "对话中的 token 数"),
           ylabel=tr("MiB (batch 1, bf16 KV)", "MiB（批次大小 1，bf16 键值缓存）"),
           title=tr("The cache as a conversation grows: only the full-attention layers grow",
                    "对话越长，缓存越大：只有全注意力层的缓存在增长"))
    ax.legend(fontsize=8)
    return fig
