"""Chapter 12's arithmetic and figures: what a decode step reads in each storage format and the tokens/s that bounds,
which class each tensor belongs to, the products one step of the live model makes and their timing, the text the
output is measured on; and the figures: bytes and bound per format, the error against bits per weight, the error per
tensor class, the output's KL and top-1 agreement, and the timed decode against its bound.

The byte counts are computed from a config alone (qwen/sizes.py's tensor list, qwen/family.py's caches), so they
hold for the real 0.8B whatever checkpoint is loaded. Each figure function takes what the chapter computed and
returns a matplotlib Figure; matplotlib is imported inside, so the chapter script starts without it.
"""
from collections import Counter
from functools import partial

import torch
import torch.nn as nn

from qwen import measure
from qwen.config import Config
from qwen.family import cache_bytes
from qwen.fast import Fast, FastLinear
from qwen.lang import tr
from qwen.products import pack_all
from qwen.quant import bits_per_weight
from qwen.quantlinear import QuantLinear
from qwen.sizes import REAL_FP32, numel, tensor_shapes

# The formats a weight can be stored in, and its bits per weight: n_in is the row's length (int8 keeps one bf16
# scale per row); the group-wise formats keep one 16-bit scale per 32 weights (int4+zero: and a 16-bit minimum).
# "int4" is the symmetric one, "int4+zero" the one the live model holds (load_fast(..., quant="int4")). "Q4_0" is
# the file llama-quantize writes for Q4_0: it keeps the output tensor (here the tied table) in Q6_K (llama.cpp's
# src/llama-quant.cpp), 210 bytes per 256 weights.
FORMATS = ("fp32", "bf16", "int8", "Q8_0", "int4", "int4+zero", "Q4_0")
Q6_K_BITS = 210 * 8 / 256  # 6.5625


def bits(fmt, n_in, head=False):
    """Bits per weight of a (out, n_in) projection stored in `fmt`, the scales included; head: the output tensor
    (the tied table), which a Q4_0 file keeps in Q6_K."""
    if fmt == "Q4_0" and head:
        return Q6_K_BITS
    return {"fp32": 32.0, "bf16": 16.0, "int8": bits_per_weight(8, n_in), "Q8_0": bits_per_weight(8, 32),
            "int4": bits_per_weight(4, 32), "int4+zero": bits_per_weight(4, 32, zero_bits=16),
            "Q4_0": bits_per_weight(4, 32)}[fmt]


def scheme_name(label):
    """A quantization scheme's label as the course prints it, in its language (the labels key the results)."""
    return {"int4+zero": tr("int4+zero", "int4 + 零点"), "Q4_0": tr("Q4_0 file", "Q4_0 文件")}.get(label, label)


CLASSES = ("embedding/head", "attention", "DeltaNet projections", "in_proj_a/b", "MLP")


def class_name(c):
    """A tensor class as the course prints it, in its language."""
    return {"embedding/head": tr("embedding/head", "嵌入/输出头"), "attention": tr("attention", "注意力"),
            "DeltaNet projections": tr("DeltaNet projections", "DeltaNet 投影"), "in_proj_a/b": "in_proj_a/b",
            "MLP": "MLP", "kept": tr("kept in bf16/fp32", "不量化（bf16/fp32）"),
            "KV cache": tr("KV cache", "键值缓存"), "DeltaNet state": tr("DeltaNet state", "DeltaNet 状态")}[c]


def tensor_class(name):
    """Which of CLASSES a text-model tensor (a name without the checkpoint's prefix) belongs to, or None for one
    that stays in the model's dtype: the norms, the conv kernel, A_log and dt_bias."""
    if name in ("embed_tokens.weight", "lm_head.weight"):
        return "embedding/head"
    if ".self_attn." in name and name.endswith("_proj.weight"):
        return "attention"
    if name.endswith(("in_proj_a.weight", "in_proj_b.weight")):
        return "in_proj_a/b"
    if ".linear_attn." in name and name.endswith(("in_proj_qkv.weight", "in_proj_z.weight", "out_proj.weight")):
        return "DeltaNet projections"
    if ".mlp." in name:
        return "MLP"
    return None


