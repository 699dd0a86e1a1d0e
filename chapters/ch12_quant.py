"""Chapter 12: decoding at the speed of memory — the bytes a step reads, and fewer: int8, int4, llama.cpp's blocks.

第 12 章：量化——解码速度受限于内存带宽。一步要读多少字节，怎样少读一些：int8、int4、llama.cpp 的块。

Run: python chapters/ch12_quant.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch12_quant.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 12 · Decoding at the speed of memory: quantization
#
# Chapter 9 measured why decoding is slow: every step reads every weight once, so tokens per second can be no more than
# the bytes the machine reads per second divided by the bytes a step reads. This chapter counts those bytes for each way
# of storing a weight, looks at how close a one-row product gets to the wall, and then takes the second lever: **fewer
# bytes per weight**. It stores weights as small integers times a shared scale (int8 per output channel, int4 in groups,
# with and without a zero point), writes llama.cpp's Q8_0 and Q4_0 blocks byte for byte, and measures — never assumes —
# what that costs: the error of each class of tensor, and how far the next-token distribution moves. Last, it times one
# decode step of the live quantized model at the real 0.8B's shapes against its bound.
#
# ```
# qwen/
# ├── measure.py      ~ the bandwidth probes (chapter 9); + next_token_kl, top1_agreement
# ├── quant.py        + int8 per channel, int4 groups (symmetric and with a zero point), bits per weight
# ├── gguf_blocks.py  + llama.cpp's Q8_0 and Q4_0 blocks byte for byte, Q4_K read
# ├── quantlinear.py  + a projection held as int8 or int4 codes, on torch's packed kernels
# ├── quantized.py    + the quantized live model, fake_quantize for the teaching model
# └── fast.py         ~ load_fast(..., quant="int8" | "int4")
# book/
# └── ch12.py         + this chapter's byte counts, its text and its figures
# chapters/
# └── ch12_quant.py   + this chapter's script
# notebooks/
# └── ch12_quant.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch12_quant.py` (`--figures` saves the figures, `--proof`
# compares the blocks with the `gguf` package's reference quantizer). With the synthetic checkpoint the weights are
# random draws from a normal distribution: their errors are those of such draws, not of trained weights, whose rows have
# outliers; the run says so where that changes what a number means, and the byte counts are the real 0.8B's.

# %% [markdown] lang="zh"
# # 第 12 章 · 量化：解码速度受限于内存带宽
#
# 第 9 章测过解码为什么慢：每一步都要把所有权重读一遍，所以每秒 token 数的上限，就是机器每秒能读的字节数除以一步要读的字
# 节数。本章先按权重的每种存法数清这些字节，看看单行矩阵乘法离内存带宽上限有多近；然后换一个办法提速：**让每个权重少占字
# 节**。具体做法是把权重存成小整数乘以一个共享的缩放因子（int8 按输出通道，int4 按组，带或不带零点），逐字节写出
# llama.cpp 的 Q8_0 和 Q4_0 块，并且实测——而不是想当然——这样做的代价：每类张量的误差有多大，下一个 token 的分布偏了多
# 少。最后按真实 0.8B 的形状，给运行中的量化模型实测一个解码步，和它的上限对比。
#
# ```
# qwen/
# ├── measure.py      ~ 带宽探测（第 9 章）；+ next_token_kl、top1_agreement
# ├── quant.py        + 按通道的 int8、按组的 int4（对称的和带零点的）、每个权重的比特数
# ├── gguf_blocks.py  + 逐字节写出 llama.cpp 的 Q8_0 和 Q4_0 块，读取 Q4_K
# ├── quantlinear.py  + 存成 int8 或 int4 码的投影，用 torch 的打包 kernel 计算
# ├── quantized.py    + 运行中的量化模型，给教学模型用的 fake_quantize
# └── fast.py         ~ load_fast(..., quant="int8" | "int4")
# book/
# └── ch12.py         + 本章的字节计数、文本和图
# chapters/
# └── ch12_quant.py   + 本章脚本
# notebooks/
# └── ch12_quant.ipynb + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节已有
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch12_quant.py`（`--figures` 保存图，`--proof` 把这些块与 `gguf` 包的参考量化
# 器对比）。用合成检查点时，权重是从正态分布随机抽的，误差也就是这种随机数的误差；训练过的权重不一样，它们的行里有离群
# 值。凡是这一点会改变某个数的含义，运行时都会注明；字节数则一律按真实 0.8B 计算。

# %%
import math
import struct

import torch

import book
from book import ch12
from qwen import measure, products, quant
from qwen.course import chapter_args
from qwen.family import all_attention_bytes, cache_bytes
from qwen.fast import load_fast
from qwen.generate import generate
from qwen.lang import ljust, tr
from qwen.model import load_model
from qwen.quantized import fake_quantize
from qwen.quantlinear import codes, dequantize, has_kernel, held_as
from qwen.sizes import real_config, tensor_shapes
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights

args = chapter_args(__doc__)
cfg = args.checkpoint.config
real = real_config()
dev = args.device
W = Weights(args.checkpoint)  # headers only: each tensor is read when it is asked for
SYNTHETIC = args.checkpoint.synthetic
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
TAG = tr(" (synthetic weights)", "（合成权重）") if SYNTHETIC else ""  # a figure that would look different
NOISE = tr(" (random weights: the tokens mean nothing)", "（随机权重：这些 token 没有意义）") if SYNTHETIC else ""
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %%
book.show("ch12-map", book.model_map.draw, "quant")

# %% [markdown]
# ## 1. The bound, per format
# A decode step multiplies every projection by one vector, so it reads every projection's weights once: the attention
# and DeltaNet projections and the MLPs of all 24 layers, and the head, which is the embedding table itself in the 0.8B
# (the tied head) — the lookup reads one row of it, the head all 248,320. It also reads the caches: the keys and values
# of every earlier token in the 6 full-attention layers, and the fixed DeltaNet state of the other 18, which it also
# writes back (so the state counts twice). The small tensors (the norms, the conv kernels, `A_log`, `dt_bias`) are a
# rounding error. Counted from the real 0.8B's config (`book/ch12.py`'s `step_bytes`, on `qwen.sizes`' tensor list), at
# 1,024 tokens of context:

# %% [markdown] lang="zh"
# ## 1. 每种格式的上限
# 解码一步，要拿每个投影乘一个向量，所以每个投影的权重都要读一遍：24 层的注意力投影、DeltaNet 投影和 MLP，还有输出头——在
# 0.8B 里，输出头就是嵌入表本身（共享的输出头）：查嵌入只读其中一行，输出头却要读全部 248,320 行。此外还要读缓存：6 个全
# 注意力层里之前每个 token 的键和值（即键值缓存，KV cache），以及其余 18 层固定大小的 DeltaNet 状态；状态读完还要写回
# 去，所以算两遍。小张量（各归一化层的权重、卷积核、`A_log`、`dt_bias`）只是个零头。按真实 0.8B 的配置来数
# （`book/ch12.py` 的 `step_bytes`，基于 `qwen.sizes` 的张量列表），上下文为 1,024 个 token 时：

# %%
TOKENS = 1024
bf16_step = ch12.step_bytes(real, "bf16", TOKENS)
step_total = sum(bf16_step.values())
for part, b in bf16_step.items():
    print(tr(f"real Qwen3.5-0.8B, bf16: {ch12.class_name(part):22s} {b / 1e6:8.1f} MB  {b / step_total:6.1%}",
             f"真实 Qwen3.5-0.8B，bf16：{ljust(ch12.class_name(part), 20)} {b / 1e6:8.1f} MB  {b / step_total:6.1%}"))
print(tr(f"real Qwen3.5-0.8B, bf16: one decode step at {TOKENS:,} tokens moves {step_total / 1e6:,.1f} MB",
         f"真实 Qwen3.5-0.8B，bf16：上下文 {TOKENS:,} 个 token 时，一个解码步读写 {step_total / 1e6:,.1f} MB"))
for n in (TOKENS, real.max_position_embeddings):  # the caches, hybrid and as if every layer were full attention
    hybrid, every_layer = sum(cache_bytes(real, n)), all_attention_bytes(real, n)
    print(tr(f"real Qwen3.5-0.8B at {n:,} tokens: its caches {hybrid / 1e6:,.1f} MB; every layer full attention, "
             f"the KV cache alone would be {every_layer / 1e6:,.1f} MB",
             f"真实 Qwen3.5-0.8B，{n:,} 个 token：缓存共 {hybrid / 1e6:,.1f} MB；假如每层都是全注意力，光键值缓存就有 "
             f"{every_layer / 1e6:,.1f} MB"))

# %% [markdown]
# The tied head is a third of every step: in a small model with a large vocabulary, the last matrix product is the
# biggest. At 1,024 tokens the caches are small whatever the design, a few percent of the step, and the DeltaNet state
# is the larger part of them; the hybrid design's gift (chapter 7) shows at long context, where a model of
# full-attention layers only would read four times the cache. At this length the weights' format decides the speed. This
# machine's read rate (`qwen.measure.read_bandwidth`, a sum over 256 MiB, best of 5) turns each format's bytes into the
# least time a decode step can take, whatever its code (its inverse, the most tokens per second, is the figure's right
# panel). "int4" is the symmetric one of section 3 (4.5 bits a weight); the live model of section 7 keeps a zero point
# too, "int4+zero" (5.0 bits). The "Q4_0 file" is what llama-quantize writes for Q4_0: it keeps the output tensor, here
# the tied table, in Q6_K (6.5625 bits a weight), so its head costs more than its other weights:

# %% [markdown] lang="zh"
# 共享的输出头占了每一步的三分之一：小模型配大词表，最后那次矩阵乘法反而最大。上下文只有 1,024 个 token 时，不管哪种架
# 构，缓存都不大，只占一步的百分之几，而且其中大头是 DeltaNet 状态；混合架构（第 7 章）的好处要到长上下文才显出来：全用
# 全注意力层的模型，要读的缓存是它的四倍。在这个长度上，速度由权重的存储格式决定。用这台机器的读取速率
# （`qwen.measure.read_bandwidth`，对 256 MiB 求和，取 5 次中最快的一次）把每种格式的字节数换算成一个解码步至少要花的时
# 间，代码写得再好也快不过它（它的倒数，也就是每秒最多能出多少 token，画在图的右半边）。表中的 int4 是第 3 节的对称
# int4（每个权重 4.5 比特）；第 7 节运行中的模型还带零点，即“int4 + 零点”（5.0 比特）。“Q4_0 文件”指 llama-quantize 按
# Q4_0 写出的文件：它把输出张量（这里就是共享的嵌入表）存成 Q6_K（每个权重 6.5625 比特），所以输出头比其他权重贵：

# %%
read = measure.read_bandwidth(dev)  # bytes read per second
rows = {fmt: ch12.step_bytes(real, fmt, TOKENS) for fmt in ch12.FORMATS}
print(tr(f"this machine ({dev}) reads 1 GB in {1e9 / read * 1e3:.0f} ms",
         f"这台机器（{str(dev).upper()}）读 1 GB 要 {1e9 / read * 1e3:.0f} ms"))
for fmt, parts in rows.items():
    weights = sum(v for k, v in parts.items() if k not in ("KV cache", "DeltaNet state"))
    head = ch12.bits(fmt, real.hidden_size, head=True)
    extra = tr(f" (the head {head:.3f})", f"（输出头 {head:.3f}）") if head != ch12.bits(fmt, real.hidden_size) else ""
    print(tr(f"real Qwen3.5-0.8B, {ch12.scheme_name(fmt):9s}: {ch12.bits(fmt, real.hidden_size):6.3f} bits per weight"
             f"{extra}, weights {weights / 1e6:7.1f} MB, a step {sum(parts.values()) / 1e6:7.1f} MB: at least "
             f"{sum(parts.values()) / read * 1e3:.0f} ms per token here",
             f"真实 Qwen3.5-0.8B，{ch12.scheme_name(fmt)}：每个权重 {ch12.bits(fmt, real.hidden_size):6.3f} 比特"
             f"{extra}，权重 {weights / 1e6:7.1f} MB，一步 {sum(parts.values()) / 1e6:7.1f} MB：在这里每个 token 至少 "
             f"{sum(parts.values()) / read * 1e3:.0f} ms"))

# %%
book.show("ch12-bound", ch12.bound_figure, rows, read,
          title=tr(f"Real Qwen3.5-0.8B at {TOKENS:,} tokens: the bytes of one decode step, and the bound on {dev}",
                   f"真实 Qwen3.5-0.8B，{TOKENS:,} 个 token：一个解码步的字节数，以及在 {str(dev).upper()} 上的上限"))

# %% [markdown]
# ## 2. Reading at the wall
# The bound assumes each weight is read at the stream's rate. A matrix-vector product is a stream of weights with one
# multiply-add each, so it could be; whether a kernel gets there depends on how it was written for a single row and on
# whether the CPU multiplies the dtype natively (a bf16 weight without bf16 instructions is widened to fp32 first, an
# instruction or two per weight). Measured on one weight of the head's width (65,536 × 1,024, a quarter of the 0.8B's
# head), one row through `F.linear`, in fp32 and in bf16, as bytes of weight read per second beside the stream's:

# %% [markdown] lang="zh"
# ## 2. 能否读满内存带宽
# 上面的上限假设每个权重都按数据流的速率读出。矩阵-向量乘法本来就是读一串权重，每个做一次乘加，按说能读满；能不能读满，
# 要看 kernel 针对单行输入是怎么写的，还要看 CPU 能不能直接算这种 dtype（没有 bf16 指令时，每个 bf16 权重要先转成 fp32，
# 每个权重多一两条指令）。在一个和输出头同宽的权重上测（65,536 × 1,024，是 0.8B 输出头的四分之一），用 `F.linear` 算一
# 行，fp32 和 bf16 各测一次，结果换算成每秒读多少字节的权重，与数据流的速率并列：

# %%
def one_row(dtype, rows=65_536):
    """{how: seconds} for one row times a (rows, 1024) weight in dtype, best of 5: through F.linear, and, where this
    torch packs the dtype, through a copy of the same weight prepacked once for oneDNN (qwen/products.py, chapter 9's
    fast path); and the weight's bytes."""
    w_big = torch.randn(rows, 1024, device=dev).to(dtype)  # filled: untouched pages would flatter the rate
    x_one = torch.randn(1, 1024, device=dev).to(dtype)
    ways = {"F.linear": lambda: torch.nn.functional.linear(x_one, w_big)}
    if products.can_pack(dev, dtype):
        w_packed = products.pack(w_big)  # reordered once, as load_fast does at load
        ways[tr("prepacked", "预打包")] = lambda: products.packed_product(x_one, w_packed)
    return {how: measure.best(f, dev) for how, f in ways.items()}, w_big.numel() * dtype.itemsize


