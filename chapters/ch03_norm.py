"""Chapter 3: RMSNorm with a zero-centred weight, the gated RMSNorm, and l2norm.

第 3 章：零中心权重的 RMSNorm、门控 RMSNorm 和 l2norm。

Run: python chapters/ch03_norm.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch03_norm.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 3 · RMSNorm: zero-centred normalisation
#
# Every layer starts by normalising its input: divide the vector by its root mean square, then scale each dimension
# by a learned factor. This chapter writes the three normalisations the model uses — RMSNorm, the gated RMSNorm of
# linear attention, and l2norm — and checks them against the weights of every norm in the checkpoint.
#
# **Notation.** In this chapter $w$ is always the tensor the checkpoint stores under a norm's `weight`. RMSNorm
# applies the scale $1 + w$ (so $w = 0$ means "scale 1"); the gated norm applies $w$ itself. Both scale the normalised
# vector:
#
# $$
# \hat{x} = \frac{x}{\sqrt{\operatorname{mean}(x^2) + \epsilon}}
# $$
#
# ```
# qwen/
# ├── weights.py, hub.py, ...   (chapter 1)
# ├── tokenizer.py, bpe.py, embedding.py   (chapter 2)
# └── norm.py         + RMSNorm, GatedRMSNorm, l2norm
# chapters/
# └── ch03_norm.py    + this chapter's script
# notebooks/
# └── ch03_norm.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch03_norm.py` (add `--figures` to save the figures,
# `--proof` to compare with transformers). Both use the real Qwen3.5-0.8B when they find it and the synthetic
# checkpoint otherwise: the real layout with random weights. A run on it says so once, at its start, and again only
# where random weights change what a number means; beside a value, marked "real Qwen3.5-0.8B", is the one the real
# weights give (printed by the source tutorial's chapter 3).

# %% [markdown] lang="zh"
# # 第 3 章 · RMSNorm：权重以零为中心的归一化
#
# 每一层开头都要先把输入归一化：向量除以自己的均方根，再逐维乘上一个可学习的比例。本章写出模型用到的三种归一化，即
# RMSNorm、线性注意力里的门控 RMSNorm 和 l2norm，并用检查点里每一个归一化的权重来检验它们。
#
# **记号。** 本章的 $w$ 一律指检查点里某个归一化的 `weight` 张量。RMSNorm 乘的比例是 $1 + w$（所以 $w = 0$ 表示“比例为
# 1”）；门控归一化直接乘 $w$。两者缩放的都是归一化之后的向量：
#
# $$
# \hat{x} = \frac{x}{\sqrt{\operatorname{mean}(x^2) + \epsilon}}
# $$
#
# ```
# qwen/
# ├── weights.py, hub.py, ...   （第 1 章）
# ├── tokenizer.py, bpe.py, embedding.py   （第 2 章）
# └── norm.py         + RMSNorm、GatedRMSNorm、l2norm
# chapters/
# └── ch03_norm.py    + 本章的脚本
# notebooks/
# └── ch03_norm.ipynb + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch03_norm.py`（加 `--figures` 保存图，加 `--proof` 与 transformers 对照）。
# 两种方式都是找到真实的 Qwen3.5-0.8B 就用它，找不到就用合成检查点：布局是真实的，权重是随机的。在合成检查点上运行时，
# 开头会提示一次，之后只在随机权重改变了某个数的含义时才再说明。旁边标着“真实 Qwen3.5-0.8B”的，是真实权重给出的值（取
# 自原教程第 3 章的打印结果）。

# %%
import torch
import torch.nn.functional as F

import book
from book import ch03
from book.ch03 import REAL, real_label
from qwen.course import chapter_args
from qwen.lang import tr
from qwen.norm import (
    GatedRMSNorm,
    RMSNorm,
    l2norm as qwen_l2norm,  # the name l2norm is left for your attempt in section 2
    rms_normalize,
)
from qwen.weights import Weights, fill

args = chapter_args(__doc__)
cfg = args.checkpoint.config
W = Weights(args.checkpoint)
dev, d, eps = args.device, cfg.hidden_size, cfg.rms_norm_eps
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
SYNTHETIC = tr(" (synthetic weights)", "（合成权重）") if args.checkpoint.synthetic else ""  # figures only
REAL_LABEL = real_label()  # "real Qwen3.5-0.8B", in the language of the run
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here


def rms(t):
    """The root mean square of the first three vectors, as short strings."""
    return [f"{v:.2f}" for v in t.float().pow(2).mean(-1).sqrt().flatten()[:3].tolist()]


# %%
book.show("ch03-map", book.model_map.draw, "norm")

# %% [markdown]
# ## 1. What it does
# With $w = 0$ (a scale of exactly 1) a vector comes out with a root mean square of 1 — as long as
# $\operatorname{mean}(x^2)$ is much larger than $\epsilon$. The $\epsilon$ inside the root matters for tiny vectors: at
# RMS $10^{-3}$, $\operatorname{mean}(x^2) = 10^{-6} = \epsilon$, and the output RMS is $\sqrt{1/2} \approx 0.707$. The
# trained weights then move the scale. On the synthetic checkpoint the weights are random draws around their initial
# values (`qwen/synthetic.py`); only the real values printed beside them are findings.

# %% [markdown] lang="zh"
# ## 1. 它做什么
# $w = 0$（比例恰好为 1）时，输出向量的均方根是 1，前提是 $\operatorname{mean}(x^2)$ 远大于 $\epsilon$。向量很小时，根
# 号里的 $\epsilon$ 就起作用了：RMS 为 $10^{-3}$ 时，$\operatorname{mean}(x^2) = 10^{-6} = \epsilon$，输出的 RMS 只有
# $\sqrt{1/2} \approx 0.707$。训练出来的权重会再调整这个比例。合成检查点的权重只是在初始值附近随机抽取的
# （`qwen/synthetic.py`），只有旁边打印的真实值才说明问题。

# %%
x = torch.randn(2, 3, d, device=dev) * 5
unit = RMSNorm(d, eps).to(dev)
before, after = rms(x), rms(unit(x))
print(tr(f"RMS before: {before}  after RMSNorm with w = 0: {after}",
         f"均方根：归一化前 {before}；经过 w = 0 的 RMSNorm 之后 {after}"))
for size in (1e-2, 1e-3, 1e-4):
    tiny = torch.full((1, d), size, device=dev)
    out = unit(tiny).pow(2).mean().sqrt()
    print(tr(f"  a vector of RMS {size:g} (mean(x²) = {size ** 2:g}, ε = {eps:g}) comes out with RMS {out:.3f}",
             f"  RMS 为 {size:g} 的向量（mean(x²) = {size ** 2:g}，ε = {eps:g}）输出的 RMS 为 {out:.3f}"))
norm0 = fill(RMSNorm(d, eps), W, "layers.0.input_layernorm.").to(dev)
final = fill(RMSNorm(d, eps), W, "norm.").to(dev)
a, b = rms(norm0(x)), rms(final(x))
print(tr(f"after layer 0's input norm: {a}, after the final norm: {b}",
         f"经过第 0 层的输入归一化：{a}；经过最终归一化：{b}"))
print(tr(f"  {REAL_LABEL}: {REAL['layer0_rms']} and {REAL['final_rms']}",
         f"  {REAL_LABEL}：{REAL['layer0_rms']} 和 {REAL['final_rms']}"))
for name, key in (("layers.0.input_layernorm.weight", "layer0_w"), ("norm.weight", "final_w")):
    w = W[name].float()
    r = REAL[key]
    mean, lo, hi = w.mean(), w.min(), w.max()
    print(tr(f"{name:32s} w: mean {mean:+.3f}, range [{lo:+.2f}, {hi:+.2f}]; "
             f"{REAL_LABEL}: mean {r['mean']:+.3f}, range [{r['min']:+.2f}, {r['max']:+.2f}]",
             f"{name:32s} w：均值 {mean:+.3f}，范围 [{lo:+.2f}, {hi:+.2f}]；"
             f"{REAL_LABEL}：均值 {r['mean']:+.3f}，范围 [{r['min']:+.2f}, {r['max']:+.2f}]"))

# %% [markdown]
# The same with 2,000 vectors whose sizes spread over four decades, both panels on one scale. Before: anything from
# 0.01 to 100. After: one narrow spike per norm — at 1 with $w = 0$, and wherever the trained weight puts it. The
# width of a spike comes from the per-dimension scale: a vector that puts its energy where $1 + w$ is large comes out
# a little larger. The dashed lines are the real model's.

# %% [markdown] lang="zh"
# 换成 2,000 个向量再看一遍，它们的大小横跨四个数量级，两幅子图共用一个横轴刻度。归一化之前，从 0.01 到 100 都有；归一
# 化之后，每个归一化只剩一个窄峰：$w = 0$ 时峰在 1，训练过的权重把它放在哪里，峰就在哪里。峰有一定宽度，是因为比例是逐
# 维的：一个向量的能量如果集中在 $1 + w$ 较大的那些维上，输出就会稍大一些。虚线是真实模型的值。

# %%
gen = torch.Generator().manual_seed(1)  # the figures' own random numbers
sizes = 10 ** (4 * torch.rand(2000, 1, generator=gen) - 2)  # from 0.01 to 100
vecs = (torch.randn(2000, d, generator=gen) * sizes).to(dev)
book.show("ch03-rms", ch03.rms_before_after, vecs,
          {"RMSNorm, w = 0": unit,
           tr("layer 0 input_layernorm", "第 0 层 input_layernorm"): norm0, tr("final norm", "最终归一化"): final},
          SYNTHETIC)

# %% [markdown]
# ### Where the trained weights put the scale
# Every norm of the model as its effective scale: one box per norm, the spread of its per-dimension scales; the
# dashed line is a scale of 1. In the real model layer 0's input norm scales by about 1.24 on average and the
# final norm by about 4.3 (the black diamonds: the real means and ranges). On the synthetic checkpoint each box is
# a random draw around the weight's initial value (0 for $w$, so a scale of 1; 1 for the gated norm): the boxes show
# random spread, nothing learned.
#
# Why would the final norm scale by 4.3? Its output goes straight into the head: $\mathrm{logits} = h \cdot E^\top$
# (chapter 2). The gain sets the size of $h$ and so the size of the logits — how peaked the softmax over the next token
# is. Nothing in the product asks $h$ to be as long as the rows of $E$.

# %% [markdown] lang="zh"
# ### 训练出的权重把比例放在哪里
# 把模型里的每一个归一化都画成它的有效比例：每个归一化一个箱体，表示它各维比例的分布；虚线是比例 1。真实模型里，第 0
# 层的输入归一化平均放大约 1.24 倍，最终归一化约 4.3 倍（黑色菱形是真实的均值和范围）。在合成检查点上，每个箱体都只是
# 在该权重初始值附近随机抽样的结果（$w$ 的初始值是 0，即比例 1；门控归一化的初始值是 1）：箱体只反映随机抽样的离散程度
# ，不代表学到了什么。
#
# 最终归一化为什么要放大 4.3 倍？它的输出直接进入输出头：$\mathrm{logits} = h \cdot E^\top$（第 2 章）。这个增益决定了
# $h$ 的大小，也就决定了 logits 的大小，即下一个 token 的 softmax 分布有多尖。这个乘积并不要求 $h$ 与 $E$ 各行的长度相
# 同。

# %%
book.show("ch03-scales", ch03.scales, W, cfg.layer_types, SYNTHETIC)

# %% [markdown]
# ## 2. Write it yourself, then read ours
# **Try it first**: exercise 204 asks for the three functions of this chapter — `rms_norm`, `gated_rms_norm`, `l2norm` —
# and tests them on real shapes, in fp32, bf16 and fp16, with inputs so small that $\epsilon$ matters. Start it with
# `python practice/judge.py start 204`, or write them in the next cell and run it: the judge grades them here.

# %% [markdown] lang="zh"
# ## 2. 先自己写，再看我们的
# **先自己试试**：练习 204 要求写出本章的三个函数 `rms_norm`、`gated_rms_norm` 和 `l2norm`。评测器用真实的形状，分别在
# fp32、bf16、fp16 下检查，其中一些输入小到 $\epsilon$ 都会起作用。运行 `python practice/judge.py start 204` 开始，或
# 者在下一个单元格里写好并运行，评测器当场判分。

# %%
def rms_norm(x, weight, eps=1e-6):
    raise NotImplementedError  # x̂ · (1 + weight), statistics in fp32, result in x's dtype


def gated_rms_norm(x, gate, weight, eps=1e-6):
    raise NotImplementedError  # x̂ · weight · silu(gate)


def l2norm(x, eps=1e-6):
    raise NotImplementedError  # x / sqrt(sum(x²) + eps)


book.attempt(204, rms_norm, gated_rms_norm, l2norm)

# %% [markdown]
# ## The code: `qwen/norm.py`

# %% [markdown] lang="zh"
# ## 代码：`qwen/norm.py`

# %%
book.listing("qwen/norm.py")

# %% [markdown]
# Three operations share one helper, `rms_normalize`: $\hat{x} = x / \sqrt{\operatorname{mean}(x^2) + \epsilon}$ over
# the last dimension.
#
# | | normalises $x$ to | then multiplies by, per dimension | where the model uses it |
# |---|---|---|---|
# |`RMSNorm`|$\hat{x}$|$1 + w$|before every mixer and MLP, after the last layer, on q and k per head|
# |`GatedRMSNorm`|$\hat{x}$|$w \cdot \operatorname{silu}(z)$|the output of each linear-attention head (chapter 7)|
# |`l2norm`|$x / \sqrt{\sum x^2 + \epsilon}$|nothing|q and k of linear attention (chapter 7)|
#
# In `GatedRMSNorm`, $z$ is a gate computed from the layer input.
#
# - **No mean, no bias.** LayerNorm subtracts the mean and adds a bias; RMSNorm only fixes the scale. It is cheaper
#   and trains as well, which is why Llama, Qwen and Gemma all use it.
# - **fp32 inside.** Squares of bf16 numbers lose digits (and in fp16, squares of large values overflow), so the
#   statistics are taken in fp32 and only the result is cast back to the input dtype — one rounding at the end for
#   `RMSNorm` (the cell below measures what a sum kept in bf16 would do). `GatedRMSNorm` rounds where transformers does:
#   $\hat{x}$ to the input dtype, $w \cdot \hat{x}$ in it, then the fp32 gate and a last rounding (the proof at the end
#   of the chapter shows what one rounding would change).
# - **Two conventions for the weight.** `RMSNorm` starts at `zeros` and applies `1 + w`; `GatedRMSNorm` starts at
#   `ones` and applies `w`. Both start as "scale 1"; loading a checkpoint into the wrong one is off by exactly 1
#   everywhere, so the class must match the tensor.
#
# How much does bf16 lose in $\operatorname{mean}(x^2)$? Less than one might fear when PyTorch computes it: its bf16
# `mean` adds the bf16 squares in fp32 and rounds once, so the error stays about one bf16 rounding ($\le 2^{-8}$
# relative) at every $d$. A sum *kept* in bf16, one addition at a time as a naive kernel would, is another matter: once
# the sum is large, each new square is smaller than half a step of the sum's grid and is rounded away.

# %% [markdown] lang="zh"
# 三种操作共用一个辅助函数 `rms_normalize`：在最后一维上算
# $\hat{x} = x / \sqrt{\operatorname{mean}(x^2) + \epsilon}$。
#
# | | 把 $x$ 归一化为 | 再逐维乘以 | 模型在哪里用它 |
# |---|---|---|---|
# |`RMSNorm`|$\hat{x}$|$1 + w$|每个混合器和 MLP 之前、最后一层之后、按头作用于 q 和 k|
# |`GatedRMSNorm`|$\hat{x}$|$w \cdot \operatorname{silu}(z)$|每个线性注意力头的输出（第 7 章）|
# |`l2norm`|$x / \sqrt{\sum x^2 + \epsilon}$|不乘|线性注意力的 q 和 k（第 7 章）|
#
# `GatedRMSNorm` 里的 $z$ 是由该层输入算出的门。
#
# - **不减均值，没有偏置。** LayerNorm 要减去均值、加上偏置；RMSNorm 只管缩放。它计算更省，训练效果一样好，所以
#   Llama、Qwen 和 Gemma 都用它。
# - **内部用 fp32。** bf16 数的平方会丢掉有效数字（fp16 下大数的平方还会溢出），所以统计量在 fp32 里算，只把结果转回输
#   入的 dtype：`RMSNorm` 只在最后舍入一次（下面的单元格会测一下，求和一直用 bf16 会差多少）。`GatedRMSNorm` 的舍入位
#   置与 transformers 完全相同：先把 $\hat{x}$ 转成输入的 dtype，在这个 dtype 里算 $w \cdot \hat{x}$，再乘 fp32 的门，
#   最后舍入一次（本章末尾的对照验证会展示只舍入一次有什么不同）。
# - **权重的两种约定。** `RMSNorm` 的权重初始化为 `zeros`，乘的是 `1 + w`；`GatedRMSNorm` 初始化为 `ones`，乘的是
#   `w`。两者起点都是“比例 1”。把检查点加载进错误的类，比例会处处恰好差 1，所以类必须和张量对得上。
#
# bf16 算 $\operatorname{mean}(x^2)$ 会损失多少精度？交给 PyTorch 算的话，比想象的少：它的 bf16 `mean` 在 fp32 里累加
# bf16 的平方，最后只舍入一次，所以不管 $d$ 多大，误差都在一次 bf16 舍入左右（相对误差 $\le 2^{-8}$）。但如果像朴素
# kernel 那样逐项累加、累加值*始终*保持 bf16，情况就不同了：累加值一旦变大，新加的平方项还不到它所在位置 bf16 步长的一
# 半，会被直接舍掉。

# %%
gen = torch.Generator().manual_seed(4)
for n in (256, 1024, 4096):
    v = (torch.randn(n, generator=gen, dtype=torch.float64) * 3).bfloat16()  # bf16 inputs
    exact = v.double().pow(2).mean()  # their mean square, in fp64
    running = torch.zeros((), dtype=torch.bfloat16)
    for square in v.pow(2):  # a running sum in bf16: every addition rounds to bf16
        running += square
    off_mean, off_sum = v.pow(2).mean().double() / exact - 1, running.double() / n / exact - 1
    print(tr(f"d = {n:5,}: torch's bf16 mean of x² off by {off_mean:+.1e}; a bf16 running sum off by {off_sum:+.0%}",
             f"d = {n:5,}：torch 用 bf16 求 x² 的均值，偏差 {off_mean:+.1e}；用 bf16 逐项累加，偏差 {off_sum:+.0%}"))
# %% [markdown]
# ## 3. Why store the offset $w$, not the scale $1 + w$
# Two reasons are usually given.
#
# - **bf16 is coarse near 1 and fine near 0.** bf16 keeps 8 significant bits: near 1 the gap between neighbours is
#   $2^{-7} \approx 0.0078$, near 0 it is far smaller. A weight that is *stored and updated in bf16* loses an update of
#   0.001 when it is 1.0, and keeps it when it is 0. (Mixed-precision training usually updates an fp32 master copy,
#   where $1 + 0.001$ is fine; the offset still comes out closer when that copy is rounded to bf16 for the checkpoint.)
#   How much closer depends on $w$. Near 0 it is a large factor; the synthetic weights sit there by construction (drawn
#   around 0), so their lines below show the best case. Trained weights move away: the real final norm's $w$ is about
#   3.3, layer 0's up to 1.0. For $\lvert w \rvert$ between 1 and 5, $w$ and $1 + w$ are at most one binade apart, so
#   storing $w$ halves the rounding error (2×) — or changes nothing, where both fall in the same binade.
# - **Weight decay pulls towards 0.** Where decay is applied to norm weights, it pulls $w$ towards 0 — a scale of 1,
#   "leave the vector alone" — rather than pulling the scale itself towards 0.

# %% [markdown] lang="zh"
# ## 3. 为什么存偏移量 $w$，而不是比例 $1 + w$
# 通常有两个理由。
#
# - **bf16 在 1 附近粗，在 0 附近细。** bf16 的有效位只有 8 个：1 附近相邻两个数相差 $2^{-7} \approx 0.0078$，0 附近则
#   小得多。一个*以 bf16 存储、以 bf16 更新*的权重，值为 1.0 时会丢掉 0.001 的更新，值为 0 时却能留住。（混合精度训练
#   通常更新的是 fp32 主副本，在那里 $1 + 0.001$ 没有问题；但这份副本舍入成 bf16 写进检查点时，存偏移量仍然更准。）好
#   多少取决于 $w$：$w$ 在 0 附近时，精度能高出很多倍。合成权重按构造就在 0 附近（围绕 0 抽取），所以下面用它们算出的
#   是最好的情况。训练后的权重会离开 0：真实最终归一化的 $w$ 约为 3.3，第 0 层的最大到 1.0。$\lvert w \rvert$ 在 1 到
#   5 之间时，$w$ 和 $1 + w$ 至多差一个二进制量级（binade），所以存 $w$ 能让舍入误差减半（2×）；两者落在同一个二进制量
#   级时，则毫无差别。
# - **权重衰减把值拉向 0。** 在对归一化权重做权重衰减的地方，衰减会把 $w$ 拉向 0，也就是比例 1，即“不改变这个向量”，而
#   不是把比例本身拉向 0。

# %%
big, small = torch.tensor(1.001).bfloat16().item(), torch.tensor(0.001).bfloat16().item()
print(tr(f"bf16(1 + 0.001) = {big:.4f} (the update is lost); bf16(0.001) = {small:.6f} (kept)",
         f"bf16(1 + 0.001) = {big:.4f}（更新被吞掉了）；bf16(0.001) = {small:.6f}（留住了）"))
g = torch.Generator().manual_seed(2)
w0 = W["layers.0.input_layernorm.weight"].float()
updates = 1e-3 * torch.randn(d, generator=g)
for label, w32 in ((tr("layer 0's w plus fp32 updates of size 1e-3", "第 0 层的 w 加上大小为 1e-3 的 fp32 更新"),
                    w0 + updates),
                   (tr("a young norm: w of size 1e-3 in fp32", "刚开始训练的归一化（fp32 里大小为 1e-3 的 w）"),
                    1e-3 * torch.randn(d, generator=g))):
    as_offset = (w32.bfloat16().float() + 1 - (1 + w32)).abs().max()
    as_scale = ((1 + w32).bfloat16().float() - (1 + w32)).abs().max()
    print(tr(f"{label}: rounded to bf16, the scale moves by up to {as_offset:.1e} when w is stored, "
             f"{as_scale:.1e} when 1 + w is stored",
             f"{label}：舍入成 bf16 后，存 w 时比例最多变动 {as_offset:.1e}，存 1 + w 时最多变动 {as_scale:.1e}"))


def bf16_step(value):
    """The gap from bf16(value) to the next bf16 number up."""
    v = torch.tensor(value).bfloat16()
    return (torch.nextafter(v, torch.tensor(float("inf")).bfloat16()) - v).item()


for label, w in ((tr(f"{REAL_LABEL}, layer 0's mean w", f"{REAL_LABEL}，第 0 层 w 的均值"), REAL["layer0_w"]["mean"]),
                 (tr(f"{REAL_LABEL}, layer 0's largest w", f"{REAL_LABEL}，第 0 层最大的 w"), REAL["layer0_w"]["max"]),
                 (tr(f"{REAL_LABEL}, final norm's mean w", f"{REAL_LABEL}，最终归一化 w 的均值"),
                  REAL["final_w"]["mean"]),
                 (tr(f"{REAL_LABEL}, final norm's largest w", f"{REAL_LABEL}，最终归一化最大的 w"),
                  REAL["final_w"]["max"])):
    at_w, at_1w = bf16_step(w), bf16_step(1 + w)
    ratio = at_1w / at_w
    print(tr(f"{label} ({w:.3f}): bf16 step {at_w:.2g} at w, {at_1w:.2g} at 1 + w: ",
             f"{label}（{w:.3f}）：w 处的 bf16 步长 {at_w:.2g}，1 + w 处 {at_1w:.2g}：")
          + (tr(f"storing w rounds {ratio:g}x finer", f"存 w 时舍入步长小 {ratio:g} 倍") if ratio > 1
             else tr("the same step: storing w gains nothing", "步长相同，存 w 没有好处")))
y, stats = unit(x.bfloat16()), rms_normalize(x.bfloat16(), eps)
print(tr(f"input bfloat16 -> output {y.dtype}; the statistics were computed in {stats.dtype}",
         f"输入 bfloat16 -> 输出 {y.dtype}；统计量是在 {stats.dtype} 里算的"))

# %% [markdown]
# The grid itself. Adding 1 to the bit pattern of a number gives its next neighbour, so the gap between
# representable numbers can be read off the bits. It doubles with every power of two: a floating-point format is
# dense near 0 and sparse far from it, with the same *relative* precision everywhere. bf16 has the range of fp32
# (8 exponent bits) and only 7 bits of fraction; fp16 trades range for 3 more bits.

# %% [markdown] lang="zh"
# 再看网格本身。给一个数的位模式加 1，就得到比它大的下一个可表示数，所以相邻两数的间距可以直接从位上读出来。每过一个 2
# 的幂，间距就翻一倍：浮点格式在 0 附近密、离 0 越远越稀，但各处的*相对*精度相同。bf16 的范围和 fp32 一样（指数位都是
# 8 个），尾数位却只有 7 个；fp16 则拿范围换来了多 3 个尾数位。

# %%
book.show("ch03-bf16", ch03.bf16_grid)

# %% [markdown]
# ## 4. Conventions: the same operation, written three ways
# Llama and Qwen3 store the scale itself (a plain weight $p$, initialised to 1); Gemma 3 and Qwen3.5 store the offset
# (applied as $1 + w$, initialised to 0); some norms have no scale. They are one function: $p = 1 + w$. PyTorch's own
# `F.rms_norm` takes a plain weight, so it is an independent check of our RMSNorm with the converted weight.
#
# **Try it**: exercise 205 converts every norm weight of a whole state dict between the two conventions, and must
# leave the gated norm alone. Start it with `python practice/judge.py start 205`, or write the two functions in
# the next cell and run it.

# %% [markdown] lang="zh"
# ## 4. 约定：同一个运算，三种写法
# Llama 和 Qwen3 直接存比例（普通权重 $p$，初始化为 1）；Gemma 3 和 Qwen3.5 存偏移量（用时乘 $1 + w$，初始化为 0）；还
# 有的归一化干脆没有比例。它们其实是同一个函数：$p = 1 + w$。PyTorch 自带的 `F.rms_norm` 接受普通权重，所以拿转换后的
# 权重调用它，就能独立检验我们的 RMSNorm。
#
# **动手试试**：练习 205 要把整个 state dict 里的每个归一化权重在两种约定之间互相转换，而且不能动门控归一化。运行
# `python practice/judge.py start 205` 开始，或者在下一个单元格里写好这两个函数并运行。

# %%
def centred_to_plain(state):
    raise NotImplementedError  # a new dict: 1 + w (in fp32) for every zero-centred norm weight, the rest unchanged


def plain_to_centred(state):
    raise NotImplementedError  # the way back: p - 1


book.attempt(205, centred_to_plain, plain_to_centred)

# %%
theirs = F.rms_norm(x.float(), (d,), weight=(1 + w0).to(dev), eps=eps)
diff = (theirs - norm0(x)).abs().max()
print(tr(f"F.rms_norm with p = 1 + w vs our RMSNorm with w: max |diff| = {diff:.1e} "
         "(PyTorch's implementation against ours)",
         f"F.rms_norm 用 p = 1 + w，本课的 RMSNorm 用 w：最大 |差| = {diff:.1e}（PyTorch 的实现对照本课的实现）"))

# %% [markdown]
# ## 5. The gated RMSNorm and l2norm (used by linear attention, chapter 7)
# The DeltaNet output is normalised per head and multiplied by $\operatorname{silu}(z)$, where $z$ is a gate computed
# from the layer input: a closed gate ($z$ very negative) silences the head, an open one lets it through amplified. Its
# weight is plain (initialised to 1). l2norm scales a vector to length 1 (sum of squares, not mean).

# %% [markdown] lang="zh"
# ## 5. 门控 RMSNorm 和 l2norm（线性注意力用，第 7 章）
# DeltaNet 的输出按头归一化，再乘以 $\operatorname{silu}(z)$，其中 $z$ 是由该层输入算出的门：门关上（$z$ 取很大的负值
# ）时，这个头基本不输出；门打开时，它的输出放大后通过。它的权重是普通权重（初始化为 1）。l2norm 把向量缩放到长度 1（
# 用平方和，而不是均值）。

# %%
gated = fill(GatedRMSNorm(cfg.linear_value_head_dim, eps), W, "layers.0.linear_attn.norm.").to(dev)
h = torch.randn(4, cfg.linear_value_head_dim, device=dev)
for z in (-6.0, 0.0, 6.0):
    out = gated(h, torch.full_like(h, z))
    size, real, s = out.pow(2).mean(-1).sqrt().mean(), REAL["gate_rms"][z], F.silu(torch.tensor(z))
    print(tr(f"  gate {z:+.0f}: output RMS {size:.3f}, {REAL_LABEL} {real:.3f};  silu({z:+.0f}) = {s:+.3f}",
             f"  门 = {z:+.0f}：输出的均方根 {size:.3f}，{REAL_LABEL} 为 {real:.3f}；"
             f"silu({z:+.0f}) = {s:+.3f}"))
lengths = [f"{v:.3f}" for v in qwen_l2norm(x).norm(dim=-1).flatten()[:3].tolist()]
print(tr(f"lengths after l2norm: {lengths}", f"经过 l2norm 之后，向量的长度：{lengths}"))

# %% [markdown]
# Sweeping the gate. $\operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)$ (left) is negative for every $z < 0$,
# with its minimum $-0.278$ at $z \approx -1.278$, and tends to 0 as $z \to -\infty$. So a half-closed gate lets a
# little of the head through *with its sign flipped*: the middle panel plots every output element against its ungated
# value $w \cdot \hat{x}$ for five gate values — each a line of slope $\operatorname{silu}(z)$, falling for $z < 0$ —
# and a shut gate ($z$ below about $-6$) lets almost nothing through. The RMS (right) only shows the size,
# $\lvert \operatorname{silu}(z) \rvert$ times the head's size; the diamonds are the real model's layer 0 on its own
# heads.

# %% [markdown] lang="zh"
# 把门的取值扫一遍。$\operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)$（左图）在 $z < 0$ 时处处为负，在
# $z \approx -1.278$ 处取到最小值 $-0.278$，$z \to -\infty$ 时趋于 0。所以半开半关的门会让这个头漏过来一点，而且*符号
# 是反的*。中图取五个门值，以门控前的值 $w \cdot \hat{x}$ 为横轴、输出元素为纵轴作图：每个门值对应一条斜率为
# $\operatorname{silu}(z)$ 的直线，$z < 0$ 时向下倾斜；而关死的门（$z$ 低于约 $-6$）几乎不让任何信号通过。右图的 RMS
# 只反映大小，即 $\lvert \operatorname{silu}(z) \rvert$ 乘以这个头的大小；菱形是真实模型第 0 层在它自己那几个头输出上
# 测得的值。

# %%
book.show("ch03-gate", ch03.gate, gated, h)  # silu's shape, whatever the weights

# %% [markdown]
# ## 6. How many norms the model has
# Counted from the config: two RMSNorms per layer plus the final one, a `q_norm` and a `k_norm` in each full-attention
# layer (applied per head), and one gated norm in each linear-attention layer.

# %% [markdown] lang="zh"
# ## 6. 模型里有多少个归一化
# 按 config 数：每层两个 RMSNorm，再加一个最终归一化；每个全注意力层有一个 `q_norm` 和一个 `k_norm`（按头作用）；每个
# 线性注意力层有一个门控归一化。

# %%
n_full, n_linear = cfg.layer_types.count("full_attention"), cfg.layer_types.count("linear_attention")
n_rms, n_qk = 2 * cfg.num_hidden_layers + 1, 2 * n_full
print(tr(f"the model has {n_rms} RMSNorms, {n_qk} per-head QK-norms and {n_linear} gated RMSNorms: all of them are "
         "these two classes",
         f"全模型共 {n_rms} 个 RMSNorm、{n_qk} 个按头的 QK-norm 和 {n_linear} 个门控 RMSNorm：全都出自这两个类"))

# %% [markdown]
# ## Try this
#
# - **$\epsilon = 10^{-2}$**: `RMSNorm(d, eps=1e-2)(torch.full((1, d), 0.1))`. $\operatorname{mean}(x^2) = \epsilon$:
#   what RMS comes out, and why?
# - **The wrong class**: load the gated norm's weight into a plain RMSNorm,
#   `fill(RMSNorm(cfg.linear_value_head_dim), W, "layers.0.linear_attn.norm.")`, and compare its output on `h` with
#   `gated(h, torch.full_like(h, 20.0)) / F.silu(torch.tensor(20.0))`. Off by how much, everywhere?
# - **Statistics in bf16**: the cell after the code listing compares torch's bf16 mean of $x^2$ (a few 1e-3 off at
#   every $d$: it accumulates in fp32) with a sum kept in bf16 (about −54 % at $d = 4{,}096$). Try $d = 16{,}384$, or
#   `v.bfloat16().pow(2).sum()` — which of the two is it? `rms_normalize` calls `.float()` first so that no kernel's
#   accumulator can matter.
#
# ## Show the proof
# When transformers is installed, its Qwen3.5 norms get the same weights. In bf16 both must agree exactly: the RMSNorms
# compute in fp32 and round once; the gated norms round in the same three places. Those three roundings are a choice,
# not a law. Rounding once, at the end, would be on the whole closer to the exact value: transformers rounds twice
# before the gate ($\hat{x}$ to bf16, then $w \cdot \hat{x}$ in bf16), each by up to half a step, so its value can be a
# full step from the one-rounding value before the last rounding, which can add one more — up to 2 bf16 steps apart. The
# course's module follows transformers anyway, because its promise is transformers' output: in a whole bf16 model such
# steps, carried through the layers, can change the top-1 token. The last lines measure the alternative
# (tests/test_norm.py checks both claims).

# %% [markdown] lang="zh"
# ## 动手试试
#
# - **$\epsilon = 10^{-2}$**：`RMSNorm(d, eps=1e-2)(torch.full((1, d), 0.1))`。此时
#   $\operatorname{mean}(x^2) = \epsilon$，输出的 RMS 是多少？为什么？
# - **用错了类**：把门控归一化的权重加载进普通的 RMSNorm，即
#   `fill(RMSNorm(cfg.linear_value_head_dim), W, "layers.0.linear_attn.norm.")`，再在 `h` 上把它的输出和
#   `gated(h, torch.full_like(h, 20.0)) / F.silu(torch.tensor(20.0))` 比一比。处处差多少？
# - **在 bf16 里算统计量**：代码清单后面的单元格比较了两种做法，一是 torch 对 $x^2$ 求的 bf16 均值（各个 $d$ 下都只差
#   几个 1e-3，因为它在 fp32 里累加），二是一直用 bf16 累加的求和（$d = 4{,}096$ 时约差 −54 %）。试试 $d = 16{,}384$，
#   或者 `v.bfloat16().pow(2).sum()`：它属于哪一种？`rms_normalize` 先调用 `.float()`，就是为了不受任何 kernel 累加器
#   的影响。
#
# ## 对照验证
# 装了 transformers 时，让它的 Qwen3.5 归一化层拿到同样的权重。在 bf16 下两边必须完全一致：RMSNorm 都在 fp32 里计
# 算、只舍入一次；门控归一化都在相同的三个位置舍入。这三次舍入是一种选择，并不是非此不可。只在最后舍入一次，整体上会更
# 接近精确值：transformers 在乘门之前舍入两次（$\hat{x}$ 转 bf16，再在 bf16 里算 $w \cdot \hat{x}$），每次最多差半个步
# 长，所以在最后一次舍入之前，它的值就可能与只舍入一次的值相差整整一个步长，最后一次舍入还可能再差一个，加起来最多相差
# 2 个 bf16 步长。本课程的模块仍照 transformers 的位置舍入，因为本课程承诺的就是与 transformers 相同的输出：在一整个
# bf16 模型里，这样的步长差逐层传下去，可能改变 top-1 token。最后几行测量了另一种做法（tests/test_norm.py 检查了这两个
# 说法）。

# %%
def compare(transformers, W):
    from transformers.models.qwen3_5 import modeling_qwen3_5 as hf

    x = torch.randn(64, d, generator=torch.Generator().manual_seed(3)).bfloat16() * 3
    ours, theirs = fill(RMSNorm(d, eps), W, "norm."), hf.Qwen3_5RMSNorm(d, eps)
    theirs.weight.copy_(W["norm.weight"])
    book.oracle.difference(tr("final norm, bf16", "最终归一化，bf16"), ours.bfloat16()(x), theirs.bfloat16()(x))
    dv = cfg.linear_value_head_dim
    hh, z = torch.randn(4096, dv).bfloat16() * 3, torch.randn(4096, dv).bfloat16()
    ours, theirs = fill(GatedRMSNorm(dv, eps), W, "layers.0.linear_attn.norm."), hf.Qwen3_5RMSNormGated(dv, eps=eps)
    theirs.weight.copy_(W["layers.0.linear_attn.norm.weight"])
    want = theirs.bfloat16()(hh, z)
    book.oracle.difference(tr("gated norm of layer 0, bf16", "第 0 层的门控归一化，bf16"), ours.bfloat16()(hh, z), want)
    once = (rms_normalize(hh, eps) * ours.weight.float() * F.silu(z.float())).bfloat16()  # one rounding, at the end
    h64 = hh.double()
    exact = h64 * torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + eps) * ours.weight.double() * F.silu(z.double())
    steps = book.oracle.bf16_steps(once, want)
    ours_off, theirs_off = (once.double() - exact).abs().mean(), (want.double() - exact).abs().mean()
    print(tr(f"the gated norm rounded once instead: up to {steps:g} bf16 steps from transformers; mean distance to the "
             f"exact value {ours_off:.3g}, transformers' order {theirs_off:.3g}",
             f"门控归一化改为只舍入一次：与 transformers 最多相差 {steps:g} 个 bf16 步长；与精确值的平均距离 "
             f"{ours_off:.3g}，按 transformers 的顺序舍入则为 {theirs_off:.3g}"))
    book.oracle.difference(tr("l2norm, fp32", "fp32 下的 l2norm"), qwen_l2norm(hh.float()),
                           hf.l2norm(hh.float(), dim=-1, eps=1e-6))


book.proof(compare, W)

# %% [markdown]
# ## Summary
#
# - RMSNorm divides a vector by its root mean square and scales each dimension by $1 + w$, $w$ initialised to 0. The
#   output RMS is 1 (with $w = 0$) only when $\operatorname{mean}(x^2) \gg \epsilon$: at RMS $10^{-3}$ and
#   $\epsilon = 10^{-6}$ it is 0.707.
# - The statistics are computed in fp32 and the result is rounded back to the input dtype: once for RMSNorm, in
#   transformers' three places for the gated norm (rounding once would be closer to exact, up to 2 bf16 steps
#   away, but the course matches transformers bit for bit).
# - Storing the offset $w$ rather than the scale: bf16's grid is fine near 0 and coarse near 1 (1.001 is stored as
#   1.0), which matters where the weight is held in bf16 and stays near 0; for trained weights of 1 to 5 (the real
#   final norm's $w \approx 3.3$) it is at most one binade, 2× finer. Weight decay then pulls towards a scale of 1.
# - The trained scales are not 1: the real final norm scales by about 4.3, setting the size of the logits.
# - `GatedRMSNorm` (plain $w$, times $\operatorname{silu}(z)$, negative for every $z < 0$) and `l2norm` are parts of
#   linear attention (chapter 7); the model has 49 RMSNorms, 12 per-head QK-norms and 18 gated norms, all made of these
#   classes.
#
# Shapes: every norm works on the last dimension — $d$ for the residual stream, $D$ per head for `q_norm` and
# `k_norm`, $d_v$ per head for the gated norm:

# %% [markdown] lang="zh"
# ## 小结
#
# - RMSNorm 把向量除以它的均方根，再逐维乘以 $1 + w$，$w$ 初始化为 0。只有当 $\operatorname{mean}(x^2) \gg \epsilon$
#   时，输出的 RMS 才是 1（$w = 0$ 时）：RMS 为 $10^{-3}$、$\epsilon = 10^{-6}$ 时只有 0.707。
# - 统计量在 fp32 里算，结果再舍入回输入的 dtype：RMSNorm 舍入一次，门控归一化在 transformers 的三个位置舍入（只舍入一
#   次会更接近精确值，与之最多差 2 个 bf16 步长，但本课程与 transformers 逐位一致）。
# - 存偏移量 $w$ 而不存比例：bf16 的网格在 0 附近细、在 1 附近粗（1.001 会存成 1.0）。这只在权重以 bf16 保存、且停留在
#   0 附近时才要紧；对于 1 到 5 之间的训练后权重（真实最终归一化的 $w \approx 3.3$），两者至多差一个二进制量级，存 $w$
#   的舍入精度最多高 2 倍。权重衰减则把它拉向比例 1。
# - 训练出的比例不是 1：真实的最终归一化放大约 4.3 倍，决定了 logits 的大小。
# - `GatedRMSNorm`（普通的 $w$，乘以 $\operatorname{silu}(z)$，$z < 0$ 时为负）和 `l2norm` 是线性注意力的部件（第 7 章
#   ）；模型有 49 个 RMSNorm、12 个按头的 QK-norm 和 18 个门控归一化，全部由这几个类构成。
#
# 形状：每种归一化都作用在最后一维上，残差流上是 $d$，`q_norm` 和 `k_norm` 是每个头的 $D$，门控归一化是每个头的
# $d_v$：

# %%
book.notation(args.checkpoint)

# %% [markdown]
# File added in this chapter: `qwen/norm.py`.
#
# **Exercises**: 204 · Zero-centred RMSNorm and gated RMSNorm (`python practice/judge.py start 204`, or the cell in
# section 2) · 205 · Convert norm weights between conventions (`python practice/judge.py start 205`, or the cell
# in section 4).
#
# ## How to explain it
#
# An interviewer asking about RMSNorm wants three things, in this order.
#
# 1. **What it is, against LayerNorm.** LayerNorm centres (subtracts the mean), scales to unit variance, and adds a
#    learned scale and bias. RMSNorm keeps only the scaling: divide by $\sqrt{\operatorname{mean}(x^2) + \epsilon}$,
#    multiply by a learned per-dimension scale. It is cheaper — one statistic instead of two — and works as well in
#    practice.
# 2. **The engineering details.** The statistics are computed in fp32 (squares of bf16 numbers lose precision) and
#    the result is cast back once. Qwen3.5, like Gemma, parameterises the scale as $1 + w$ with $w$ initialised to 0:
#    bf16 resolves small offsets around 0 far better than around 1 (once trained weights reach 1 to 5, the gain is
#    one binade at most), and weight decay, where it is applied to norms, pulls $w$ towards "scale 1" instead of
#    "scale 0".
# 3. **Where it sits.** Pre-norm: each sublayer sees normalised input, and its output is added to a residual stream that
#    is never normalised, so gradients flow along the stream undisturbed — that is why pre-norm trains deep stacks more
#    stably than post-norm. A final norm before the head, whose gain sets the scale of the logits; QK-norm on queries
#    and keys keeps the attention logits bounded. In Qwen3.5's linear-attention layers the head output goes through an
#    RMSNorm multiplied by $\operatorname{silu}(\text{gate})$, so each head can be switched off by its input.

# %% [markdown] lang="zh"
# 本章新增的文件：`qwen/norm.py`。
#
# **练习**：204 · 权重零中心的 RMSNorm 与门控 RMSNorm（`python practice/judge.py start 204`，或第 2 节的单元格）·
# 205 · 在两种约定之间转换归一化权重（`python practice/judge.py start 205`，或第 4 节的单元格）。
#
# ## 面试怎么答
#
# 面试官问到 RMSNorm，想听三件事，按这个顺序讲。
#
# 1. **它是什么，和 LayerNorm 有什么区别。** LayerNorm 先中心化（减去均值），再缩放到单位方差，最后乘可学习的比例、加
#    偏置。RMSNorm 只保留缩放：除以 $\sqrt{\operatorname{mean}(x^2) + \epsilon}$，再乘一个可学习的逐维比例。它更省计算
#    （只算一个统计量，而不是两个），实际效果一样好。
# 2. **工程细节。** 统计量在 fp32 里算（bf16 数的平方会丢精度），结果只转回去一次。Qwen3.5 和 Gemma 一样，把比例参数化
#    为 $1 + w$，$w$ 初始化为 0：bf16 在 0 附近分辨小偏移的能力远好于 1 附近（训练后的权重到了 1 到 5，好处至多一个二
#    进制量级）；另外，在对归一化做权重衰减的地方，衰减会把 $w$ 拉向“比例 1”，而不是“比例 0”。
# 3. **它放在哪里。** Pre-norm：每个子层看到的都是归一化后的输入，输出再加回一条从不归一化的残差流，梯度沿这条流畅通无
#    阻地传回去，所以 pre-norm 训练深层网络比 post-norm 更稳定。输出头之前有一个最终归一化，它的增益决定 logits 的尺度
#    ；查询和键上的 QK-norm 让注意力 logits 保持有界。Qwen3.5 的线性注意力层里，每个头的输出要经过一个乘以
#    $\operatorname{silu}(\text{门})$ 的 RMSNorm，所以每个头都可以被自己的输入关掉。