def step_bytes(cfg, fmt, tokens=1024, dtype_bytes=2):
    """{what: bytes} one decode step moves with every projection (the tied head included) stored in `fmt`: each
    class of weights, the tensors kept as they are (in `dtype_bytes`, the checkpoint's fp32 ones in fp32), the KV
    cache of `tokens` positions (`dtype_bytes` per number) and the DeltaNet states (qwen.family.cache_bytes: an fp32
    state and the conv's last inputs), which a step reads and writes back, so they count twice. The embedding
    lookup reads one row of the table; the head reads all of it, so a tied table counts once, as the head."""
    out = dict.fromkeys((*CLASSES, "kept"), 0.0)
    for name, shape in tensor_shapes(cfg).items():
        c = tensor_class(name)
        if c is None:
            out["kept"] += numel(shape) * (4 if name.endswith(REAL_FP32) else dtype_bytes)
        else:
            out[c] += numel(shape) * bits(fmt, shape[-1], head=c == "embedding/head") / 8
    kv, state = cache_bytes(cfg, tokens, dtype_bytes)
    out["KV cache"], out["DeltaNet state"] = kv, 2 * state
    return out


# ---------------------------------------------------------------- one decode step of the live model, timed

def step_products(cfg: Config) -> Counter:
    """{(out, in): how many} of the products one decode step of the live model makes: the projections of
    qwen/fast.py's model as it joins them (q|k|v, DeltaNet's in_proj_qkv|z|b|a, the MLP's gate|up) and the head,
    read from that model built on the meta device from `cfg` (no weight is made)."""
    with torch.device("meta"):
        model = Fast(cfg)
    return Counter((m.out_features, m.in_features) for m in model.modules() if isinstance(m, nn.Linear))


def live_product(w, scheme):
    """The module the live model multiplies a (out, in) weight with: a FastLinear, packed for oneDNN where this
    CPU packs the dtype (load_fast's bf16 path), or a QuantLinear holding int8 or int4 codes (quant="int8"/"int4")."""
    with torch.device("meta"):  # no random fill of a weight replaced at once (the head's alone took a second)
        linear = FastLinear(w.shape[1], w.shape[0])
    linear.weight = nn.Parameter(w, requires_grad=False)
    return pack_all(linear) if scheme is None else QuantLinear(linear, scheme)