print(tr(f"the stream: {read / 1e9:.2f} GB/s", f"数据流：{read / 1e9:.2f} GB/s"))
for dtype in (torch.float32, torch.bfloat16):
    name = str(dtype).removeprefix("torch.")
    times, nbytes = one_row(dtype)
    for how, seconds in times.items():
        rate = nbytes / seconds
        print(tr(f"one row, {name:8s} {how:9s}: {seconds * 1e3:6.2f} ms, {rate / 1e9:.2f} GB/s of weights, "
                 f"{rate / read:.0%} of the stream (one measurement each, on a shared machine)",
                 f"一行，{name:8s} {ljust(how + '：', 10)}{seconds * 1e3:6.2f} ms，读权重 {rate / 1e9:.2f} GB/s，"
                 f"是数据流的 {rate / read:.0%}（各测一次，机器是共享的）"))
    if len(times) == 1:
        print(tr(f"{dev}: this torch does not prepack {name} weights for oneDNN here; the fast path keeps F.linear",
                 f"{str(dev).upper()}：当前 torch 不支持用 oneDNN 预打包 {name} 权重，快速路径继续用 F.linear"))
    else:  # what to read from the two lines (the timings differ from run to run, the reading does not)
        print(tr(f"  {name}: where prepacked is not clearly faster than F.linear, the plain kernel was not held back "
                 f"by its layout on this CPU",
                 f"  {name}：如果预打包没有明显快过 F.linear，说明这台 CPU 上普通 kernel 并没有被权重布局拖慢"))


# %% [markdown]
# Where a product reads well below the stream, the kernel, not the memory, is the limit. Two things can move it. First,
# a weight **prepacked once** into the layout the kernel reads: torch's oneDNN backend can reorder a linear layer's
# weight when the model is loaded (`torch.ops.mkldnn._reorder_linear_weight`, the op torch's compiler uses when it
# freezes bf16 CPU weights; for fp32 with a fixed batch it takes MKL's `_mkl_reorder_linear_weight`), and its product
# then does no repacking per call. Chapter 9's fast path does it for every projection and the tied head
# (`qwen/products.py`; the lines above time it where this torch offers it: where it is not faster, the layout was not
# what held the kernel back on this CPU). Whether oneDNN multiplies a dtype depends on the CPU's instructions (bf16
# needs AVX-512 or AVX-NE-CONVERT on x86), so the fast path chooses it by capability (`products.can_pack`), never by a
# timing, and keeps plain `F.linear` elsewhere; its results are proven against the teaching path and transformers like
# every other fast-path product. The price is memory: the packed copy sits beside the plain weight, which the embedding
# lookup and `state_dict` read. Second, the dtype: on a CPU without bf16 instructions every bf16 weight is widened
# before it is multiplied. For one row, as here, bf16 still reads half of fp32's bytes and may come out ahead; for a
# prompt's many rows a bf16 product measured slower than an fp32 one over twice the bytes (`qwen/products.py` keeps the
# measurement), so chapter 9's fast path multiplies bf16 prompts in fp32 there (`products.WIDE_ROWS` rows or more).
# Neither changes the bound: they only bring the code closer to it. Only fewer bytes move the bound itself.

# %% [markdown] lang="zh"
# 读取速率远低于数据流时，瓶颈在 kernel，而不在内存。有两个办法可能缓解。第一，把权重**预先重排一次**，排成 kernel 读取
# 的布局：torch 的 oneDNN 后端可以在加载模型时重排一个线性层的权重（`torch.ops.mkldnn._reorder_linear_weight`，torch 的
# 编译器冻结 bf16 的 CPU 权重时用的就是它；fp32 且批次固定时改用 MKL 的 `_mkl_reorder_linear_weight`），之后每次乘法都不
# 必再重排。第 9 章的快速路径对每个投影和共享的输出头都这样做（`qwen/products.py`；如果当前安装的 torch 支持，上面的计时
# 里也有预打包这一行；如果它不比 F.linear 快，说明这台 CPU 上拖慢 kernel 的不是权重布局）。oneDNN 能不能算某种 dtype，取
# 决于 CPU 的指令集（x86 上 bf16 需要 AVX-512 或 AVX-NE-CONVERT），所以快速路径按 CPU 的能力来选
# （`products.can_pack`），从不按计时结果选，其他情况一律用普通的 `F.linear`；和快速路径上的其他乘法一样，它的结果也核对
# 过，与教学路径和 transformers 一致。代价是内存：打包副本和原始权重同时存在，嵌入查表和 `state_dict` 读的是原始权重。第
# 二是 dtype：没有 bf16 指令的 CPU 上，每个 bf16 权重都要先转成 fp32 再乘。只算一行时（比如上面），bf16 读的字节只有
# fp32 的一半，仍可能更快；提示词有很多行，实测 bf16 乘法反而比读两倍字节的 fp32 乘法还慢（测量记录在 `qwen/products.py`
# 里），所以第 9 章的快速路径在那里把提示词的 bf16 乘法改用 fp32 计算（从 `products.WIDE_ROWS` 行起）。这两个办法都不改
# 变上限，只让代码更接近上限。只有减少字节数，才能抬高上限本身。

# %% [markdown]
# ## 3. Fewer bytes by hand: int8 and int4
# Store $w \approx q \cdot s$: $q$ a small integer, $s$ a scale shared by many weights. **int8 per output channel**
# gives each row one scale, $s = \max \lvert w_{\mathrm{row}} \rvert / 127$, so the row's largest weight lands on
# $\pm 127$ and nothing is clipped; a kernel sums $x \cdot q$ over the row and multiplies that sum by $s$ once, not each
# weight. **int4 in groups** has
# only 16 codes, too few for a whole row whose one outlier would stretch the step for all: each group of $g$ consecutive
# inputs gets its own scale, $s = \max \lvert w_{\mathrm{group}} \rvert / 7$ (symmetric, codes $-7, \dots, 7$), or its
# own range with a **zero point**, $s = (M - m) / 15$ and $w \approx q \cdot s + m$ (codes $0, \dots, 15$ spanning
# exactly the group's $[m, M]$). One row of layer 0's `mlp.gate_proj`:

# %% [markdown] lang="zh"
# ## 3. 亲手压缩字节：int8 与 int4
# 把权重存成 $w \approx q \cdot s$：$q$ 是小整数，$s$ 是许多权重共用的缩放因子。**按输出通道的 int8** 给每一行一个缩放因
# 子 $s = \max \lvert w_{\mathrm{row}} \rvert / 127$，这一行最大的权重正好落在 $\pm 127$ 上，不会有值被截断；kernel 先把
# 这一行的 $x \cdot q$ 加起来，最后乘一次 $s$，不必每个权重都乘。**按组的 int4** 只有 16 个码，对整整一行来说太少：一个
# 离群值就会把整行的步长撑大。所以
# 每 $g$ 个相邻输入分成一组，每组有自己的缩放因子 $s = \max \lvert w_{\mathrm{group}} \rvert / 7$（对称，码为
# $-7, \dots, 7$）；或者每组有自己的范围，再加一个**零点**：$s = (M - m) / 15$，$w \approx q \cdot s + m$（码
# $0, \dots, 15$ 正好覆盖这一组的 $[m, M]$）。下面是第 0 层 `mlp.gate_proj` 的一行：

# %%
name = "layers.0.mlp.gate_proj.weight"
w = W[name].float()  # (I, d)
q8, s8 = quant.quantize_int8(w)
q4, s4 = quant.quantize_int4(w, 32)
qz, sz, mz = quant.quantize_int4_zero(w, 32)
row = w[0, :8]


def shown(t):
    return [round(v, 4) for v in t.tolist()]


print(tr(f"{name} {tuple(w.shape)}, row 0, its first 8 weights: {shown(row)}",
         f"{name} {tuple(w.shape)}，第 0 行的前 8 个权重：{shown(row)}"))
print(tr(f"int8: scale {s8[0]:.6f}, codes {q8[0, :8].tolist()}, back {shown(q8[0, :8] * s8[0])}",
         f"int8：缩放因子 {s8[0]:.6f}，码 {q8[0, :8].tolist()}，反量化后 {shown(q8[0, :8] * s8[0])}"))
print(tr(f"int4, g = 32: scale {s4[0, 0]:.5f}, codes {q4[0, :8].tolist()}, back {shown(q4[0, :8] * s4[0, 0])}",
         f"int4，g = 32：缩放因子 {s4[0, 0]:.5f}，码 {q4[0, :8].tolist()}，反量化后 {shown(q4[0, :8] * s4[0, 0])}"))
print(tr(f"int4 + zero point, g = 32: scale {sz[0, 0]:.5f}, minimum {mz[0, 0]:.5f}, codes {qz[0, :8].tolist()}, back "
         f"{shown(qz[0, :8] * sz[0, 0] + mz[0, 0])}",
         f"int4 + 零点，g = 32：缩放因子 {sz[0, 0]:.5f}，最小值 {mz[0, 0]:.5f}，码 {qz[0, :8].tolist()}，反量化后 "
         f"{shown(qz[0, :8] * sz[0, 0] + mz[0, 0])}"))


def rel_error(w, back):
    """‖w − ŵ‖ / ‖w‖ over the whole tensor (Frobenius norms)."""
    return float((w - back).norm() / w.norm())


schemes = {"int8": lambda w: quant.dequantize_int8(*quant.quantize_int8(w)),
           "int4": lambda w: quant.dequantize_int4(*quant.quantize_int4(w, 32)),
           "int4+zero": lambda w: quant.dequantize_int4_zero(*quant.quantize_int4_zero(w, 32))}
for label, roundtrip in schemes.items():
    per_row = tr(f" (one scale per row of {w.shape[1]})", f"（每行 {w.shape[1]} 个权重一个缩放因子）") \
        if label == "int8" else ""
    print(tr(f"{label:9s}: {ch12.bits(label, w.shape[1]):.3f} bits per weight{per_row}, relative error "
             f"{rel_error(w, roundtrip(w)):.2e} over the whole tensor",
             f"{ljust(ch12.scheme_name(label) + '：', 13)}每个权重 {ch12.bits(label, w.shape[1]):.3f} 比特{per_row}，"
             f"整个张量的相对误差 {rel_error(w, roundtrip(w)):.2e}"))

# %% [markdown]
# Each code is a multiple of the step, so with the exact fp32 scales of this section the error of one weight is at most
# half a step, $s / 2$. A stored scale is rounded (Q8_0's to fp16, the live model's to bf16) while the codes were
# chosen with the exact one, so each weight moves by its code times that rounding too: up to
# $\tfrac12 + 127 \cdot 2^{-9} \approx 0.75$ of a step for int8 with a bf16 scale. int4's step is about 18 times int8's
# for the same range ($127 / 7$), and its error follows.
#
# The zero point spends the 16 codes on the group's own range $[m, M]$ instead of $[-\max \lvert w \rvert,
# \max \lvert w \rvert]$. Even for weights spread around zero, as here, $[m, M]$ is the narrower one (a group's two
# extremes are rarely equally large), so the step is finer; for a group that leans one way (all positive, say) it is at
# least $15 / 7 \approx 2.14$ times finer, and finer still the narrower the group. It costs a second 16-bit number per
# group, 5.0 bits per weight instead of 4.5, so the fair comparison is at equal bits: int4 with a zero point and
# $g = 32$ against symmetric int4 with $g = 16$, both 5.0 bits (the last line below). "Zero point" names three things:
# here the float minimum $m$ (as llama.cpp's Q4_1 keeps it); in torch's int4 kernel $z = m + 8s$, the value of code 8
# (section 7); in PyTorch's and ONNX's quantization an integer code $z$ with $w = (q - z) \cdot s$. All three describe
# the same evenly spaced grid.
#
# The group size trades error against bits: smaller groups follow the weights' local size more closely, and each one's
# 16-bit scale is shared by fewer weights.

# %% [markdown] lang="zh"
# 每个码都是步长的整数倍，所以用本节这样精确的 fp32 缩放因子时，单个权重的误差最多是半个步长，即 $s / 2$。但存下来的缩
# 放因子是舍入过的（Q8_0 舍入到 fp16，运行中的模型舍入到 bf16），码却是按精确的缩放因子选的，所以每个权重还要再偏
# “码 × 舍入误差”：int8 配 bf16 缩放因子时，最多到 $\tfrac12 + 127 \cdot 2^{-9} \approx 0.75$ 个步长。范围相同时，int4
# 的步长约是 int8 的 18 倍（$127 / 7$），误差也跟着变大。
#
# 零点把 16 个码都花在这一组自己的范围 $[m, M]$ 上，而不是 $[-\max \lvert w \rvert, \max \lvert w \rvert]$。即使像这
# 里这样权重分布在零的两侧，$[m, M]$ 也更窄（一组的两个极值很少一样大），步长因此更细；如果一组偏向一侧（比如全是正
# 数），步长至少细 $15 / 7 \approx 2.14$ 倍，组的范围越窄，细得越多。代价是每组多存一个 16 比特的数，每个权重 5.0 比
# 特而不是 4.5，所以公平的比较要在比特数相同时做：带零点、$g = 32$ 的 int4，对比对称、$g = 16$ 的 int4，两者都是 5.0
# 比特（见下面最后一行）。“零点”有三种说法：本课指浮点的最小值 $m$（llama.cpp 的 Q4_1 也这样存）；torch 的 int4
# kernel 存 $z = m + 8s$，即码 8 代表的值（第 7 节）；PyTorch 和 ONNX 的量化里，零点是一个整数码 $z$，
# $w = (q - z) \cdot s$。三者描述的是同一套等间距的格点。
#
# 组大小是在误差和比特数之间取舍：组越小，越能贴合权重的局部大小，但每组那个 16 比特的缩放因子能分摊到的权重也越少。

# %%
groups = [g for g in (8, 16, 32, 64, 128, 256, 512, 1024) if w.shape[1] % g == 0]
by_group = {"int4": [rel_error(w, quant.dequantize_int4(*quant.quantize_int4(w, g))) for g in groups],
            "int4+zero": [rel_error(w, quant.dequantize_int4_zero(*quant.quantize_int4_zero(w, g))) for g in groups]}
for g, e, ez in zip(groups, by_group["int4"], by_group["int4+zero"]):
    print(tr(f"g = {g:4d}: {quant.bits_per_weight(4, g):.3f} bits per weight, relative error {e:.3e}; with a zero "
             f"point {quant.bits_per_weight(4, g, zero_bits=16):.3f} bits, {ez:.3e}",
             f"g = {g:4d}：每个权重 {quant.bits_per_weight(4, g):.3f} 比特，相对误差 {e:.3e}；带零点时 "
             f"{quant.bits_per_weight(4, g, zero_bits=16):.3f} 比特，相对误差 {ez:.3e}"))
if 16 in groups and 32 in groups:  # the same 5.0 bits per weight, spent two ways
    e16, ez32 = by_group["int4"][groups.index(16)], by_group["int4+zero"][groups.index(32)]
    print(tr(f"at {quant.bits_per_weight(4, 16):.1f} bits per weight both: symmetric g = 16 {e16:.3e}, with a zero "
             f"point g = 32 {ez32:.3e}, {ez32 / e16:.2f}x the error",
             f"同为每个权重 {quant.bits_per_weight(4, 16):.1f} 比特：对称、g = 16 时 {e16:.3e}，带零点、g = 32 时 "
             f"{ez32:.3e}，误差是前者的 {ez32 / e16:.2f} 倍"))

# %% [markdown]
# **Try it first**: exercise 223 is group-wise int4 with a zero point, quantize and dequantize
# (`python practice/judge.py start 223`, or the cell below); the finished module follows it.

# %% [markdown] lang="zh"
# **先自己试试**：练习 223 是带零点的按组 int4，包括量化和反量化（`python practice/judge.py start 223`，或者用下面的单元
# 格）；写好的模块紧随其后。


# %%
def quantize_int4_zero(w, g):
    raise NotImplementedError  # your code: (q uint8 (out, in), s (out, in / g), m (out, in / g))


def dequantize_int4_zero(q, s, m):
    raise NotImplementedError  # your code: w ≈ q · s + m, fp32 (out, in)


book.attempt(223, quantize_int4_zero, dequantize_int4_zero)

# %%
book.listing("qwen/quant.py")

# %% [markdown]
# ## 4. llama.cpp's blocks, byte for byte
# A GGUF file (llama.cpp's format) is a header, metadata, each tensor's name, shape and offset, padding to its
# alignment, then the tensors' data. Inside a quantized tensor's data each row is cut into **blocks** of 32 values,
# stored one after another, each on its own: an fp16 scale $d$, then the codes. **Q8_0** is 34 bytes:
# $d = \max \lvert x \rvert / 127$, its reciprocal $i_d = 1 / d$ (0 for a block of zeros), and 32 signed bytes
# $q = \operatorname{round}(x \cdot i_d)$, rounded half away from zero as C's `roundf` does. llama.cpp multiplies by the
# reciprocal: in floating point $x \cdot (1/d)$ is not always $x / d$, and one code in a block can differ. **Q4_0** is
# 18 bytes: $d = x_{\max} / (-8)$, where $x_{\max}$ is the block's value of largest magnitude *with its sign*, so that
# value lands exactly on code $-8$; each code is stored as $q + 8$ in $0, \dots, 15$, two to a byte: value $j$ in the
# low nibble of byte $j$, value $j + 16$ in its high nibble. Both are int8 and int4 with $g = 32$; Q4_0 spends all 16
# codes where the symmetric int4 above leaves $-8$ unused, at a price: its grid is lopsided. Codes $-8, \dots, 7$ reach
# $x_{\max}$ on one side but only $7 \lvert d \rvert = \tfrac78 \lvert x_{\max} \rvert$ on the other, so a value there
# beyond $\tfrac{15}{16} \lvert x_{\max} \rvert$ is clipped, off by up to a whole step. These bytes are those of
# llama.cpp's reference quantizer, which llama-quantize runs when no importance matrix is given (with `--imatrix` it
# searches other scales and writes other bytes).
#
# **Try it first**: exercise 222 is one Q8_0 block's 34 bytes by hand (`python practice/judge.py start 222`, or the cell
# below).