@torch.no_grad()
def time_step(products, schemes, device, repeats=3):
    """{scheme: seconds} of one decode step's products (products: {(out, in): how many}), each shape timed once as
    the live model holds it (`live_product`, random bf16 weights: the time does not depend on the values), best of
    `repeats` one-row products, times how many of it a step makes. The rest of a step (norms, attention over the
    cache, the DeltaNet state) is not timed."""
    seconds = dict.fromkeys(schemes, 0.0)
    for (out, n_in), count in products.items():
        # filled (untouched pages would flatter): random rows, a block of them repeated (drawing the head's quarter
        # of a billion numbers took a second)
        block = torch.randn(min(out, 1024), n_in, device=device, dtype=torch.bfloat16)
        w = block.repeat(-(-out // len(block)), 1)[:out].contiguous()
        x = torch.randn(1, 1, n_in, device=device, dtype=torch.bfloat16)
        for scheme in schemes:
            seconds[scheme] += count * measure.best(partial(live_product(w, scheme), x), device, repeats)
    return seconds


def product_bytes(products, fmt):
    """Bytes the products read in `fmt` (section 1's byte model: codes and scales, bits(fmt, in) per weight)."""
    return sum(count * out * n_in * bits(fmt, n_in) / 8 for (out, n_in), count in products.items())


# The text the output is measured on: the opening of Lewis Carroll's "Alice's Adventures in Wonderland" (1865), in
# the public domain. Teacher-forced: the model reads it, and every position's next-token distribution is compared.
TEXT = (
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: once "
    "or twice she had peeped into the book her sister was reading, but it had no pictures or conversations in it, "
    "'and what is the use of a book,' thought Alice 'without pictures or conversations?'\n\n"
    "So she was considering in her own mind (as well as she could, for the hot day made her feel very sleepy and "
    "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of getting up and picking the "
    "daisies, when suddenly a White Rabbit with pink eyes ran close by her.\n\n"
    "There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to hear the "
    "Rabbit say to itself, 'Oh dear! Oh dear! I shall be late!' (when she thought it over afterwards, it occurred "
    "to her that she ought to have wondered at this, but at the time it all seemed quite natural); but when the "
    "Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then hurried on, Alice started "
    "to her feet, for it flashed across her mind that she had never before seen a rabbit with either a "
    "waistcoat-pocket, or a watch to take out of it, and burning with curiosity, she ran across the field after it, "
    "and fortunately was just in time to see it pop down a large rabbit-hole under the hedge.")


PARTS = (*CLASSES, "kept", "KV cache", "DeltaNet state")
PART_COLOURS = ("#8ecae6", "#ffafcc", "#90e0ef", "#023e8a", "#cdb4db", "#f4a261", "#e76f51", "#2a9d8f")


def bound_figure(rows, bandwidth, title=""):
    """Left: the bytes one decode step reads in each format, stacked by part (rows: {format: step_bytes(...)}).
    Right: the tokens/s that bandwidth (bytes read per second) allows, bandwidth ÷ the step's bytes."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained")
    names = list(rows)
    bottom = [0.0] * len(names)
    for part, colour in zip(PARTS, PART_COLOURS):
        mb = [rows[n][part] / 1e6 for n in names]
        ax.bar([scheme_name(n) for n in names], mb, bottom=bottom, color=colour, label=class_name(part))
        bottom = [b + m for b, m in zip(bottom, mb)]
    for i, total in enumerate(bottom):
        ax.text(i, total, f"{total:,.0f} MB", ha="center", va="bottom", fontsize=8)
    ax.set(ylabel=tr("MB read per decode step", "每个解码步读取的数据量（MB）"),
           title=tr("What one decode step reads", "一个解码步读了哪些数据"))
    ax.legend(fontsize=7, ncols=2)
    rates = [bandwidth / sum(rows[n].values()) for n in names]
    bx.bar([scheme_name(n) for n in names], rates, color="C0")
    for i, r in enumerate(rates):
        bx.text(i, r, f"{r:.1f}", ha="center", va="bottom", fontsize=8)
    bx.set(ylabel=tr("tokens/s, at most", "每秒 token 数上限（tokens/s）"),
           title=tr(f"The bound: {bandwidth / 1e9:.1f} GB/s ÷ the bytes of a step",
                    f"上限：{bandwidth / 1e9:.1f} GB/s ÷ 一步的字节数"))
    fig.suptitle(title or tr("Fewer bytes per weight, more tokens per second",
                             "每个权重的字节越少，每秒能出的 token 越多"), fontsize=10)
    return fig


def bits_figure(curves, points, title=""):
    """Relative error against bits per weight, the scales counted: one line per group-wise scheme (curves:
    {label: [(bits, error, g), ...]}, one point per group size, labelled with its g) and one marker per single format
    (points: {label: (bits, error)}), so that two schemes are compared at the same cost. Log scale for the error."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6), layout="constrained")
    for label, pts in curves.items():
        xs, ys = zip(*[(b, e) for b, e, _ in pts])
        ax.plot(xs, ys, marker="o", label=scheme_name(label))
        for b, e, g in pts:
            ax.annotate(f"g={g}", (b, e), textcoords="offset points", xytext=(4, 3), fontsize=7)
    for i, (label, (b, e)) in enumerate(points.items()):
        ax.plot([b], [e], marker="s", linestyle="none", color=f"C{i + len(curves)}", label=scheme_name(label))
    ax.set_yscale("log")
    ax.set(xlabel=tr("bits per weight, the scales (and minimums) included", "每个权重的比特数（含缩放因子和最小值）"),
           ylabel=tr("relative error ‖w − ŵ‖ / ‖w‖", "相对误差 ‖w − ŵ‖ / ‖w‖"))
    ax.legend(fontsize=8)
    ax.set_title(title or tr("Error against cost: each scheme at the bits it pays",
                             "误差与代价：按各方案实际付出的比特数比较"), fontsize=10)
    return fig


def class_figure(errors, title=""):
    """Relative error per tensor class (errors: {scheme: {class: error}}), grouped bars on a log scale."""
    import matplotlib.pyplot as plt

    schemes = list(errors)
    classes = [c for c in CLASSES if any(c in errors[s] for s in schemes)]
    fig, ax = plt.subplots(figsize=(9, 4.4), layout="constrained")
    width = 0.8 / len(schemes)
    for j, s in enumerate(schemes):
        xs = [i + (j - (len(schemes) - 1) / 2) * width for i in range(len(classes))]
        ax.bar(xs, [errors[s].get(c, 0) for c in classes], width, label=scheme_name(s))
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 3)  # room for the legend above the bars
    ax.set_xticks(range(len(classes)), [class_name(c) for c in classes], fontsize=8)
    ax.set(ylabel=tr("relative error ‖w − ŵ‖ / ‖w‖", "相对误差 ‖w − ŵ‖ / ‖w‖"))
    ax.legend(fontsize=8, ncols=len(schemes), loc="upper left")
    ax.set_title(title or tr("The weights' error per tensor class", "各类张量的权重误差"), fontsize=10)
    return fig


def output_figure(kl, top1, title=""):
    """Left: the mean KL divergence of the next-token distributions from the reference's, per scheme (kl:
    {scheme: mean KL}), log scale. Right: top-1 agreement with the reference (top1: {scheme: fraction})."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    names = list(kl)
    ax.bar([scheme_name(n) for n in names], [max(kl[n], 1e-12) for n in names], color="C1")
    for i, n in enumerate(names):
        ax.text(i, max(kl[n], 1e-12), f"{kl[n]:.1e}", ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set(ylabel=tr("mean KL(reference ‖ scheme), nats", "平均 KL(参考 ‖ 方案)，nat"),
           title=tr("How far the next-token distribution moves", "下一个 token 的分布偏了多少"))
    bx.bar([scheme_name(n) for n in top1], [100 * v for v in top1.values()], color="C2")
    for i, v in enumerate(top1.values()):
        bx.text(i, 100 * v, f"{v:.1%}", ha="center", va="bottom", fontsize=8)
    bx.set(ylim=(0, 108), ylabel=tr("top-1 agreement, %", "top-1 一致率，%"),
           title=tr("How often the most likely token stays the same", "最可能的 token 保持不变的比例"))
    fig.suptitle(title or tr("The error at the output, teacher-forced", "输出端的误差（teacher forcing）"), fontsize=10)
    return fig


def decode_figure(bound, measured, title=""):
    """Tokens/s of one decode step's products per format: the read bound (bandwidth ÷ the bytes they read) beside
    the measured rate, and the share of the bound each reaches (bound, measured: {format: tokens/s})."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.4), layout="constrained")
    names = list(bound)
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], [bound[n] for n in names], 0.4, color="C0",
           label=tr("the read bound", "读取上限"))
    ax.bar([x + 0.2 for x in xs], [measured[n] for n in names], 0.4, color="C1",
           label=tr("measured here", "本机实测"))
    for x, n in zip(xs, names):
        ax.text(x + 0.2, measured[n], f"{measured[n]:.1f}\n({measured[n] / bound[n]:.0%})", ha="center",
                va="bottom", fontsize=8)
        ax.text(x - 0.2, bound[n], f"{bound[n]:.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), [scheme_name(n) for n in names])
    ax.set_ylim(0, 1.2 * max(bound.values()))
    ax.set(ylabel=tr("tokens/s (the products of a step)", "每秒 token 数（只算一步的矩阵乘法）"))
    ax.legend(fontsize=8)
    ax.set_title(title or tr("One decode step, timed: how close each format gets to its bound",
                             "实测一个解码步：每种格式离各自的上限有多近"), fontsize=10)
    return fig