# %% [markdown] lang="zh"
# ## 4. 逐字节看 llama.cpp 的块
# GGUF 文件（llama.cpp 的格式）依次是文件头、元数据、每个张量的名字、形状和偏移量、按对齐要求补的填充，最后才是各张量的
# 数据。量化张量的数据里，每行切成 32 个值一**块**，一块接一块，每块独立存放：先是一个 fp16 的缩放因子 $d$，然后是各个
# 码。**Q8_0** 一块 34 字节：$d = \max \lvert x \rvert / 127$，取倒数 $i_d = 1 / d$（全零的块取 0），再得到 32 个有符
# 号字节 $q = \operatorname{round}(x \cdot i_d)$，舍入方式和 C 的 `roundf` 一样，恰在一半时向远离零的方向取整。
# llama.cpp 乘的是倒数：浮点运算里 $x \cdot (1/d)$ 不一定等于 $x / d$，一块里可能有一个码不同。**Q4_0** 一块 18 字节：
# $d = x_{\max} / (-8)$，其中 $x_{\max}$ 是块内绝对值最大的那个值，*保留符号*，这样它正好落在码 $-8$ 上；每个码存成
# $q + 8$，取值 $0, \dots, 15$，一个字节放两个：第 $j$ 个值放在第 $j$ 个字节的低半字节，第 $j + 16$ 个值放在它的高半字
# 节。两者就是 $g = 32$ 的 int8 和 int4；上面的对称 int4 不用 $-8$，Q4_0 则把 16 个码全用上了，代价是格点不对称：码
# $-8, \dots, 7$ 在一侧能到 $x_{\max}$，另一侧只到 $7 \lvert d \rvert = \tfrac78 \lvert x_{\max} \rvert$，所以另一侧
# 超过 $\tfrac{15}{16} \lvert x_{\max} \rvert$ 的值会被截断，误差最多一整个步长。这些字节是 llama.cpp 参考量化器写出
# 的字节；不给重要性矩阵时，llama-quantize 跑的就是它（加上 `--imatrix` 时，它会搜索别的缩放因子，写出的字节也不同）。
#
# **先自己试试**：练习 222 是手写一个 Q8_0 块的 34 个字节（`python practice/judge.py start 222`，或者用下面的单元格）。


# %%
def q8_0_block(x):
    raise NotImplementedError  # your code: the 34 bytes (34,) uint8 of 32 fp32 values


def q8_0_values(block):
    raise NotImplementedError  # your code: the 32 fp32 values a block of 34 bytes holds


book.attempt(222, q8_0_block, q8_0_values)

# %% [markdown]
# The first block of the row above, read back from its bytes:

# %% [markdown] lang="zh"
# 把上面那一行的第一块从字节里读回来：

# %%
block = w[:1, :32]  # (1, 32): one block
b8, b4 = quant.gguf_bytes(block, "Q8_0"), quant.gguf_bytes(block, "Q4_0")
d8, = struct.unpack("<e", b8[:2])  # little-endian fp16
codes8 = list(struct.unpack("<32b", b8[2:]))  # 32 signed bytes
print(tr(f"Q8_0, {len(b8)} bytes: {b8[:2].hex(' ')} | {b8[2:].hex(' ')}",
         f"Q8_0，{len(b8)} 字节：{b8[:2].hex(' ')} | {b8[2:].hex(' ')}"))
same8 = torch.equal(torch.tensor(codes8) * torch.tensor(d8), quant.from_gguf_bytes(b8, "Q8_0", (1, 32))[0])
print(tr(f"  d = {d8:.6g} (fp16), codes {codes8[:8]} ...; d · q equal to from_gguf_bytes: {same8}",
         f"  d = {d8:.6g}（fp16），码 {codes8[:8]} ...；d · q 与 from_gguf_bytes 是否一致："
         f"{tr('True', '是') if same8 else tr('False', '否')}"))
d4, = struct.unpack("<e", b4[:2])
nibbles = [byte & 15 for byte in b4[2:]] + [byte >> 4 for byte in b4[2:]]  # values 0..15, then 16..31
print(tr(f"Q4_0, {len(b4)} bytes: {b4[:2].hex(' ')} | {b4[2:].hex(' ')}",
         f"Q4_0，{len(b4)} 字节：{b4[:2].hex(' ')} | {b4[2:].hex(' ')}"))
same4 = torch.equal((torch.tensor(nibbles) - 8) * torch.tensor(d4), quant.from_gguf_bytes(b4, "Q4_0", (1, 32))[0])
print(tr(f"  d = {d4:.6g} (fp16, the sign of −x_max), codes − 8: {[n - 8 for n in nibbles[:8]]} ...; d · (q − 8) "
         f"equal to from_gguf_bytes: {same4}",
         f"  d = {d4:.6g}（fp16，符号与 −x_max 相同），码 − 8：{[n - 8 for n in nibbles[:8]]} ...；d · (q − 8) 与 "
         f"from_gguf_bytes 是否一致：{tr('True', '是') if same4 else tr('False', '否')}"))
stored = {}  # {format: (bits per weight, relative error)} of the whole tensor
for fmt, ours in (("Q8_0", "int8"), ("Q4_0", "int4")):
    data = quant.gguf_bytes(w, fmt)
    back = quant.from_gguf_bytes(data, fmt, tuple(w.shape))
    stored[fmt] = (8 * len(data) / w.numel(), rel_error(w, back))
    print(tr(f"{name} as {fmt}: {len(data):,} bytes = {stored[fmt][0]:.2f} bits per weight, relative "
             f"error {stored[fmt][1]:.2e} ({ours} above: {rel_error(w, schemes[ours](w)):.2e})",
             f"{name} 存成 {fmt}：{len(data):,} 字节 = 每个权重 {stored[fmt][0]:.2f} 比特，相对误差 "
             f"{stored[fmt][1]:.2e}（上面的 {ours}：{rel_error(w, schemes[ours](w)):.2e}）"))
blocks = w.reshape(-1, 32)  # Q4_0's blocks, (n, 32)
x_max = blocks.gather(1, blocks.abs().argmax(1, keepdim=True))  # (n, 1), with its sign
d = x_max / -8  # as the writer computes it
clipped = ((blocks * x_max < 0) & (blocks.abs() > 15 / 16 * x_max.abs())).any(1)  # past the short side's reach
off = ((blocks - back.reshape(-1, 32)).abs() / d.half().float().abs()).nan_to_num(0)  # in steps of the stored d
# (a block of zeros: 0 / 0, no error)
print(tr(f"Q4_0: {float(clipped.float().mean()):.1%} of the {len(blocks):,} blocks clip a value on their short side; "
         f"the worst error is {float(off.max()):.2f} step (at most 0.5 without clipping)",
         f"Q4_0：{len(blocks):,} 个块里有 {float(clipped.float().mean()):.1%} 在短的一侧截断了值；最大误差 "
         f"{float(off.max()):.2f} 个步长（不截断时最多 0.5）"))

# %% [markdown]
# Q8_0's scale per 32 weights costs half a bit more than int8 per channel and gains little on weights without outliers;
# Q4_0's extra code $-8$ makes its step $x_{\max} / 8$ instead of $x_{\max} / 7$, a little finer than symmetric int4's,
# and clips what its short side cannot reach (the line above counts the blocks it clips here). Every scheme so far on
# one plot, each at the bits it pays, the scales included:

# %% [markdown] lang="zh"
# Q8_0 每 32 个权重一个缩放因子，比按通道的 int8 多花半个比特，对没有离群值的权重收益不大；Q4_0 多出的码 $-8$ 让步长变成
# $x_{\max} / 8$ 而不是 $x_{\max} / 7$，比对称 int4 略细，但短的一侧够不着的值会被截断（上面最后一行数了这里有多少块被截
# 断）。把到目前为止的所有方案画在一张图上，每个方案都按它实际付出的比特数（含缩放因子）来比：

# %%
curves = {label: [(quant.bits_per_weight(4, g, zero_bits=16 if label == "int4+zero" else 0), e, g)
                  for g, e in zip(groups, errs)] for label, errs in by_group.items()}
points = {"int8": (ch12.bits("int8", w.shape[1]), rel_error(w, schemes["int8"](w))), **stored}
book.show("ch12-bits", ch12.bits_figure, curves, points,
          title=tr(f"{name}: relative error against bits per weight{TAG}",
                   f"{name}：相对误差与每个权重的比特数{TAG}"))

# %% [markdown]
# At equal bits the curves can be read straight across: a point lower at the same bits is the better use of them. The
# finished module writes both blocks for a whole tensor at once and reads Q4_K, llama.cpp's 4-bit format with 256-value
# super-blocks (its writer searches for the best scales, a story of its own):

# %% [markdown] lang="zh"
# 比特数相同时，直接上下比较就行：同样的比特数，点越低，比特花得越值。写好的模块一次为整个张量写出这两种块，还能读取
# Q4_K，即 llama.cpp 以 256 个值为一个超级块的 4 比特格式（写 Q4_K 要搜索最优的缩放因子，这里不展开）：

# %%
book.listing("qwen/gguf_blocks.py")

# %% [markdown]
# ## 5. The error, per class of tensor
# The same three schemes on every projection of the checkpoint, grouped by what the tensor does: the embedding table
# (which is also the head), the attention projections, the DeltaNet projections (`in_proj_qkv`, `in_proj_z`,
# `out_proj`), the small `in_proj_a/b` (16 rows in the 0.8B: they make the decay and $\beta$ of each value head), and
# the MLPs. The error of a class is $\lVert w - \hat{w} \rVert / \lVert w \rVert$ over all its tensors together; beside
# it, how far each row's largest weight stands out, $\max \lvert w \rvert / \mathrm{RMS}$ per row (averaged over the
# class's rows), which is what stretches a shared scale:

# %% [markdown] lang="zh"
# ## 5. 按张量类别看误差
# 把这三种方案用在检查点的每个投影上，按张量的用途分组：嵌入表（它也是输出头）、注意力投影、DeltaNet 投影
# （`in_proj_qkv`、`in_proj_z`、`out_proj`）、很小的 `in_proj_a/b`（0.8B 里只有 16 行，算出每个值头的衰减和 $\beta$），
# 以及 MLP。一类张量的误差，是把该类所有张量放在一起算的 $\lVert w - \hat{w} \rVert / \lVert w \rVert$；旁边再列出每行最
# 大的权重有多突出，即每行的 $\max \lvert w \rvert / \mathrm{RMS}$（对该类所有行取平均），共享的缩放因子正是被它撑大的：

# %%
tensors = {n for n in W if ch12.tensor_class(n) and not (n == "lm_head.weight" and W.where[n] == W.where.get(
    "embed_tokens.weight"))}  # a tied head is the embedding's tensor: counted once
sums = {label: {c: [0.0, 0.0] for c in ch12.CLASSES} for label in schemes}  # ‖w − ŵ‖², ‖w‖²
peaks = {c: [0.0, 0] for c in ch12.CLASSES}  # Σ over rows of max|w| / RMS, rows
misfits = set()  # input widths that are not a multiple of the group: int4 keeps them in int8, as the live model does
for n in sorted(tensors):
    t = W[n].float()
    c = ch12.tensor_class(n)
    for label, roundtrip in schemes.items():
        if label != "int8" and held_as("int4", t.shape[1]) == "int8":  # int4's groups of 32 do not fit
            misfits.add(t.shape[1])
            roundtrip = schemes["int8"]
        acc = sums[label][c]
        acc[0] += float((t - roundtrip(t)).pow(2).sum())
        acc[1] += float(t.pow(2).sum())
    rms = t.pow(2).mean(1).sqrt()
    peaks[c][0] += float((t.abs().amax(1) / rms.clamp_min(1e-30)).sum())
    peaks[c][1] += t.shape[0]
class_errors = {label: {c: (e / n2) ** 0.5 for c, (e, n2) in by.items() if n2} for label, by in sums.items()}
for c in ch12.CLASSES:
    each = [f"{ch12.scheme_name(s)} {class_errors[s][c]:.2e}" for s in schemes if c in class_errors[s]]
    en, zh = ", ".join(each), "，".join(each)
    peak = peaks[c][0] / max(peaks[c][1], 1)
    print(tr(f"{ch12.class_name(c):22s} {en}; max|w|/RMS per row {peak:.1f}",
             f"{ljust(ch12.class_name(c) + '：', 15)}{zh}；每行 max|w|/RMS {peak:.1f}"))
if misfits:
    print(tr(f"input widths {sorted(misfits)} are not a multiple of the group 32: those tensors stay int8 per output "
             f"channel in the int4 rows, as the live model keeps them",
             f"输入宽度 {sorted(misfits)} 不是组大小 32 的倍数：int4 那几列里，这些张量保持按输出通道的 int8，和运行中"
             f"的模型一样"))
if SYNTHETIC:
    n_row = cfg.hidden_size
    typical = (2 * math.log(n_row)) ** 0.5
    print(tr(f"random normal rows of n = {n_row} weights: max|w|/RMS is near √(2·ln(n)) = {typical:.1f} in every "
             f"class, by construction; trained rows with outliers stand higher",
             f"正态随机的行，每行 n = {n_row} 个权重：各类的 max|w|/RMS 都接近 √(2·ln(n)) = {typical:.1f}，"
             f"这是构造决定的；训练过的权重有离群值，这个数会更高"))

# %%
book.show("ch12-classes", ch12.class_figure, class_errors,
          title=tr(f"Relative error of the weights per tensor class{TAG}", f"各类张量权重的相对误差{TAG}"))

# %% [markdown]
# On the synthetic checkpoint every class is drawn from a normal distribution, so the classes differ only by their row
# lengths (int8's one scale per row) and come out alike: what trained weights do differently — rows with a few large
# values, the head's rare tokens — shows on a real checkpoint, in the error and in $\max \lvert w \rvert /
# \mathrm{RMS}$. A weight's relative error is not yet the model's: an error in `in_proj_a` moves a decay that is
# exponentiated and multiplied into the state at every token, one in the head moves every logit directly. Section 6
# measures at the output.
#
# **What stays as it is.** The norms' weights, `A_log`, `dt_bias` and the conv kernels are not quantized:

# %% [markdown] lang="zh"
# 在合成检查点上，每一类都是从正态分布抽出来的，各类只差在行长（int8 每行一个缩放因子），结果也就差不多；训练过的权重有
# 哪些不同——某些行有几个大值、输出头里有罕见 token——要用真实检查点才看得到，误差和 $\max \lvert w \rvert / \mathrm{RMS}$
# 都会显出来。权重的相对误差还不等于模型的误差：`in_proj_a` 的误差会改变衰减率，而衰减要取指数，每个 token 都要乘进状
# 态；输出头的误差则直接改变每个 logit。第 6 节在输出端测量。
#
# **哪些保持原样。** 各归一化层的权重、`A_log`、`dt_bias` 和卷积核都不量化：

# %%
kept = {n: s for n, s in tensor_shapes(real).items() if ch12.tensor_class(n) is None}
kept_numbers = sum(torch.Size(s).numel() for s in kept.values())
all_numbers = sum(torch.Size(s).numel() for s in tensor_shapes(real).values())
print(tr(f"real Qwen3.5-0.8B: {len(kept)} tensors stay as they are (norms, conv kernels, A_log, dt_bias): "
         f"{kept_numbers:,} numbers, {kept_numbers / all_numbers:.3%} of the text model's; "
         f"{bf16_step['kept'] / 1e6:.2f} MB of a bf16 decode step",
         f"真实 Qwen3.5-0.8B：{len(kept)} 个张量保持原样（归一化层、卷积核、A_log、dt_bias），共 "
         f"{kept_numbers:,} 个数，占文本模型的 {kept_numbers / all_numbers:.3%}；在 bf16 的一个解码步里占 "
         f"{bf16_step['kept'] / 1e6:.2f} MB"))

# %% [markdown]
# They are a fraction of a percent of the bytes, so quantizing them would save nothing worth having, and they are the
# numbers an error hurts most: a norm's weight scales a whole channel at every layer; `A_log` and `dt_bias` set each
# head's decay through an exponential (a rounding there changes how fast the state forgets, at every token); a conv
# kernel has 4 taps per channel, so a scale per 32 weights would span 8 channels of different sizes. The published
# checkpoints store `A_log` and the DeltaNet's norm in fp32, which fits this reasoning, though the checkpoint does not
# say why. `in_proj_a` feeds the same exponential, through a projection of the input, and is just as small (1.2 MB with
# `in_proj_b`, 0.08 % of a decode step in bf16), yet it is quantized here with the other projections: whether keeping it
# helps is one of the measurements in "Try this".

# %% [markdown] lang="zh"
# 它们只占字节数的不到百分之一，量化它们几乎省不了什么；而它们恰恰最怕误差：归一化层的权重在每一层缩放一整个通
# 道；`A_log` 和 `dt_bias` 经过指数运算决定每个头的衰减（这里的一点舍入会改变状态遗忘的快慢，而且每个 token 都受影响）；
# 卷积核每个通道只有 4 个抽头，每 32 个权重共用一个缩放因子，就会跨过 8 个大小不一的通道。已发布的检查点把 `A_log` 和
# DeltaNet 的归一化权重存成 fp32，与这个道理相符，不过检查点本身并没有说明原因。`in_proj_a` 经由输入的一个投影，进入同一
# 个指数运算，而且同样很小（连同 `in_proj_b` 共 1.2 MB，在 bf16 的一个解码步里占 0.08 %），这里却和其他投影一起量化了：
# 保留它有没有好处，留给“动手试试”去测。

# %% [markdown]
# ## 6. The error at the output
# What matters is what the model says. Feed the same text to the model with its own weights and with the quantized ones,
# and compare, at every position, the two next-token distributions (teacher-forced: both read the text, not their own
# output, so one early difference does not derail the rest). Two measures: the **KL divergence**
# $\mathrm{KL}(p \,\|\, q) = \sum p \cdot (\log p - \log q)$ of the quantized model's distribution $q$ from the
# reference's $p$, in nats (0 when they are equal), and **top-1 agreement**, the fraction of positions whose most likely
# token is the same. The text is the opening of *Alice's Adventures in Wonderland* (Lewis Carroll, 1865, in the public
# domain), shipped in `book/ch12.py`.
#
# **Try it first**: exercise 224 is the KL of the next-token distributions and the top-1 agreement
# (`python practice/judge.py start 224`, or the cell below).

# %% [markdown] lang="zh"
# ## 6. 输出端的误差
# 真正要紧的是模型输出了什么。把同一段文本分别喂给原始权重的模型和量化权重的模型，在每个位置比较两者下一个 token 的分
# 布。这里用的是 teacher forcing（每一步都喂入真实文本，而不是模型自己的输出）：两个模型读的都是这段文本，前面出现一处不
# 同，也不会把后面全带偏。度量有两个：一是量化模型的分布 $q$ 相对参考分布 $p$ 的 **KL 散度**
# $\mathrm{KL}(p \,\|\, q) = \sum p \cdot (\log p - \log q)$，单位是 nat（两个分布相同时为 0）；二是 **top-1 一致率**，
# 即最可能的 token 相同的位置占多大比例。文本用的是《爱丽丝梦游仙境》（Lewis Carroll，1865，已进入公有领域）的开头，存放
# 在 `book/ch12.py` 里。
#
# **先自己试试**：练习 224 是计算下一个 token 分布的 KL 和 top-1 一致率（`python practice/judge.py start 224`，或者用下
# 面的单元格）。

# %%
def next_token_kl(ref_logits, logits):
    raise NotImplementedError  # your code: KL(p ‖ q) per position, p from ref_logits, q from logits; fp64 (...)


def top1_agreement(ref_logits, logits):
    raise NotImplementedError  # your code: the fraction of positions whose argmax agrees, a float


book.attempt(224, next_token_kl, top1_agreement)

# %% [markdown]
# The finished functions are `qwen.measure.next_token_kl` and `top1_agreement`. The quantized weights come from
# `qwen.quantized.fake_quantize(model, scheme)`: it replaces, in place, each projection's, the head's and the
# embedding's weight by the numbers its codes stand for (`"int4"` is int4 with a zero point there, the form the live
# model of section 7 uses; `symmetric=True` the symmetric one). The model computes in fp32 here, so that the weights are
# the only difference; the checkpoint's own weights computed in bf16 show what rounding alone does.

# %% [markdown] lang="zh"
# 写好的函数是 `qwen.measure.next_token_kl` 和 `top1_agreement`。量化后的权重由
# `qwen.quantized.fake_quantize(model, scheme)` 生成：它原地把每个投影、输出头和嵌入的权重替换成码所代表的数值（在这个函
# 数里，`"int4"` 指带零点的 int4，即第 7 节运行模型用的形式；`symmetric=True` 才是对称的那种）。这里模型用 fp32 计算，让
# 权重成为唯一的差别；另外用 bf16 跑一遍检查点的原始权重，看看单是舍入会带来多大影响。

# %%
tok = load_tokenizer(args.checkpoint.folder)
every = tok.encode(ch12.TEXT)
# random weights show nothing more over the whole text than over its start: there, its first 64 tokens (5x faster)
text_ids = torch.tensor([every[:64] if SYNTHETIC else every], device=dev)  # (1, T)
portion = "" if text_ids.shape[1] == len(every) else tr(
    f" (its first {text_ids.shape[1]} of {len(every)}: on random weights the rest adds only time)",
    f"（共 {len(every)} 个，只取前 {text_ids.shape[1]} 个：权重是随机的，多算只会多花时间）")
model = load_model(args.checkpoint, dtype=torch.float32, device=dev)  # fp32: the quantization is the only difference
reference = model(text_ids)[0].cpu()  # (T, V); compared on the CPU, in fp64 (which Apple's MPS lacks)
bf16 = load_model(args.checkpoint, dtype=torch.bfloat16, device=dev)
logits = {"bf16": bf16(text_ids)[0].float().cpu()}  # rounding alone
del bf16  # each model is let go once its logits are taken: at the real 0.8B's shapes a copy is gigabytes
for label, scheme, symmetric in (("int8", "int8", False), ("int4", "int4", True), ("int4+zero", "int4", False)):
    for n, p in model.named_parameters():  # back to the checkpoint's weights (the tied head is one parameter)
        if ch12.tensor_class(n):
            p.copy_(W[n])
    logits[label] = fake_quantize(model, scheme, 32, symmetric)(text_ids)[0].cpu()
del model
kl = {label: measure.next_token_kl(reference, x) for label, x in logits.items()}  # (T,) each
top1 = {label: measure.top1_agreement(reference, x) for label, x in logits.items()}
flat = tr("; random weights: nearly flat distributions, so top-1 agreement says little",
          "；随机权重的分布几乎是平的，所以 top-1 一致率说明不了什么") if SYNTHETIC else ""
print(tr(f"teacher-forced on {text_ids.shape[1]} tokens of the text{portion}, against the checkpoint's weights in fp32"
         f"{flat}:",
         f"用 teacher forcing 读这段文本的 {text_ids.shape[1]} 个 token{portion}，与 fp32 的检查点权重对照{flat}："))
for label in logits:
    what = tr("(bf16 arithmetic, the same weights)", "（bf16 运算，权重不变）") if label == "bf16" else \
        tr("(fake-quantized weights, fp32 arithmetic)", "（伪量化权重，fp32 运算）")
    k = kl[label]
    print(tr(f"  {label:9s}: KL mean {k.mean():.2e}, median {k.median():.2e}, 99% {k.quantile(0.99):.2e}, max "
             f"{k.max():.2e} nats; top-1 agreement {top1[label]:.1%} {what}",
             f"  {ljust(ch12.scheme_name(label) + '：', 13)}KL 平均 {k.mean():.2e}，中位数 {k.median():.2e}，"
             f"99% 分位 {k.quantile(0.99):.2e}，最大 {k.max():.2e} nat；top-1 一致率 {top1[label]:.1%}{what}"))

# %%
book.show("ch12-output", ch12.output_figure, {k: float(v.mean()) for k, v in kl.items()}, top1,
          title=tr(f"The next-token distribution against the checkpoint's own weights, teacher-forced{TAG}",
                   f"下一个 token 的分布：与检查点原始权重对比，teacher forcing{TAG}"))

# %% [markdown]
# bf16 arithmetic on the same weights is the yardstick: its rounding moves the distribution too, and a scheme whose KL
# is of the order of bf16's own costs about what running in bf16 costs. The mean alone hides the tail: a few positions
# where the top token flips can carry most of the divergence, so the line gives the median, the 99th percentile and the
# largest too, as llama.cpp's `llama-perplexity --kl-divergence` does (its "same top p" is the top-1 agreement here).
# On the synthetic checkpoint these numbers are those of random weights: its distributions are nearly flat over 248,320
# tokens (the perplexity below is about the vocabulary's size), so the most likely token is a narrow winner that any
# rounding can unseat, and top-1 agreement says little there. On a trained model the top token usually leads by a
# margin; a real checkpoint shows it.
#
# **Perplexity.** On a real checkpoint the same logits give the text's perplexity, exp of the mean negative log
# probability of each next token: how surprised the model is by the text, and how much quantization adds. One famous
# page is a small yardstick: a trained model has likely read Alice's opening many times, which makes its perplexity
# optimistic, and a few hundred tokens give a noisy mean. Compare the schemes with each other on it, not with numbers
# measured on other text.

# %% [markdown] lang="zh"
# 同样权重下的 bf16 运算是参照标尺：它的舍入也会让分布偏移；某个方案的 KL 如果和 bf16 本身的在同一量级，它的代价就和用
# bf16 运行差不多。只看平均值会漏掉长尾：少数几个位置上排第一的 token 换了，可能就占了大部分散度，所以上面还列出中位
# 数、99% 分位和最大值，llama.cpp 的 `llama-perplexity --kl-divergence` 也是这样报的（它的 “same top p” 就是这里的
# top-1 一致率）。在合成检查点上，这些都是随机权重的数字：分布在 248,320 个 token 上几乎是平的（下面的困惑度差不多就是
# 词表大小），最可能的 token 只是险胜，任何舍入都能把它挤下去，所以这时 top-1 一致率说明不了什么。训练过的模型，排第一
# 的 token 通常领先一截，换成真实检查点就能看到。
#
# **困惑度。** 在真实检查点上，用同样的 logits 还能算出这段文本的困惑度：对每个下一个 token 的负对数概率取平均，再取指
# 数。它衡量模型对这段文本有多“意外”，以及量化让这份意外增加了多少。只用一页名著当标尺偏小：训练过的模型多半读过很多遍
# 《爱丽丝》的开头，困惑度会偏乐观；几百个 token 的平均值也有噪声。在这段文本上只适合拿各方案互相比，不要和别的文本上测
# 的数比。

# %%
targets = text_ids[0, 1:].cpu()
perplexity = {label: float(torch.nn.functional.cross_entropy(x[:-1].double(), targets).exp())
              for label, x in {"fp32": reference, **logits}.items()}
each = [f"{ch12.scheme_name(k)} {v:,.0f}" if SYNTHETIC else f"{ch12.scheme_name(k)} {v:.3f}"
        for k, v in perplexity.items()]
en, zh = ", ".join(each), "，".join(each)
if SYNTHETIC:
    print(tr(f"perplexity of the text (synthetic weights: random, so near the vocabulary's size, "
             f"{cfg.vocab_size:,}; a real checkpoint gives a meaningful number): {en}",
             f"这段文本的困惑度（合成权重是随机的，所以接近词表大小 {cfg.vocab_size:,}；"
             f"真实检查点才给得出有意义的数）：{zh}"))
else:
    print(tr(f"perplexity of the text: {en}", f"这段文本的困惑度：{zh}"))

# %% [markdown]
# ## 7. The quantized live model
# Fake quantization measures the error; the speed needs a model that *holds* the codes and multiplies with them.
# `qwen.fast.load_fast(path, dtype, quant="int8" | "int4")` returns the fast model of chapter 9, called exactly like it,
# whose projections (the joined ones too) and tied head hold codes and scales (`QuantLinear`), and whose embedding
# dequantizes only the rows a prompt reads. On a CPU with bf16 activations each product is one of torch's packed kernels
# (`torch._weight_int8pack_mm`; `torch._weight_int4pack_mm_for_cpu`, groups of 32 with a zero point), which read the
# codes and apply the scales inside the product; elsewhere (fp32, a GPU, MPS) a block of rows is dequantized and
# `F.linear` called. Which one runs is a capability, never a timing. The live model keeps the codes $q$ and the scales
# $s$ rounded to the model's dtype, and the int8 kernel sums $x \cdot q$ in fp32 and scales the sum, rounding once at
# the end (int4 likewise per group). `fake_quantize` writes the weight $q \cdot s$ out as an ordinary weight: on a bf16
# teaching model that weight is rounded to bf16 once more, to 8 significant bits. So the bf16 twin is the live model's
# weights rounded again, and the two differ by that rounding, not only by the order of their sums. Written into an fp32
# model with the scales rounded as the live model's (`fake_quantize(..., scale_dtype=torch.bfloat16)`) the weights are
# exact: that twin is the one tests/test_quantized.py proves the live model against. Each line below measures both gaps
# on one projection:

# %% [markdown] lang="zh"
# ## 7. 运行中的量化模型
# 伪量化只用来测误差；要提速，得有一个真正*存着*码、直接拿码做乘法的模
# 型。`qwen.fast.load_fast(path, dtype, quant="int8" | "int4")` 返回第 9 章的快速模型，调用方式完全相同，只是它的投影
# （包括合并后的投影）和共享的输出头存的是码和缩放因子（`QuantLinear`），嵌入也只反量化提示词用到的那几行。在 CPU 上、激
# 活为 bf16 时，每次乘法都调用 torch 的一个打包
# kernel（`torch._weight_int8pack_mm`；`torch._weight_int4pack_mm_for_cpu`，32 个一组，带零点），它直接读码，在乘法内部
# 乘上缩放因子；其他情况下（fp32、GPU、MPS）则先把若干行反量化，再调用 `F.linear`。走哪条路径看硬件能力，从不看计时。运
# 行中的模型存的是码 $q$ 和舍入到模型 dtype 的缩放因子 $s$；int8 kernel 用 fp32 累加 $x \cdot q$，再乘缩放因子，最后只舍
# 入一次（int4 按组，也是这样）。`fake_quantize` 则把权重 $q \cdot s$ 当作普通权重写出来：在 bf16 教学模型里，这个权重还
# 要再舍入一次，只剩 8 位有效位。所以 bf16 教学模型的权重是运行模型的权重再舍入一次的结果，两者的差别来自这次舍入，不只
# 是求和顺序。如果写进 fp32 模型，并让缩放因子按运行模型的方式舍入（`fake_quantize(..., scale_dtype=torch.bfloat16)`），
# 权重就是精确的：tests/test_quantized.py 拿来核对运行模型的，正是这个版本。下面每一行都在同一个投影上把两种差距都测出
# 来：

# %%
prompt = tok.encode("Alice was beginning to get very tired of")
prompt_ids = torch.tensor([prompt], device=dev)
x_mid = torch.randn(1, cfg.intermediate_size, device=dev).to(torch.bfloat16)  # an input of layer 0's down_proj
for scheme in (None, "int8", "int4"):
    live = load_fast(args.checkpoint, dtype=torch.bfloat16, device=dev, quant=scheme)
    teaching = load_model(args.checkpoint, dtype=torch.bfloat16, device=dev)
    w_down = teaching.layers[0].mlp.down_proj.weight  # (d, I) bf16, the checkpoint's
    w_exact = dequantize(*codes(w_down, scheme, dtype=torch.bfloat16)) if scheme else w_down.float()  # q·s in fp32
    exact = torch.nn.functional.linear(x_mid.float(), w_exact)  # (1, d): the live model's numbers, computed exactly
    teaching = fake_quantize(teaching, scheme) if scheme else teaching  # q·s written out, rounded to bf16
    held = sum(t.numel() * t.element_size() for t in (*live.parameters(), *live.buffers()))
    said = tok.decode(list(generate(live, prompt, 8, stop=[])))
    path = live.layers[0].mlp.down_proj.extra_repr() if scheme else tr("bf16 F.linear", "bf16，用 F.linear")
    off = rel_error(exact, live.layers[0].mlp.down_proj(x_mid).float())  # section 3's ‖w − ŵ‖ / ‖w‖
    rounding = rel_error(exact, exact.to(torch.bfloat16).float())  # bf16's own rounding of that product, for scale
    twin = rel_error(exact, torch.nn.functional.linear(x_mid.float(), teaching.layers[0].mlp.down_proj.weight.float()))
    apart = float(measure.next_token_kl(teaching(prompt_ids)[0].float().cpu(), live(prompt_ids)[0].float().cpu()).max())
    print(tr(f"{scheme or 'bf16':5s}: the model holds {held / 1e6:6.1f} MB; layer 0's down_proj ({path}) against the "
             f"exact product of its codes and scales: relative error {off:.1e} (rounding that product to bf16: "
             f"{rounding:.1e}); the bf16 teaching twin's weights give {twin:.1e}; the whole model against that twin: "
             f"KL at most {apart:.1e}; greedy {said!r}{NOISE}",
             f"{scheme or 'bf16'}：模型占用 {held / 1e6:6.1f} MB；第 0 层的 down_proj（{path}）"
             f"与码和缩放因子的精确乘积相比，相对误差 {off:.1e}（把该乘积舍入到 bf16 的误差：{rounding:.1e}）；"
             f"bf16 教学模型的权重算出来是 {twin:.1e}；整个模型与该教学模型相比，KL 最大 {apart:.1e}；"
             f"贪心解码 {said!r}{NOISE}"))
    del live, teaching  # before the next scheme's pair is loaded: two pairs at once would not fit a 16 GB machine

# %% [markdown]
# One projection of the live model is as close to the exact product of its codes and scales as rounding that product to
# bf16 is; the bf16 twin, whose every weight is rounded instead, sits about as far on its own side, so the live model
# and its bf16 twin are about two such roundings apart. Over the whole model such roundings add up; read the KL of each
# line against the first (the plain fast path against the teaching model) and against bf16 arithmetic in section 6. This
# prompt is 8 tokens, under `products.WIDE_ROWS`, so the plain fast path multiplies in bf16, as the bf16 teaching model
# does, and sits closest; the quantized models add the twin's rounding of every weight. On the synthetic checkpoint the
# greedy tokens are random text, and the three may part ways early: a random model's top tokens are near-ties that any
# rounding can swap. The bytes held are the weights' (plus the kept tensors and, for int4 with a tied head, a second,
# row-major copy of the table's codes that the embedding reads: the kernel's tiled layout cannot be read a row at a
# time).

# %% [markdown] lang="zh"
# 运行模型里单个投影的结果，与码和缩放因子精确乘积之间的差距，大致等于把该乘积舍入到 bf16 的误差；bf16 教学模型则是把每
# 个权重各舍入一次，离精确乘积也差不多这么远，只是偏在另一边，所以运行模型和它的 bf16 教学模型大约相差两次这样的舍入。放
# 到整个模型里，这些舍入会累积起来；请把每一行的 KL 和第一行（普通快速路径对照教学模型）比，也和第 6 节的 bf16 运算比。
# 这里的提示词只有 8 个 token，少于 `products.WIDE_ROWS`，所以普通快速路径和 bf16 教学模型一样按 bf16 相乘，离得最近；量
# 化模型还要再加上教学模型对每个权重的那次舍入。在合成检查点上，贪心解码出的是随机文本，三者可能很早就分道扬镳：随机模型
# 排在最前的几个候选几乎打平，任何舍入都可能让它们换位。模型占用的字节主要是权重（再加上保持原样的张量；对于共享的输出
# 头，用 int4 时还要另存一份按行排列的码，供嵌入查表读取：kernel 的分块布局没法一次只读一行）。

# %% [markdown]
# ## 8. The decode, timed
# The bound of section 1 is a ceiling; the speed is what a step takes. One decode step of the live model multiplies
# every projection (joined as qwen/fast.py joins them) and the head by one row. Below, each of those products is built
# at the real 0.8B's shapes, with random bf16 weights (the time does not depend on the values), held as the live model
# holds it (a bf16 `FastLinear`, or a `QuantLinear` with int8 or int4 codes), and timed on one row, best of 3; a step is
# the sum over its products. The rest of a step (the norms, attention over the cache, the DeltaNet state) is left out,
# so the bound beside it counts the products' bytes only:

# %% [markdown] lang="zh"
# ## 8. 实测解码
# 第 1 节的上限只是天花板；真正的速度要看一步实际花多少时间。运行中的模型解码一步，要拿一行输入去乘每个投影（按
# qwen/fast.py 的方式合并）和输出头。下面按真实 0.8B 的形状逐个搭出这些乘法，权重是随机的 bf16（耗时与数值无关），存法
# 和运行模型一样（bf16 的 `FastLinear`，或存 int8、int4 码的 `QuantLinear`），每个只算一行，取 3 次中最快的一次；一步的
# 时间就是这些乘法之和。一步里的其他工作（归一化、对缓存做注意力、DeltaNet 状态）不计，所以旁边的上限也只算这些乘法读的
# 字节：

# %%
step = ch12.step_products(real)  # {(out, in): how many}
timed = ch12.time_step(step, (None, "int8", "int4"), dev)
bound, measured = {}, {}
for scheme, fmt in ((None, "bf16"), ("int8", "int8"), ("int4", "int4+zero")):
    nbytes = ch12.product_bytes(step, fmt)
    bound[fmt], measured[fmt] = read / nbytes, 1 / timed[scheme]
    print(tr(f"real Qwen3.5-0.8B's shapes, {ch12.scheme_name(fmt):9s}: {sum(step.values())} products reading "
             f"{nbytes / 1e6:6.1f} MB take {timed[scheme] * 1e3:5.0f} ms, {measured[fmt]:5.2f} tokens/s; the bound "
             f"{bound[fmt]:5.2f} tokens/s: {measured[fmt] / bound[fmt]:.0%} of it ({nbytes / timed[scheme] / 1e9:.2f} "
             f"GB/s read)",
             f"真实 Qwen3.5-0.8B 的形状，{ljust(ch12.scheme_name(fmt) + '：', 13)}{sum(step.values())} 次乘法读 "
             f"{nbytes / 1e6:6.1f} MB，"
             f"耗时 {timed[scheme] * 1e3:5.0f} ms，{measured[fmt]:5.2f} tokens/s；上限 {bound[fmt]:5.2f} tokens/s："
             f"达到 {measured[fmt] / bound[fmt]:.0%}（读取 {nbytes / timed[scheme] / 1e9:.2f} GB/s）"))
if not has_kernel("int8", dev, torch.bfloat16):
    print(tr(f"{dev}: no packed int8/int4 kernel here, so the quantized products dequantize a block and call F.linear: "
             f"they read more than the plain weight",
             f"{str(dev).upper()}：这里没有 int8/int4 打包 kernel，量化乘法要先反量化一块再调用 F.linear，"
             f"读的比原始权重还多"))

# %%
book.show("ch12-decode", ch12.decode_figure, bound, measured,
          title=tr(f"One decode step's products at the real 0.8B's shapes, on {dev}",
                   f"真实 0.8B 形状下一个解码步的矩阵乘法，在 {str(dev).upper()} 上"))

# %% [markdown]
# Fewer bytes are read, but a quantized product need not read them at the wall: compare the shares above. Where int8 and
# int4 reach a smaller share of their bound than bf16, they gain less than their bytes promise, and on some CPUs
# nothing. The reason is the arithmetic per byte. torch's packed kernels are weight-only: each int8 or int4 code is
# converted to a float and multiplied by a bf16 input, and the sum is taken in fp32 (`_weight_int8pack_mm`,
# `_weight_int4pack_mm_for_cpu`). A bf16 weight takes two bytes, an int8 one a byte, an int4 one half a byte, so per
# byte read the kernel converts and multiplies 2 times (int8) or 4 times (int4) as many numbers as for bf16: with fewer
# bits, the instructions rather than the memory can set the pace. llama.cpp's CPU kernels for Q8_0 and Q4_0 first round
# the input row to 8 bits too, in Q8_0 blocks of 32 (their `vec_dot_type` is Q8_0), then multiply integers: 8-bit ×
# 8-bit (W8A8) or 4-bit × 8-bit (W4A8) products, summed as integers by SIMD instructions, with one float multiply per
# block of 32. That costs a little extra error (the input rounded to 8 bits) and buys speed: `bench/bench_quant.py`
# times our live models against llama.cpp's Q8_0 and Q4_0 files of the same weights, at about the same bytes (a Q4_0
# file keeps the head in Q6_K, section 1).

# %% [markdown] lang="zh"
# 字节确实少读了，但量化乘法不一定能把它们读满：比一比上面的比例。如果 int8、int4 达到的上限比例比 bf16 低，提速就比字节
# 数许诺的少，有的 CPU 上甚至没有提速。原因在于每个字节要做多少运算。torch 的打包 kernel 只量化权重：每个 int8 或 int4
# 码先转成浮点数，再乘 bf16 的输入，用 fp32 累加（`_weight_int8pack_mm`、`_weight_int4pack_mm_for_cpu`）。一个 bf16 权重
# 占两个字节，int8 占一个字节，int4 只占半个字节，所以每读一个字节，kernel 要转换、相乘的数是 bf16 的 2 倍（int8）或 4
# 倍（int4）：比特越少，越可能是指令数而不是内存决定快慢。llama.cpp 针对 Q8_0 和 Q4_0 的 CPU kernel 则先把输入行也舍入到
# 8 比特，按 32 个一块存成 Q8_0（它们的 `vec_dot_type` 是 Q8_0），然后做整数乘法：8 比特 × 8 比特（W8A8）或 4 比特 × 8
# 比特（W4A8），用 SIMD 指令按整数累加，每 32 个数只做一次浮点乘法。代价是多一点误差（输入被舍入到 8 比特），换来的是速
# 度：`bench/bench_quant.py` 在同一份权重、大致相同的字节数下（Q4_0 文件把输出头存成 Q6_K，见第 1 节），把我们的运行模型
# 和 llama.cpp 的 Q8_0、Q4_0 文件放在一起计时。

# %% [markdown]
# ## Try this
#
# - In section 3, quantize a row with one weight multiplied by 50 (an outlier, as trained weights have): how much does
#   int8 per channel lose on the rest of the row, and int4 with $g = 32$?
# - In section 6, quantize only the embedding/head class, then only the MLPs, with `fake_quantize`'s `only`
#   (`only=lambda n: ch12.tensor_class(n) == "MLP"`): which one moves the next-token distribution more per byte saved?
#   Then everything but `in_proj_a/b`: does keeping them in bf16 lower the KL?
# - With a real checkpoint (`--model Qwen/Qwen3.5-0.8B`): compare the perplexities of section 6, and the per-class
#   errors of section 5 with the synthetic ones.
#
# ## Show the proof
# The blocks against llama.cpp's own arithmetic, as the `gguf` package (llama.cpp's Python library, installed with the
# course's `proofs` extra, like transformers) quantizes: the bytes of `qwen.quant.gguf_bytes` for the weight of
# sections 3 and 4 against `gguf.quants.quantize`'s, and the values `from_gguf_bytes` reads against
# `gguf.quants.dequantize`'s. Both are exact: equal bytes, equal values (tests/test_quant.py checks edge blocks too: all
# zeros, one huge value, the extreme negative, tiny values).

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 在第 3 节里，把一行中的某个权重乘以 50（制造一个离群值，训练过的权重里就有这种值）再量化：按通道的 int8 在这一行其余
#   权重上损失多少？$g = 32$ 的 int4 呢？
# - 在第 6 节里，用 `fake_quantize` 的 `only` 参数（`only=lambda n: ch12.tensor_class(n) == "MLP"`）先只量化嵌入/输出
#   头这一类，再只量化 MLP：按每省下一个字节来算，哪一类让下一个 token 的分布偏得更多？再试试除 `in_proj_a/b` 以外全部
#   量化：让它们保持 bf16，KL 会不会降下来？
# - 用真实检查点（`--model Qwen/Qwen3.5-0.8B`）：比较第 6 节的困惑度，再把第 5 节各类张量的误差和合成检查点上的对比一
#   下。
#
# ## 对照验证
# 拿这些块对照 llama.cpp 自己的算法，即 `gguf` 包（llama.cpp 的 Python 库，和 transformers 一样属于课程的 `proofs` 可选
# 依赖）的量化结果：对第 3、4 节用的那个权重，比较 `qwen.quant.gguf_bytes` 与 `gguf.quants.quantize` 输出的字节，以及
# `from_gguf_bytes` 与 `gguf.quants.dequantize` 读出的值。两者都完全一致：字节相同，数值也相同（tests/test_quant.py 还检
# 查了边界情况的块：全零、一个特别大的值、负方向的极值、极小的值）。


# %%
def compare(transformers, w):
    try:
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize, quantize
    except ImportError:
        print(tr("the gguf package is not installed, so the comparison with it is skipped (pip install gguf)",
                 "没有安装 gguf 包，跳过与它的对比（pip install gguf）"))
        return
    for fmt in ("Q8_0", "Q4_0"):
        theirs = quantize(w.numpy(), GGMLQuantizationType[fmt])
        ours = quant.gguf_bytes(w, fmt)
        same = ours == theirs.tobytes()
        values = torch.equal(quant.from_gguf_bytes(ours, fmt, tuple(w.shape)),
                             torch.from_numpy(dequantize(theirs, GGMLQuantizationType[fmt])))
        print(tr(f"{fmt}: {len(ours):,} bytes, equal to gguf's: {same}; the values read back equal gguf's: {values}",
                 f"{fmt}：{len(ours):,} 字节，与 gguf 的字节是否一致："
                 f"{tr('True', '是') if same else tr('False', '否')}；"
                 f"读回的值与 gguf 的是否一致：{tr('True', '是') if values else tr('False', '否')}"))


book.proof(compare, w)

# %% [markdown]
# ## Summary
#
# - A decode step reads every projection once, the tied head included (a third of the 0.8B's bytes), plus the KV cache
#   and the DeltaNet states: $\text{tokens/s} \le \text{read bandwidth} \div \text{those bytes}$. int8 costs a little
#   over 8 bits a weight with its scales, about half of bf16's 16; int4 costs 4.5 bits (symmetric) or 5.0 (with a zero
#   point, the live model's), 28 % or 31 % of bf16's. The caches and the kept tensors do not shrink, so the bound rises
#   by less than 2× and 4×.
# - One-row products in a general matmul kernel may read below the stream's rate: the kernel, not the memory, is then
#   the wall. Weights prepacked once for the kernel, chosen by what the CPU can do, move it; only fewer bytes move the
#   bound.
# - int8 per output channel: $s = \max \lvert w_{\mathrm{row}} \rvert / 127$, about 8 bits per weight. int4 in groups of
#   $g$: symmetric, $s = \max \lvert w_{\mathrm{group}} \rvert / 7$, $4 + 16/g$ bits; with a zero point,
#   $s = (M - m) / 15$ and $w \approx q \cdot s + m$, $4 + 32/g$ bits. Smaller groups, smaller error, more bits.
# - llama.cpp's Q8_0 (34 bytes per 32 weights) and Q4_0 (18 bytes): an fp16 $d$, then the codes; Q8_0's codes are
#   $\operatorname{round}(x \cdot (1/d))$; Q4_0's $d$ is the signed extreme over $-8$, its codes $q + 8$ two to a byte,
#   value $j$ in the low nibble of byte $j$ and value $j + 16$ in its high nibble, and its short side clips. Ours equal
#   the `gguf` package's, byte for byte (llama.cpp's reference quantizer, without an importance matrix).
# - Error is measured, not assumed: per tensor class on the weights, and at the output as the KL of the next-token
#   distributions and the top-1 agreement, against bf16's own rounding as the yardstick. The norms, the conv kernels,
#   `A_log` and `dt_bias` stay as they are: a fraction of a percent of the bytes, and the numbers an error hurts most.
# - The live model, `load_fast(path, dtype, quant="int8" | "int4")`: projections and the tied head hold codes and call
#   torch's packed kernels where the device and dtype have them (a dequantized `F.linear` elsewhere); `fake_quantize`
#   writes $q \cdot s$ into a teaching model, rounded to its dtype (exact in fp32 with the live model's bf16 scales).
# - Timed at the real shapes, a step's products reach only a share of their bound, and torch's weight-only kernels may
#   reach less of it with fewer bits; llama.cpp rounds the input to 8 bits too and sums integers (W8A8, W4A8).
#
# ### Shapes
#
# | what | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | a projection $w$ | (out, in) | e.g. `mlp.gate_proj` (3584, 1024) |
# | int8 codes $q$, scales $s$ | (out, in) int8, (out,) | (3584, 1024), (3584,) |
# | int4 codes $q$, scales $s$ (and minimums $m$) | (out, in), (out, in / g) | (3584, 1024), (3584, 32) at g = 32 |
# | a Q8_0 block; Q4_0 block | 34 bytes; 18 bytes, for 32 weights | |
# | the tied head, as int4 g = 32 | (V, d) codes, (V, d / 32) scales | (248320, 1024), (248320, 32) |
# | teacher-forced logits; KL per position | (T, V); (T,) | (T, 248320); (T,) |

# %% [markdown] lang="zh"
# ## 小结
#
# - 一个解码步要把每个投影读一遍，包括共享的输出头（占 0.8B 字节数的三分之一），再加上键值缓存和 DeltaNet 状
#   态：$\text{tokens/s} \le \text{读取带宽} \div \text{这些字节}$。int8 连同缩放因子每个权重略多于 8 比特，约为 bf16 的
#   16 比特的一半；int4 对称时 4.5 比特，带零点时（运行模型用的就是这种）5.0 比特，分别是 bf16 的 28 % 和 31 %。缓存和
#   保持原样的张量不会变小，所以上限涨不到 2 倍和 4 倍。
# - 通用矩阵乘法 kernel 做单行乘法时，读数据可能比数据流慢：这时瓶颈在 kernel，而不在内存。按 CPU 的能力选用、为 kernel
#   预先重排一次的权重可以缓解这个瓶颈；只有减少字节数，才能抬高上限。
# - 按输出通道的 int8：$s = \max \lvert w_{\mathrm{row}} \rvert / 127$，每个权重约 8 比特。按 $g$ 个一组的 int4：对称时
#   $s = \max \lvert w_{\mathrm{group}} \rvert / 7$，$4 + 16/g$ 比特；带零点时
#   $s = (M - m) / 15$，$w \approx q \cdot s + m$，$4 + 32/g$ 比特。组越小，误差越小，比特数越多。
# - llama.cpp 的 Q8_0（每 32 个权重 34 字节）和 Q4_0（18 字节）：先是一个 fp16 的 $d$，然后是码；Q4_0 的 $d$ 是带符号的
#   极值除以 $-8$，码存成 $q + 8$，一个字节放两个：第 $j$ 个值放在第 $j$ 个字节的低半字节，第 $j + 16$ 个值放在它的高半
#   字节，短的一侧会截断；Q8_0 的码是 $\operatorname{round}(x \cdot (1/d))$。本课写出的字节与 `gguf` 包逐字节一致
#   （llama.cpp 的参考量化器，不用重要性矩阵时）。
# - 误差靠测量，不靠假设：在权重上按张量类别测；在输出端测下一个 token 分布的 KL 和 top-1 一致率，并以 bf16 本身的舍入为
#   标尺。归一化层、卷积核、`A_log` 和 `dt_bias` 保持原样：它们只占字节数的不到百分之一，又最怕误差。
# - 运行中的量化模型 `load_fast(path, dtype, quant="int8" | "int4")`：投影和共享的输出头存的是码，设备和 dtype 支持时调
#   用 torch 的打包 kernel（否则反量化后用 `F.linear`）；`fake_quantize` 把 $q \cdot s$ 写进教学模型，并舍入到它的
#   dtype（fp32 配上运行模型的 bf16 缩放因子时是精确的）。
# - 按真实形状实测，一步的矩阵乘法只能达到上限的一部分；torch 只量化权重的 kernel，比特越少，达到的比例可能越低；
#   llama.cpp 把输入也舍入到 8 比特，按整数累加（W8A8、W4A8）。
#
# ### 形状
#
# | 名称 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | 一个投影 $w$ | (out, in) | 例如 `mlp.gate_proj` (3584, 1024) |
# | int8 的码 $q$、缩放因子 $s$ | (out, in) int8，(out,) | (3584, 1024)，(3584,) |
# | int4 的码 $q$、缩放因子 $s$（及最小值 $m$） | (out, in)，(out, in / g) | g = 32 时为 (3584, 1024)，(3584, 32) |
# | 一个 Q8_0 块；一个 Q4_0 块 | 32 个权重占 34 字节；18 字节 | |
# | 共享的输出头，存成 g = 32 的 int4 | 码 (V, d)，缩放因子 (V, d / 32) | (248320, 1024)，(248320, 32) |
# | teacher forcing 下的 logits；每个位置的 KL | (T, V)；(T,) | (T, 248320)；(T,) |

# %%
book.notation(args.checkpoint)

# %% [markdown]
# File added in this chapter: `book/ch12.py` (`qwen/quant.py`, `qwen/gguf_blocks.py`, `qwen/quantlinear.py` and
# `qwen/quantized.py` are its modules).
#
# ### Exercises
# 222 · one Q8_0 block's 34 bytes by hand; 223 · group-wise int4 with a zero point, quantize and dequantize; 224 · the
# KL of the next-token distributions and the top-1 agreement.
#
# ## How to explain it
#
# 1. **Why fewer bytes is faster.** Generating a token reads the whole model from memory once; the arithmetic is cheap
#    beside it. Store each weight in 4 bits instead of 16 (4.5 to 5 with the scales) and there is under a third as much
#    to read, if the kernel reads it at the memory's speed: measure that too.
# 2. **How a weight becomes 4 bits.** Cut the row into groups of 32, give each group a scale (its largest magnitude over
#    7), and keep each weight as the nearest whole multiple of that scale: an integer from $-7$ to 7. To use it,
#    multiply back.
# 3. **What it costs.** Every weight is off by up to half a step. Whether that matters is measured at the output: how
#    far the next-token distribution moves (KL), and how often the top token changes, against the rounding that running
#    in bf16 already causes.
# 4. **What not to touch.** The few numbers that set scales and decays (norms, `A_log`, `dt_bias`, the conv) are tiny
#    and sensitive: they stay as they are.

# %% [markdown] lang="zh"
# 本章新增的文件：`book/ch12.py`（本章的模块是 `qwen/quant.py`、`qwen/gguf_blocks.py`、`qwen/quantlinear.py` 和
# `qwen/quantized.py`）。
#
# ### 练习
# 222 · 手写一个 Q8_0 块的 34 个字节；223 · 带零点的按组 int4：量化和反量化；224 · 下一个 token 分布的 KL 和 top-1 一致
# 率。
#
# ## 面试怎么答
#
# 1. **为什么字节少就快。** 每生成一个 token，都要把整个模型从内存里读一遍；跟这比起来，计算本身很便宜。每个权重用 4 比
#    特而不是 16 比特存（算上缩放因子是 4.5 到 5 比特），要读的数据就不到三分之一；前提是 kernel 能按内存的速度读，这一
#    点也要实测。
# 2. **权重怎么压到 4 比特。** 把一行切成 32 个一组，每组一个缩放因子（组内绝对值最大的权重除以 7），每个权重四舍五入到
#    这个缩放因子的整数倍，只存那个整数：$-7$ 到 7 之间。用的时候再乘回去。
# 3. **代价是什么。** 每个权重最多偏差半个步长。影响大不大，要在输出端测：下一个 token 的分布偏了多少（KL），最可能的
#    token 有多大比例变了；再拿这些和 bf16 运行本身带来的舍入误差比。
# 4. **哪些不要动。** 决定缩放和衰减的那几个张量（归一化层、`A_log`、`dt_bias`、卷积）很小又很敏感：保持原样。
