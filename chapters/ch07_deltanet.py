"""Chapter 7: Gated DeltaNet by hand — the delta rule token by token, the chunked form that is fast, and the state
that replaces a KV cache.

第 7 章：手写 Gated DeltaNet——逐 token 的 delta 规则、快速的分块形式，以及取代键值缓存的状态。

Run: python chapters/ch07_deltanet.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch07_deltanet.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 7 · Gated DeltaNet: a memory of fixed size
#
# Three layers in four of Qwen3.5 are not softmax attention. Attention keeps every past key and value and compares the
# new query with all of them; a Gated DeltaNet layer keeps one matrix per head, a memory $S$ that maps keys to values,
# and updates it as each token arrives. Its cost per token does not grow with the context, and neither does its cache.
# This chapter writes the memory's update rule (the *delta rule*) token by token, then derives the chunked form that
# computes the same thing with matrix products, proves the two equal, and adds up what the fixed-size state saves.
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── norm.py         (chapter 3: GatedRMSNorm and l2norm are used here)
# ├── family.py       (chapter 6: the sizes of the Qwen3.5 family and their cache, used for the memory bill)
# └── deltanet.py     + causal_conv, recurrent_delta_rule, chunked_delta_rule, DeltaNetCache, GatedDeltaNet
# book/
# └── ch07.py         + this chapter's figures
# bench/
# └── bench_deltanet.py + our chunked kernel against transformers' own, as ratios
# chapters/
# └── ch07_deltanet.py + this chapter's script
# notebooks/
# └── ch07_deltanet.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch07_deltanet.py` (`--figures` saves the figures,
# `--proof` compares with transformers). With the synthetic checkpoint, everything measured on it comes from
# random weights drawn around their initial values: it shows what the code does, not what the trained model does.

# %% [markdown] lang="zh"
# # 第 7 章 · Gated DeltaNet：固定大小的记忆
#
# Qwen3.5 每四层里有三层不用 softmax 注意力。注意力要留着过去所有的键和值，每来一个新的查询，都要和它们逐一比较；Gated
# DeltaNet 层则每个头只存一个矩阵，也就是一块记忆 $S$，负责把键映射到值，每来一个 token 更新一次。这样一来，每个 token
# 的计算量不随上下文变长而增加，缓存也不会变大。本章先逐 token 写出记忆的更新规则（*delta 规则*），再推出分块形式：结
# 果相同，但改用矩阵乘法来算；然后验证两者一致，最后算一算固定大小的状态能省下多少内存。
#
# ```
# qwen/
# ├── weights.py      （第 1 章）
# ├── norm.py         （第 3 章：这里用到 GatedRMSNorm 和 l2norm）
# ├── family.py       （第 6 章：Qwen3.5 系列各尺寸及其缓存，第 5 节算内存时用）
# └── deltanet.py     + causal_conv、recurrent_delta_rule、chunked_delta_rule、DeltaNetCache、GatedDeltaNet
# book/
# └── ch07.py         + 本章的图
# bench/
# └── bench_deltanet.py + 本课的分块 kernel 对比 transformers 自带的 kernel，给出比值
# chapters/
# └── ch07_deltanet.py + 本章的脚本
# notebooks/
# └── ch07_deltanet.ipynb + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的也是这份代码：`python chapters/ch07_deltanet.py`（`--figures` 保存图，`--proof` 与 transformers 对照）。用
# 合成检查点时，测到的每个数都来自在初始值附近随机抽取的权重：它们能说明代码在做什么，说明不了训练好的模型会怎样。

# %%
import math

import torch
import torch.nn.functional as F

import book
from book import ch07
from qwen.course import chapter_args
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.lang import tr
from qwen.norm import RMSNorm, l2norm
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights, fill

args = chapter_args(__doc__)
cfg = args.checkpoint.config
W = Weights(args.checkpoint)
SYNTHETIC = args.checkpoint.synthetic
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %%
book.show("ch07-map", book.model_map.draw, "deltanet")

# %% [markdown]
# The ideas have names and papers: the delta rule as a fast-weight memory is **DeltaNet** (Schlag, Irie and
# Schmidhuber 2021, "Linear Transformers Are Secretly Fast Weight Programmers"); the chunk-parallel form of section 4
# is Yang, Wang, Zhang, Shen and Kim 2024 ("Parallelizing Linear Transformers with the Delta Rule over Sequence
# Length"); the forgetting gate on top is **Gated DeltaNet** (Yang, Kautz and Hatamizadeh 2025, "Gated Delta
# Networks: Improving Mamba2 with Delta Rule"), the layer Qwen3.5 uses.
#
# ## 1. The delta rule as a memory
# Take a matrix $S$ of shape $(d_k, d_v)$ and write pairs into it: key $k$ (a unit vector of $d_k$ numbers) → value $v$
# ($d_v$ numbers). Reading is a product: $S^\top k$. Plain *linear attention* writes by adding,
# $S \leftarrow S + k v^\top$: read back with $k_i$, it returns $v_i$ plus $(k_j \cdot k_i) \, v_j$ for every other pair
# $j$ — exact only when the keys are orthogonal and no key is written twice. The *delta rule* first asks the memory what
# it holds for $k$, then writes only the error:
#
# $$
# S \leftarrow S + \beta \cdot k \, (v - S^\top k)^\top
# $$
#
# with a write strength $\beta$ in $(0, 1)$. With $\beta = 1$ the memory then returns exactly $v$ for $k$ after the
# write, whatever it held before. Below: five pairs in a memory with $d_k = 8$, in float64, read back with their keys.

# %% [markdown] lang="zh"
# 这些想法各有出处。把 delta 规则当作快速权重（fast weight）记忆来用，是 **DeltaNet**（Schlag、Irie、Schmidhuber
# 2021，“Linear Transformers Are Secretly Fast Weight Programmers”）；第 4 节的分块并行形式出自
# Yang、Wang、Zhang、Shen、Kim 2024（“Parallelizing Linear Transformers with the Delta Rule over Sequence Length”）；
# 再加上遗忘门，就是 **Gated DeltaNet**（Yang、Kautz、Hatamizadeh 2025，“Gated Delta Networks: Improving Mamba2 with
# Delta Rule”），也就是 Qwen3.5 用的层。
#
# ## 1. 把 delta 规则看成一块记忆
# 取一个形状为 $(d_k, d_v)$ 的矩阵 $S$，往里写键值对：键 $k$（$d_k$ 维单位向量）→ 值 $v$（$d_v$ 维）。读取就是一次乘法
# ：$S^\top k$。普通的*线性注意力*靠累加来写：$S \leftarrow S + k v^\top$。用 $k_i$ 读回时，除了 $v_i$，还会混进其余每
# 一对 $j$ 的 $(k_j \cdot k_i) \, v_j$；只有键两两正交、且没有哪个键写过两次，读回才是精确的。*delta 规则*则先问记忆
# ：$k$ 现在对应的是什么？然后只把误差写进去：
#
# $$
# S \leftarrow S + \beta \cdot k \, (v - S^\top k)^\top
# $$
#
# 写入强度 $\beta$ 取 $(0, 1)$ 之间的值。取 $\beta = 1$ 时，不管记忆原来存了什么，写完之后用 $k$ 读出的恰好是 $v$。下
# 面用 float64，在 $d_k = 8$ 的记忆里写入五对键值，再用各自的键读回。

# %%
def write(pairs, delta, beta=1.0):
    """Write (key, value) pairs into an empty memory, by the delta rule or by plain addition."""
    k0, v0 = pairs[0]
    S = torch.zeros(k0.shape[0], v0.shape[0], dtype=torch.float64)
    for k, v in pairs:
        S = S + beta * torch.outer(k, v - S.T @ k) if delta else S + torch.outer(k, v)
    return S


def recall_error(S, keys, values):
    return max(float((S.T @ k - v).abs().max()) for k, v in zip(keys, values))


gen = torch.Generator().manual_seed(7)
orthonormal = torch.linalg.qr(torch.randn(8, 8, generator=gen, dtype=torch.float64))[0].T[:5]  # 5 rows, k_i·k_j = 0
random_unit = torch.randn(5, 8, generator=gen, dtype=torch.float64)
random_unit = random_unit / random_unit.norm(dim=1, keepdim=True)  # exactly unit length (no eps)
old, new = torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.randn(5, 4, generator=gen, dtype=torch.float64)
tests = {"orthogonal keys": (list(zip(orthonormal, old)), orthonormal, old),
         "orthogonal keys,\neach written twice": (list(zip(orthonormal, old)) + list(zip(orthonormal, new)),
                                                 orthonormal, new),
         "random unit keys": (list(zip(random_unit, old)), random_unit, old)}
shown = {"orthogonal keys": tr("orthogonal keys", "正交键"),  # each test's name, as printed and drawn
         "orthogonal keys,\neach written twice": tr("orthogonal keys,\neach written twice", "正交键，\n每个写两次"),
         "random unit keys": tr("random unit keys", "随机单位键")}
errors = {}
for name, (pairs, keys, want) in tests.items():
    label = shown[name]
    errors[label] = delta, plain = tuple(recall_error(write(pairs, delta=rule), keys, want) for rule in (True, False))
    print(tr(f"{name.replace(chr(10), ' '):36s} largest recall error: delta rule {delta:.1e}, "
             f"plain linear attention {plain:.1e}",
             f"{label.replace(chr(10), '')}：delta 规则的最大读回误差 {delta:.1e}，普通线性注意力 {plain:.1e}"))
last_key, last_value = random_unit[-1], old[-1]
last = float((write(tests['random unit keys'][0], True).T @ last_key - last_value).abs().max())
print(tr(f"random unit keys, the last pair written: delta rule error {last:.1e}",
         f"随机单位键中最后写入的一对：delta 规则的读回误差 {last:.1e}"))

# %% [markdown]
# - **Orthogonal keys, written once**: both are exact (the error is float64 rounding).
# - **The same keys written twice**, new values replacing old: linear attention returns old + new; the delta rule
#   subtracts what the memory held before writing, so it returns the new value, exactly.
# - **Keys that are not orthogonal** (five random directions in 8 dimensions overlap): both make errors, because a later
#   write to an overlapping key disturbs the earlier ones. The delta rule's last write is exact ($\beta = 1$, unit
#   keys); the earlier ones are partly overwritten (writing them again would bring them closer: each write is one step
#   of gradient descent on that pair's error). Whatever the rule, a memory read as $S^\top k$ returns arbitrary values
#   exactly for at most $d_k$ keys: with more keys than dimensions, some key is a combination of the others, and so is
#   what it reads back. Each of Qwen3.5's heads has $d_k = 128$, and there are many heads.
#
# A memory that is only ever written fills up with stale pairs. The **forgetting gate** multiplies the whole state
# by $e^{g} \le 1$ before each write ($g \le 0$ is computed from the token): whatever was written $n$ tokens ago is read
# back at $e^{g_1 + \dots + g_n}$ of its strength. Each head has its own learned rate, so one head can forget within a
# few tokens while another keeps a memory across hundreds ($e^{g} = 0.99$ halves it only every 69 tokens).

# %% [markdown] lang="zh"
# - **正交键，各写一次**：两种规则都精确（误差只是 float64 的舍入）。
# - **同一组键写两次**，新值替换旧值：线性注意力读出的是旧值 + 新值；delta 规则写入前先减去记忆里原有的内容，所以读出
#   的恰好是新值。
# - **键不正交时**（8 维空间里的五个随机方向互有重叠）：两种规则都有误差，因为后写的键和先写的键有重叠，会干扰先前的写
#   入。delta 规则最后一次写入是精确的（$\beta = 1$，单位键）；更早的几对被部分覆盖了（再写一遍能更接近：每次写入都相
#   当于在这一对的误差上做一步梯度下降）。不管用哪种规则，按 $S^\top k$ 读取的记忆，最多只能让 $d_k$ 个键精确读回任意
#   的值：键数一旦超过维数，总有某个键是其他键的线性组合，它读回的也就是同样的组合。Qwen3.5 每个头的 $d_k = 128$，而头
#   有很多个。
#
# 只写不删的记忆会被过时的数据塞满。**遗忘门**在每次写入前把整个状态乘上 $e^{g} \le 1$（$g \le 0$，由当前 token 算出）
# ：$n$ 个 token 之前写入的内容，读回时只剩原来强度的 $e^{g_1 + \dots + g_n}$。每个头的遗忘速率是各自学出来的：有的头
# 几个 token 就忘光，有的头能记住几百个 token（$e^{g} = 0.99$ 时，每过 69 个 token 才减半）。

# %%
for e in (0.5, 0.9, 0.99):
    half_life = math.log(0.5) / math.log(e)
    print(tr(f"e^g = {e:4}: after 10 tokens {e ** 10:.3f} of a memory is left, after 100 {e ** 100:.2e}; "
             f"half-life {half_life:6.1f} tokens",
             f"e^g = {e:4}：10 个 token 后记忆还剩 {e ** 10:.3f}，100 个后剩 {e ** 100:.2e}；"
             f"半衰期 {half_life:6.1f} 个 token"))

# %%
book.show("ch07-memory", ch07.memory_figure, errors, (0.5, 0.9, 0.99))

# %% [markdown]
# ## 2. The gated delta rule, token by token
# Putting both together, one value head of one layer does, for each token $t$:
#
# 1. **forget**: $S \leftarrow e^{g_t} S$
# 2. **correct**: $S \leftarrow S + k_t \otimes \beta_t (v_t - S^\top k_t)$
# 3. **read**: $o_t = S^\top q_t$
#
# Equivalently $S_t = e^{g_t} (I - \beta_t k_t k_t^\top) S_{t-1} + \beta_t k_t v_t^\top$: a decay, then
# $(I - \beta_t k_t k_t^\top)$ removes a fraction $\beta_t$ of what $k_t$ used to map to (all of it when $\beta_t = 1$,
# where it is a projection), then the new pair. The query $q_t$ reads the memory after token $t$ has written to it.
#
# Around this rule the layer (`layers.N.linear_attn.*`) builds its inputs from the normed hidden state $x$ (B, T, d):
#
# - `in_proj_qkv` gives [q | k | v] ($2 \cdot H_k \cdot d_k + H_v \cdot d_v$ channels), which goes through a **causal
#   depthwise conv**: each channel mixes its last $K = 4$ values (taps `conv1d.weight`, no bias), then silu. It lets a
#   token's q, k, v see the few tokens just before it.
# - $q$ and $k$ are split into $H_k$ heads of $d_k$ and **l2-normalised** (unit length: $k$ must be a direction for the
#   delta rule's correction to be a projection); $q$ is also scaled by $d_k^{-1/2}$. $v$ is split into $H_v$ heads of
#   $d_v$. When $H_v > H_k$ (by their published model cards, the 4B, 9B and 27B have 2 or 3 value heads per key head),
#   value head $h$ uses key head $\lfloor h / (H_v/H_k) \rfloor$.
# - **$\beta = \operatorname{sigmoid}(b)$** with $b$ = `in_proj_b(x)`: how much of its error each token writes, per
#   value head.
# - **$g = -e^{\mathrm{A\_log}} \cdot \operatorname{softplus}(a + \mathrm{dt\_bias})$** with $a$ = `in_proj_a(x)`, in
#   fp32: a learned rate $e^{\mathrm{A\_log}}$ per head times a token-dependent, positive step size; so $g \le 0$, and
#   $e^{g} \in (0, 1]$.
# - The output $o$ $(B, T, H_v, d_v)$ goes through the **gated RMSNorm** of chapter 3 with the gate $z$ =
#   `in_proj_z(x)`, then `out_proj` back to $d$.
#
# **Try it first**: exercise 210 is the causal conv with its state, exercise 211 the rule above (run `python
# practice/judge.py start 210` and `start 211`, or write them in the cells below: the judge grades them here).

# %% [markdown] lang="zh"
# ## 2. 门控 delta 规则，逐 token
# 把两者合起来，某一层的一个值头对每个 token $t$ 做三步：
#
# 1. **遗忘**：$S \leftarrow e^{g_t} S$
# 2. **修正**：$S \leftarrow S + k_t \otimes \beta_t (v_t - S^\top k_t)$
# 3. **读取**：$o_t = S^\top q_t$
#
# 写成一个式子就是 $S_t = e^{g_t} (I - \beta_t k_t k_t^\top) S_{t-1} + \beta_t k_t v_t^\top$：先衰减；再由
# $(I - \beta_t k_t k_t^\top)$ 把 $k_t$ 原先对应的内容按比例 $\beta_t$ 去掉（$\beta_t = 1$ 时全部去掉，这时它是一个
# 投影）；最后写入新的一对。查询 $q_t$ 读的是 token $t$ 写完之后的记忆。
#
# 这一层（`layers.N.linear_attn.*`）围绕这条规则，从归一化后的隐藏状态 $x$ (B, T, d) 算出各个输入：
#
# - `in_proj_qkv` 给出 [q | k | v]（共 $2 \cdot H_k \cdot d_k + H_v \cdot d_v$ 个通道），再过一个**逐通道因果卷
#   积**（causal depthwise conv）：每个通道只混合自己最近的 $K = 4$ 个值（抽头权重 `conv1d.weight`，无偏置），然后过
#   silu。这样，一个 token 的 q、k、v 就能看到紧挨在它前面的几个 token。
# - $q$ 和 $k$ 切成 $H_k$ 个 $d_k$ 维的头，做 **l2 归一化**（化成单位长度：$k$ 必须是一个方向，delta 规则的修正才是投
#   影）；$q$ 还要再乘以 $d_k^{-1/2}$。$v$ 切成 $H_v$ 个 $d_v$ 维的头。$H_v > H_k$ 时（据已发布的模型卡，4B、9B、27B
#   每个键头对应 2 或 3 个值头），值头 $h$ 用的是键头 $\lfloor h / (H_v/H_k) \rfloor$。
# - **$\beta = \operatorname{sigmoid}(b)$**，其中 $b$ = `in_proj_b(x)`：每个值头一个，表示这个 token 把多少误差写进去
#   。
# - **$g = -e^{\mathrm{A\_log}} \cdot \operatorname{softplus}(a + \mathrm{dt\_bias})$**，其中 $a$ = `in_proj_a(x)`，用
#   fp32 计算：每个头有一个学到的速率 $e^{\mathrm{A\_log}}$，再乘上一个随 token 变化的正步长；因此
#   $g \le 0$，$e^{g} \in (0, 1]$。
# - 输出 $o$ $(B, T, H_v, d_v)$ 过第 3 章的**门控 RMSNorm**（门 $z$ = `in_proj_z(x)`），再由 `out_proj` 投影回 $d$ 维
#   。
#
# **先自己试试**：练习 210 是带状态的因果卷积，练习 211 是上面这条规则（运行 `python practice/judge.py start 210` 和
# `start 211`，或者直接写在下面的单元格里，评测器就在这里评分）。

# %%
def causal_conv(x, weight, state=None):
    raise NotImplementedError  # your code: (silu of the causal depthwise conv (B, T, C), the new state (B, C, K-1))


book.attempt(210, causal_conv)

# %%
def recurrent_delta_rule(q, k, v, g, beta, state=None):
    raise NotImplementedError  # your code: (o (B, T, Hv, dv) in v's dtype, the final fp32 state (B, Hv, dk, dv))


book.attempt(211, recurrent_delta_rule)

# %% [markdown]
# ## 3. On the checkpoint: the gates over a sentence
# Layer 0 of the checkpoint, on a sentence: embedding, the layer's input norm, then the layer's own projections.
# The decay $e^{g}$ and the write strength $\beta$, per token and value head (the figure shows the decay as a half-life,
# $\ln \tfrac{1}{2} / g$ tokens, on a log scale: $e^{g} = 0.5$ is a half-life of 1 token, $e^{g} = 0.99$ one of 69):

# %% [markdown] lang="zh"
# ## 3. 在检查点上看：一句话里的门
# 取检查点的第 0 层，输入一句话：查嵌入，过这一层的输入归一化，再过它自己的几个投影。下面按 token、按值头列出衰减
# $e^{g}$ 和写入强度 $\beta$（图里把衰减换算成半衰期 $\ln \tfrac{1}{2} / g$ 个 token，用对数刻度：$e^{g} = 0.5$ 对应半
# 衰期 1 个 token，$e^{g} = 0.99$ 对应 69 个）：

# %%
from qwen.deltanet import causal_conv, recurrent_delta_rule  # noqa: E402  (the finished ones, from here on)

tok = load_tokenizer(args.checkpoint.folder)
text = "The capital of France is Paris. The capital of Italy is Rome. So the capital of France is"
ids = torch.tensor([tok.encode(text)])
tokens = [tok.decode([i]) for i in ids[0]]
rows = W["embed_tokens.weight"][ids].float()  # the embedding lookup of chapter 2: (1, T, d)
x = fill(RMSNorm(cfg.hidden_size, cfg.rms_norm_eps), W, "layers.0.input_layernorm.")(rows)  # layer 0's input
layer = fill(GatedDeltaNet(cfg), W, "layers.0.linear_attn.")  # fp32: bf16 weights widen exactly
beta = layer.in_proj_b(x).sigmoid()[0]  # (T, Hv)
g = -layer.A_log.float().exp() * F.softplus(layer.in_proj_a(x).float() + layer.dt_bias.float())
decay = g[0].exp()  # (T, Hv)
print(tr(f"{len(tokens)} tokens, {cfg.linear_num_value_heads} value heads in layer 0",
         f"{len(tokens)} 个 token，第 0 层有 {cfg.linear_num_value_heads} 个值头"))
for h in range(cfg.linear_num_value_heads):
    rate, bias = float(layer.A_log.exp()[h]), float(layer.dt_bias[h])
    (d_lo, d_hi), (b_lo, b_hi) = map(float, decay[:, h].aminmax()), map(float, beta[:, h].aminmax())
    print(tr(f"head {h}: e^A_log = {rate:5.2f}, dt_bias = {bias:+.2f} -> "
             f"decay e^g from {d_lo:.3f} to {d_hi:.3f}, β from {b_lo:.2f} to {b_hi:.2f}",
             f"头 {h}：e^A_log = {rate:5.2f}，dt_bias = {bias:+.2f} -> "
             f"衰减 e^g 从 {d_lo:.3f} 到 {d_hi:.3f}，β 从 {b_lo:.2f} 到 {b_hi:.2f}"))

# %% [markdown]
# Each head's rate $e^{\mathrm{A\_log}}$ sets how fast it can forget; $\operatorname{softplus}(a + \mathrm{dt\_bias})$
# scales that per token. In the synthetic checkpoint `A_log` and `dt_bias` are random draws like transformers' initial
# values ($e^{\mathrm{A\_log}}$ uniform in $[0.01, 16]$, `dt_bias` around 1), so these heatmaps show what an untrained
# layer does — most heads forget almost everything at every token — and nothing about the trained model, whose heads are
# free to learn slow decays.

# %% [markdown] lang="zh"
# 每个头的速率 $e^{\mathrm{A\_log}}$ 决定它能忘得多快；$\operatorname{softplus}(a + \mathrm{dt\_bias})$ 再按 token 调
# 节这个速度。合成检查点里的 `A_log` 和 `dt_bias` 是仿照 transformers 的初始值随机抽的（$e^{\mathrm{A\_log}}$ 在
# $[0.01, 16]$ 上均匀分布，`dt_bias` 在 1 附近），所以这些热力图反映的是未经训练的层——大多数头几乎每个 token 都把记忆
# 忘光——说明不了训练后的模型：后者的头完全可以学到缓慢的衰减。

# %%
book.show("ch07-gates", ch07.gates_figure, tokens, decay, beta, SYNTHETIC)

# %% [markdown]
# Running the layer one token at a time with a `DeltaNetCache`, the state after each token. Its size is fixed —
# $(B, H_v, d_k, d_v)$ — and its norm rises with writes and falls with decays:

# %% [markdown] lang="zh"
# 用 `DeltaNetCache` 逐 token 运行这一层，记下每个 token 之后的状态。状态的大小是固定的，为 $(B, H_v, d_k, d_v)$；范数
# 随写入上升，随衰减下降：

# %%
cache, norms = DeltaNetCache(), []
for t in range(ids.shape[1]):
    layer(x[:, t:t + 1], cache=cache)
    norms.append(cache.state[0].flatten(1).norm(dim=1))  # (Hv,)
norms = torch.stack(norms)  # (T, Hv)
conv_shape, state_shape = tuple(cache.conv.shape), tuple(cache.state.shape)
last_norms = tr(', ', '、').join(f'{n:.2f}' for n in norms[-1].tolist())
print(tr(f"after {len(tokens)} tokens the cache holds conv {conv_shape} {cache.conv.dtype} and state "
         f"{state_shape} {cache.state.dtype}; ‖S‖ per head: {last_norms}",
         f"读完 {len(tokens)} 个 token，缓存里有卷积状态 {conv_shape} {cache.conv.dtype} 和状态 "
         f"{state_shape} {cache.state.dtype}；各头的 ‖S‖：{last_norms}"))

# %%
book.show("ch07-state", ch07.state_norm_figure, tokens, norms, SYNTHETIC)

# %% [markdown]
# ## 4. The chunked form
# The recurrent form takes $T$ sequential steps, each a handful of tiny $(d_k \times d_v)$ operations: fine for
# generating one token, slow for reading a prompt. The chunked form computes the same numbers for a chunk of $C = 64$
# tokens at once. Within one chunk (rows $i = 1, \dots, C$, $S$ the state before the chunk), write
# $G_i = g_1 + \dots + g_i$ (the log of the decay from the chunk's start to token $i$), and call
#
# $$
# v'_i = \beta_i \left(v_i - (e^{g_i} S_{i-1})^\top k_i\right)
# $$
#
# the correction token $i$ writes. Unrolling the recurrence inside the chunk:
#
# - $S_i = e^{G_i} S + \sum_{j \le i} e^{G_i - G_j} k_j {v'_j}^\top$: the old state, decayed, plus every write so far,
#   each decayed from its own time. So the **decay matrix** $\Gamma_{ij} = e^{G_i - G_j}$ ($j \le i$, 0 above) says how
#   much of token $j$'s write is left when token $i$ reads.
# - Put that into $v'_i$:
#   $v'_i = \beta_i v_i - \beta_i e^{G_i} S^\top k_i - \beta_i \sum_{j<i} \Gamma_{ij} (k_i \cdot k_j) \, v'_j$. Every
#   $v'_i$ depends on the earlier $v'_j$: moving those terms to the left gives one linear system for all the corrections
#   at once,
#
#   $$
#   \left(I + \mathrm{strictly\_lower}(\beta K K^\top \odot \Gamma)\right) V' = \beta V - (\beta e^{G} K) \, S
#   $$
#
#   The matrix $A$ on the left is **unit lower-triangular**: ones on the diagonal ($v'_i$ does not depend on itself),
#   zeros above (nor on later tokens). Solving it by forward substitution *is* the token loop — row $i$ uses rows
#   $j < i$ — but a triangular solve (`torch.linalg.solve_triangular`) does it as one library call over all chunks and
#   heads, and the rest becomes matrix products. Because the right side is linear in $S$, $A^{-1}$ is applied once:
#
#   $$
#   V' = U - W S, \qquad U = A^{-1} (\beta V), \qquad W = A^{-1} (\beta e^{G} K)
#   $$
#
#   with $U$ and $W$ computed for every chunk at once; only $S$ is unknown until the previous chunk is done.
# - Reading: $o_i = S_i^\top q_i = e^{G_i} S^\top q_i + \sum_{j \le i} \Gamma_{ij} (q_i \cdot k_j) \, v'_j$, that is
#
#   $$
#   O = (e^{G} Q) \, S + (Q K^\top \odot \Gamma) \, V'
#   $$
#
#   (this $\Gamma$ keeps its diagonal, $\Gamma_{ii} = 1$: token $i$ reads its own write).
# - **Crossing the chunk boundary**: the state after the chunk is $S_C$,
#
#   $$
#   S \leftarrow e^{G_C} S + (e^{G_C - G} K)^\top V'
#   $$
#
# So the loop over chunks needs the previous chunk's $S$ three times: for the corrections $V' = U - W S$, for the
# outputs $O$ (through $(e^{G} Q) \, S$), and for the next state. Everything else — $\Gamma$, $A^{-1}$, $U$, $W$,
# $Q K^\top \odot \Gamma$ — is computed for all chunks at once; a sequence of $T$ tokens takes $T/64$ loop steps of
# three small matrix products each.
#
# The literature calls this the **WY representation** of the chunk's product of $(I - \beta k k^\top)$ factors, and
# the triangular solve the **UT transform** (transformers' comment calls $A$ its "UT system"). The same quantities under
# three sets of names:
#
# | this course | meaning | fla (`chunk_gated_delta_rule_fwd`) | transformers (`torch_chunk_gated_delta_rule`) |
# |---|---|---|---|
# | $G$ | cumulative log decay in the chunk | `g` (after `chunk_local_cumsum`) | `cum_decay` |
# | $\Gamma$ | $e^{G_i - G_j}$, lower triangle | (inside the kernels) | `pairwise_decay` |
# | $A$ | the unit lower-triangular system | `A` (`chunk_scaled_dot_kkt_fwd`, then `solve_tril`) | `ut_system` |
# | $U = A^{-1} (\beta V)$ | corrections before the state is known | `u` | `new_values` |
# | $W = A^{-1} (\beta e^{G} K)$ | what the carried state subtracts | `w` | `k_cumdecay` |
# | $V' = U - W S$ (`V_new`) | the corrections | `v_new` | `v_new` |
# | $Q K^\top \odot \Gamma$ (`P`) | attention inside the chunk | (inside `chunk_fwd_o`) | `intra_chunk_attn` |
# | $S$ | the state carried between chunks | `h` (one per chunk), `final_state` | `last_recurrent_state` |
#
# The last chunk is padded with zeros ($g = 0$ keeps the state, $k = v = \beta = 0$ write nothing) and the padded rows
# are dropped. Here are $\Gamma$ and $A$ for our sentence in layer 0 (shorter than 64 tokens, so one padded chunk), for
# the value head that forgets least: $A$'s entries below the diagonal are $\beta_i (k_i \cdot k_j) \, \Gamma_{ij}$, how
# much token $j$'s correction changes token $i$'s.

# %% [markdown] lang="zh"
# ## 4. 分块形式
# 递推形式要串行走 $T$ 步，每步只是几个很小的 $(d_k \times d_v)$ 运算：生成时一次只来一个 token，这样算没问题；读一整
# 段提示词就慢了。分块形式一次处理一块 $C = 64$ 个 token，算出的数完全相同。在一块之内（行 $i = 1, \dots, C$，$S$ 是这
# 一块之前的状态），记 $G_i = g_1 + \dots + g_i$（从块开头到 token $i$ 的对数衰减），并把
#
# $$
# v'_i = \beta_i \left(v_i - (e^{g_i} S_{i-1})^\top k_i\right)
# $$
#
# 称为 token $i$ 写入的修正量。在块内把递推展开：
#
# - $S_i = e^{G_i} S + \sum_{j \le i} e^{G_i - G_j} k_j {v'_j}^\top$：旧状态衰减之后，再加上到此为止的每一次写入，每次
#   写入从各自的时刻开始衰减。于是**衰减矩阵** $\Gamma_{ij} = e^{G_i - G_j}$（$j \le i$，对角线以上为 0）表示 token
#   $i$ 读取时，token $j$ 的写入还剩多少。
# - 把它代入 $v'_i$：
#   $v'_i = \beta_i v_i - \beta_i e^{G_i} S^\top k_i - \beta_i \sum_{j<i} \Gamma_{ij} (k_i \cdot k_j) \, v'_j$。每个
#   $v'_i$ 都依赖前面的 $v'_j$；把这些项移到左边，就得到一个线性方程组，一次解出所有修正量：
#
#   $$
#   \left(I + \mathrm{strictly\_lower}(\beta K K^\top \odot \Gamma)\right) V' = \beta V - (\beta e^{G} K) \, S
#   $$
#
#   左边的矩阵 $A$ 是**单位下三角**矩阵：对角线全是 1（$v'_i$ 不依赖自己），对角线以上全是 0（也不依赖后面的 token）。
#   用前代法解它，*其实就是*逐 token 的那个循环（第 $i$ 行要用到 $j < i$ 的各行）；但三角求解
#   （`torch.linalg.solve_triangular`）只要一次库调用，就能处理所有块、所有头，剩下的部分都变成矩阵乘法。右边对 $S$ 是
#   线性的，所以 $A^{-1}$ 只需作用一次：
#
#   $$
#   V' = U - W S, \qquad U = A^{-1} (\beta V), \qquad W = A^{-1} (\beta e^{G} K)
#   $$
#
#   $U$ 和 $W$ 对所有块一次算好；只有 $S$ 要等上一块算完才知道。
# - 读取：$o_i = S_i^\top q_i = e^{G_i} S^\top q_i + \sum_{j \le i} \Gamma_{ij} (q_i \cdot k_j) \, v'_j$，即
#
#   $$
#   O = (e^{G} Q) \, S + (Q K^\top \odot \Gamma) \, V'
#   $$
#
#   （这里的 $\Gamma$ 保留对角线，$\Gamma_{ii} = 1$：token $i$ 能读到自己的写入。）
# - **跨过块边界**：块结束时的状态就是 $S_C$：
#
#   $$
#   S \leftarrow e^{G_C} S + (e^{G_C - G} K)^\top V'
#   $$
#
# 所以按块循环时，上一块的 $S$ 要用三次：算修正量 $V' = U - W S$，算输出 $O$（经由 $(e^{G} Q) \, S$），算下一个状态。
# 其余各项（$\Gamma$、$A^{-1}$、$U$、$W$、$Q K^\top \odot \Gamma$）都对所有块一次算完；$T$ 个 token 的序列只需循环
# $T/64$ 步，每步三个小矩阵乘法。
#
# 文献里把块内各个 $(I - \beta k k^\top)$ 因子的乘积写成 **WY 表示**，把那次三角求解叫作 **UT 变换**（transformers 的
# 注释把 $A$ 称为“UT system”）。同一组量，三处各有一套名字：
#
# | 本课程 | 含义 | fla (`chunk_gated_delta_rule_fwd`) | transformers (`torch_chunk_gated_delta_rule`) |
# |---|---|---|---|
# | $G$ | 块内累积的对数衰减 | `g`（`chunk_local_cumsum` 之后） | `cum_decay` |
# | $\Gamma$ | $e^{G_i - G_j}$，下三角 | （在 kernel 内部） | `pairwise_decay` |
# | $A$ | 单位下三角方程组的矩阵 | `A`（`chunk_scaled_dot_kkt_fwd`，然后 `solve_tril`） | `ut_system` |
# | $U = A^{-1} (\beta V)$ | 状态未知时的修正量 | `u` | `new_values` |
# | $W = A^{-1} (\beta e^{G} K)$ | 与传入的状态相乘后要减掉的部分 | `w` | `k_cumdecay` |
# | $V' = U - W S$ (`V_new`) | 修正量 | `v_new` | `v_new` |
# | $Q K^\top \odot \Gamma$ (`P`) | 块内的注意力 | （在 `chunk_fwd_o` 内部） | `intra_chunk_attn` |
# | $S$ | 在块与块之间传递的状态 | `h`（每块一个）、`final_state` | `last_recurrent_state` |
#
# 最后一块用 0 补齐（$g = 0$ 让状态保持不变，$k = v = \beta = 0$ 什么也不写），补出的行算完后丢掉。下面是第 0 层上这句
# 话的 $\Gamma$ 和 $A$（不到 64 个 token，所以只有一个补齐的块），取遗忘最少的那个值头。$A$ 对角线以下的元素是
# $\beta_i (k_i \cdot k_j) \, \Gamma_{ij}$，即 token $j$ 的修正量对 token $i$ 的修正量有多大影响。

# %%
Hk, Hv, dk, dv = cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim, \
    cfg.linear_value_head_dim
u, _ = causal_conv(layer.in_proj_qkv(x), layer.conv1d.weight)  # (1, T, 2·Hk·dk + Hv·dv)
q, k, v = u.split([Hk * dk, Hk * dk, Hv * dv], dim=-1)
q = l2norm(q.reshape(1, -1, Hk, dk).float()) * dk ** -0.5  # (1, T, Hk, dk)
k = l2norm(k.reshape(1, -1, Hk, dk).float())
v = v.reshape(1, -1, Hv, dv)  # (1, T, Hv, dv)
h = int(decay.mean(0).argmax())  # the value head that forgets least: its Γ has the most to show
G = g[0, :, h].cumsum(0)  # the sentence is shorter than a chunk: one chunk
Gamma = (G[:, None] - G[None, :]).masked_fill(~torch.ones(len(G), len(G), dtype=torch.bool).tril(), -math.inf).exp()
kh = k[0, :, h // (Hv // Hk)]  # (T, dk): value head h reads key head ⌊h / r⌋
A = torch.eye(len(G)) + ((beta[:, h, None] * kh @ kh.T) * Gamma).tril(-1)
top, bottom, largest = float(Gamma.tril(-1).max()), float(Gamma[Gamma > 0].min()), float(A.tril(-1).abs().max())
print(tr(f"the first chunk of value head {h}: {len(G)} tokens; Γ below the diagonal from {top:.3f} down to "
         f"{bottom:.1e}; A's largest entry below the diagonal {largest:.3f}",
         f"值头 {h} 的第一个块：{len(G)} 个 token；Γ 在对角线以下从 {top:.3f} 降到 {bottom:.1e}；"
         f"A 在对角线以下的最大元素为 {largest:.3f}"))

# %%
book.show("ch07-chunk", ch07.chunk_figure, Gamma, A, h, SYNTHETIC)

# %% [markdown]
# The structure of $\Gamma$ is easier to see on a toy chunk where every token decays the memory by $e^{g} = 0.95$:
# $\Gamma_{ij} = 0.95^{i-j}$, a smooth fade away from the diagonal (below). The sentence's heads above forget much
# faster (the synthetic draw of `A_log`), so their $\Gamma$ is nearly diagonal.

# %% [markdown] lang="zh"
# 在一个玩具块上更容易看清 $\Gamma$ 的结构：假设每个 token 都让记忆按 $e^{g} = 0.95$ 衰减，那么
# $\Gamma_{ij} = 0.95^{i-j}$，离对角线越远越淡（见下图）。上面那句话里的头忘得快得多（`A_log` 是随机抽的），所以它们的
# $\Gamma$ 几乎只剩对角线。

# %%
toy_G = torch.full((16,), math.log(0.95)).cumsum(0)
toy_Gamma = (toy_G[:, None] - toy_G[None, :]).masked_fill(~torch.ones(16, 16, dtype=torch.bool).tril(), -math.inf).exp()
corner = float(toy_Gamma[15, 0])
print(tr(f"toy chunk, e^g = 0.95: Γ[15, 0] = {corner:.3f} = 0.95^15 = {0.95 ** 15:.3f}",
         f"玩具块，e^g = 0.95：Γ[15, 0] = {corner:.3f} = 0.95^15 = {0.95 ** 15:.3f}"))

# %%
book.show("ch07-toy-gamma", ch07.toy_gamma_figure, toy_Gamma, 0.95)

# %% [markdown]
# **Try it first**: exercise 212 writes the chunked form and is graded against the token-by-token rule at lengths
# that are not multiples of the chunk (`python practice/judge.py start 212`, or the cell below).

# %% [markdown] lang="zh"
# **先自己试试**：练习 212 写分块形式。评测器会在不是块大小整数倍的长度上，拿它和逐 token 的规则对比
# （`python practice/judge.py start 212`，或者用下面的单元格）。

# %%
def chunked_delta_rule(q, k, v, g, beta, state=None, chunk_size=64):
    raise NotImplementedError  # your code: the same (o, final state) as the token-by-token rule, chunk by chunk


book.attempt(212, chunked_delta_rule)

# %% [markdown]
# The two forms share no code, so their agreement is a test of both. In float64 they agree to rounding; in fp32
# they differ by the order of the sums. On this layer's own $q, k, v, g, \beta$ (and in chunks of 8, so the sentence
# spans several chunks and the state crosses boundaries):

# %% [markdown] lang="zh"
# 两种形式没有一行代码是共用的，所以两者对得上，就同时验证了两者。float64 下它们只差舍入误差；fp32 下的差别来自求和顺
# 序。下面用这一层自己的 $q$、$k$、$v$、$g$、$\beta$ 来比（块大小取 8，让这句话跨好几块，状态也要跨过块边界）：

# %%
from qwen.deltanet import chunked_delta_rule  # noqa: E402  (the finished one, from here on)
from qwen.family import (  # noqa: E402  (the sizes, for section 5's memory bill)
    SIZES,
    all_attention_bytes,
    cache_bytes,
    kv_bytes_per_token,
    linear_layer_bytes,
)

inputs = (q, k, v, g, beta[None])
o_rec64, S_rec64 = recurrent_delta_rule(*(t.double() for t in inputs))
for dtype in (torch.float64, torch.float32):
    o_chunk, S_chunk = chunked_delta_rule(*(t.to(dtype) for t in inputs), chunk_size=8)
    o_rec, _ = recurrent_delta_rule(*(t.to(dtype) for t in inputs))
    between = float((o_chunk.double() - o_rec.double()).abs().max())
    to_f64, largest = float((o_chunk.double() - o_rec64).abs().max()), float(o_rec64.abs().max())
    print(tr(f"{str(dtype):14s} max |chunked − recurrent| = {between:.1e}; chunked vs the float64 recurrent answer "
             f"{to_f64:.1e} (outputs up to {largest:.2f})",
             f"{str(dtype):14s} max |分块 − 递推| = {between:.1e}；分块结果与 float64 递推结果相差 {to_f64:.1e}"
             f"（输出最大为 {largest:.2f}）"))

# %% [markdown]
# ## The code: `qwen/deltanet.py`

# %% [markdown] lang="zh"
# ## 代码：`qwen/deltanet.py`

# %%
book.listing("qwen/deltanet.py")

# %% [markdown]
# - **`causal_conv`** puts the $K - 1$ previous inputs (the conv state, or zeros) in front of $x$ and convolves without
#   padding, so output $t$ reads inputs $t - 3, \dots, t$. It returns the newest $K - 1$ inputs as the next call's
#   state. `F.conv1d` sums bf16 products in fp32 and rounds once; a per-tap bf16 sum would be off by a step.
# - **`recurrent_delta_rule`** is section 2, line by line, in fp32 (float64 for float64 inputs). Key heads are
#   matched to value heads with `repeat_interleave` (heads 0, 0, 1, 1 — not `repeat`'s 0, 1, 0, 1).
# - **`chunked_delta_rule`** is section 4. It keeps the value heads grouped by their key head, so $K K^\top$ and
#   $Q K^\top$ are computed once per key head and shared (no copies of q and k per value head); it finds $A^{-1}$ with
#   one triangular solve against the identity and applies it to both right sides with matrix products ($U$ and $W$, the
#   table's names); and it lays every operand out contiguously, since matrix products on strided views run at half speed
#   on a CPU. `python bench/bench_deltanet.py` times it against transformers' own pure-torch kernel in one run.
# - **`DeltaNetCache`** holds `conv` $(B, C, K - 1)$ in the model dtype and `state` $(B, H_v, d_k, d_v)$ in fp32.
#   **`GatedDeltaNet.forward`** uses the recurrent form for a single token with a cache (a decode step) and the
#   chunked form for anything longer, starting from the cached state; a padding mask zeroes padded positions of
#   the input, so with left padding the state stays exactly zero until the text starts.
#
# ## 5. The memory bill
# A full-attention layer keeps, for every token of the context, a key and a value: $2 \cdot H_{kv} \cdot D$ numbers per
# token. A Gated DeltaNet layer keeps $H_v \cdot d_k \cdot d_v$ fp32 numbers of state and
# $(K - 1) \cdot (2 \cdot H_k \cdot d_k + H_v \cdot d_v)$ of conv state, whatever the context (transformers' cache keeps
# $K$ conv inputs, one of which is never read again: about 1% more in the 0.8B). First the formula against the cache our
# layer really keeps:

# %% [markdown] lang="zh"
# - **`causal_conv`** 把前 $K - 1$ 个输入（卷积状态，没有就用 0）拼在 $x$ 前面，不加填充直接卷积，所以输出 $t$ 读的是
#   输入 $t - 3, \dots, t$。它把最新的 $K - 1$ 个输入返回，作为下一次调用的状态。`F.conv1d` 在 fp32 里累加 bf16 乘积，
#   最后只舍入一次；要是每个抽头都按 bf16 累加，结果会差一个 bf16 步长。
# - **`recurrent_delta_rule`** 与第 2 节的公式逐行对应，用 fp32 计算（输入是 float64 时用 float64）。键头和值头用
#   `repeat_interleave` 对应（头 0, 0, 1, 1，而不是 `repeat` 给出的 0, 1, 0, 1）。
# - **`chunked_delta_rule`** 对应第 4 节。它让值头按所属的键头分组，这样 $K K^\top$ 和 $Q K^\top$ 每个键头只算一次，组
#   内共用（不必为每个值头复制一份 q 和 k）；它对单位矩阵做一次三角求解，得到 $A^{-1}$，再用矩阵乘法把它作用到两个右端
#   项上（即表中的 $U$ 和 $W$）；它还把每个操作数都排成连续内存，因为在 CPU 上，对跨步视图做矩阵乘法只有一半速度
#   。`python bench/bench_deltanet.py` 在同一次运行里，把它和 transformers 自带的纯 torch kernel 对比计时。
# - **`DeltaNetCache`** 存两样东西：模型 dtype 的 `conv` $(B, C, K - 1)$，fp32 的 `state`
#   $(B, H_v, d_k, d_v)$。**`GatedDeltaNet.forward`** 遇到带缓存的单个 token（一个解码步）用递推形式，更长的输入用分块
#   形式，都从缓存里的状态接着算；填充掩码把输入里填充的位置清零，所以左填充时，正文开始之前状态一直严格为 0。
#
# ## 5. 内存开销
# 全注意力层要为上下文里的每个 token 存一个键和一个值：每个 token $2 \cdot H_{kv} \cdot D$ 个数。Gated DeltaNet 层存的
# 是 $H_v \cdot d_k \cdot d_v$ 个 fp32 状态数，加上 $(K - 1) \cdot (2 \cdot H_k \cdot d_k + H_v \cdot d_v)$ 个卷积状态
# 数，与上下文多长无关（transformers 的缓存存了 $K$ 个卷积输入，其中一个以后再也不会读到：在 0.8B 里大约多占 1%）。先
# 拿公式和我们这一层实际存下的缓存对一下：

# %%
cache = DeltaNetCache()
bf16_layer = fill(GatedDeltaNet(cfg), W, "layers.0.linear_attn.").to(torch.bfloat16)  # as stored; `layer` stays fp32
bf16_layer(x.bfloat16(), cache=cache)
kept = cache.state.numel() * cache.state.element_size() + cache.conv.numel() * cache.conv.element_size()
formula = linear_layer_bytes(cfg)
print(tr(f"this checkpoint's layer 0 keeps {kept:,} bytes per sequence; the formula says {formula:,}",
         f"本检查点的第 0 层每条序列存 {kept:,} 字节；按公式算是 {formula:,}"))

# %% [markdown]
# The same formulas for the five dense Qwen3.5 sizes, with their numbers from the published model cards and
# configs (read from public copies, not checked against the hub here; `qwen/family.py` names each source), per
# sequence, in bf16 with an fp32 state:

# %% [markdown] lang="zh"
# 同样的公式用在 Qwen3.5 五个稠密尺寸上。各尺寸的数字取自已发布的模型卡和配置（读自公开副本，这里没有和 hub 核对；每个
# 数字的出处见 `qwen/family.py`），按每条序列、bf16 存储、fp32 状态计算：

# %%
T32 = 32 * 1024
print(tr(f"{'':10s} {'linear layer':>13s} {'full layer, per token':>22s} {'at 32k tokens':>14s} "
         f"{'whole model at 32k':>19s} {'all full attention':>19s}",
         # a CJK character takes 2 columns: each width is the data column's, less the header's CJK characters
         f"{'':13s} {'DeltaNet 层':>12s} {'全注意力层每 token':>12s} {'32k token 时':>12s} "
         f"{'整个模型 32k 时':>13s} {'每层都用全注意力':>10s}"))
for name, s in SIZES.items():
    per_token, linear = kv_bytes_per_token(s), linear_layer_bytes(s)
    print(f"Qwen3.5-{name:5s} {linear / 2 ** 20:9.2f} MiB {per_token:16,} B {per_token * T32 / 2 ** 20:9.0f} MiB "
          f"{sum(cache_bytes(s, T32)) / 2 ** 30:14.2f} GiB "
          f"{all_attention_bytes(s, T32) / 2 ** 30:14.2f} GiB")
s = SIZES["0.8B"]
even = linear_layer_bytes(s) / kv_bytes_per_token(s)
print(tr(f"real Qwen3.5-0.8B: one linear layer holds as much as a full layer's KV cache at {even:,.0f} tokens",
         f"真实 Qwen3.5-0.8B：一个线性注意力层占的内存，和一个全注意力层在 {even:,.0f} 个 token 时的键值缓存一样多"))

# %% [markdown]
# A DeltaNet layer's state costs as much as a few hundred tokens of KV cache, and never more. At 32k tokens the
# whole model's cache is about a quarter of what the same model with full attention everywhere would keep (its
# full-attention layers, 6 to 16 of them by size, still grow), and the state part is fixed: doubling the context
# doubles only the full-attention part.

# %% [markdown] lang="zh"
# 一个 DeltaNet 层的状态相当于几百个 token 的键值缓存（KV cache），而且不会再多。到 32k 个 token 时，整个模型的缓存大
# 约只有处处用全注意力时的四分之一（它的全注意力层按尺寸有 6 到 16 层，这部分仍在增长）；状态那部分是固定的：上下文翻
# 倍，只有全注意力那部分跟着翻倍。

# %%
book.show("ch07-bill", ch07.memory_bill_figure)

# %% [markdown]
# ## Try this
#
# - In section 1, write the random unit keys with $\beta = 0.5$ instead of 1
#   (`write(tests["random unit keys"][0], delta=True, beta=0.5)`): does the last pair's error stay 0? Then write
#   12 random unit keys into the 8 dimensions (`l2norm(torch.randn(12, 8, dtype=torch.float64))`): which pairs can
#   still be read back?
# - Run `chunked_delta_rule` on section 4's inputs with `chunk_size=1`, `3` and `64`: the answers agree to rounding;
#   time them with `%timeit` in the notebook. Why is chunk size 1 the recurrent form in disguise?
# - Prefill the layer with the first 10 tokens (`c = DeltaNetCache(); layer(x[:, :10], cache=c)`), then feed the
#   rest one at a time: the outputs equal one pass over the whole sentence (tests/test_deltanet.py checks it
#   against transformers' cache).
#
# ## Show the proof
# transformers' `Qwen3_5GatedDeltaNet` on the same weights and the same input. In fp32 the difference is the order
# of the sums (both use a chunked kernel, laid out differently). In bf16 both round $q, k, v, \beta$, the kernel output
# and the gated norm to bf16 in the same places (the gated norm in transformers' order, chapter 3), so nearly every
# output is equal; a rare one, where an fp32 intermediate lands on the other side of a rounding boundary, may
# differ by one bf16 step of its own size.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 在第 1 节里，把随机单位键改用 $\beta = 0.5$ 写入（`write(tests["random unit keys"][0], delta=True, beta=0.5)`）：
#   最后一对的误差还是 0 吗？再往 8 维的记忆里写 12 个随机单位键（`l2norm(torch.randn(12, 8, dtype=torch.float64))`）
#   ：还有哪些对能读回来？
# - 在第 4 节的输入上，分别用 `chunk_size=1`、`3`、`64` 运行 `chunked_delta_rule`：结果在舍入误差内一致；在笔记本里用
#   `%timeit` 给它们计时。为什么块大小为 1 其实就是递推形式？
# - 先用前 10 个 token 预填充这一层（`c = DeltaNetCache(); layer(x[:, :10], cache=c)`），再把剩下的 token 一个个喂进去
#   ：输出与整句一次跑完的结果一致（tests/test_deltanet.py 拿它和 transformers 的缓存对比）。
#
# ## 对照验证
# 在同样的权重、同样的输入上运行 transformers 的 `Qwen3_5GatedDeltaNet`。fp32 下的差别来自求和顺序（两边都用分块
# kernel，只是数据排布不同）。bf16 下，两边在相同的位置把 $q$、$k$、$v$、$\beta$、kernel 输出和门控归一化舍入到 bf16（
# 门控归一化按 transformers 的运算顺序，见第 3 章），所以几乎每个输出都逐位一致；极少数输出的某个 fp32 中间值恰好落在
# 舍入边界的另一侧，可能相差一个 bf16 步长（按该值自身的量级计）。

# %%
def compare(transformers, path, layer):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    theirs = Qwen3_5GatedDeltaNet(transformers.AutoConfig.from_pretrained(path).text_config, 0)
    theirs.load_state_dict(layer.float().state_dict())
    h = torch.randn(2, 100, layer.in_proj_qkv.in_features, generator=torch.Generator().manual_seed(1))
    book.oracle.difference(tr("layer 0, fp32", "第 0 层，fp32"), layer(h), theirs(h))
    ours, want = layer.bfloat16()(h.bfloat16()).float(), theirs.bfloat16()(h.bfloat16()).float()
    diff = (ours - want).abs()
    # one bf16 step at each output's own size (at least the smallest normal number, so 0 - 0 is 0 steps)
    own_step = (torch.finfo(torch.bfloat16).eps * want.abs()).clamp_min(torch.finfo(torch.bfloat16).tiny)
    differ, steps = int((diff > 0).sum()), float((diff / own_step).max())
    print(tr(f"layer 0, bf16: {differ} of {diff.numel()} outputs differ from transformers, by at most "
             f"{steps:.2f} bf16 steps of their own size",
             f"第 0 层，bf16：{diff.numel()} 个输出中有 {differ} 个与 transformers 不同，"
             f"最多相差 {steps:.2f} 个 bf16 步长（按各输出自身的量级计）"))


book.proof(compare, args.checkpoint.folder, layer)

# %% [markdown]
# ## Summary
#
# - A Gated DeltaNet head keeps a memory $S$ $(d_k \times d_v)$. Per token: forget ($S \leftarrow e^{g} S$), correct
#   ($S \leftarrow S + k \otimes \beta (v - S^\top k)$), read ($o = S^\top q$). The correction writes only what the
#   memory got wrong, so a key written again replaces its value instead of piling up, as it would in plain linear
#   attention.
# - The gates come from the token: $\beta = \operatorname{sigmoid}(b)$ says how much to write,
#   $g = -e^{\mathrm{A\_log}} \operatorname{softplus}(a + \mathrm{dt\_bias}) \le 0$ how much to forget. $q$ and $k$ are
#   unit vectors (l2norm), $q$ scaled by $d_k^{-1/2}$; a causal conv of width 4 comes first, a gated RMSNorm after.
# - The chunked form computes the same numbers: within a chunk the corrections solve a unit lower-triangular
#   system, and only the state crosses from chunk to chunk. Proven equal to the recurrent form (float64, 1e-12) and
#   to transformers (fp32, 1e-5).
# - The cache of a linear layer is its state and the last 3 conv inputs: fixed size, whatever the context. In the
#   real 0.8B a linear layer's cache equals a full layer's KV cache at a few hundred tokens; at 32k tokens the whole
#   model keeps about a quarter of what full attention everywhere would.
#
# Shapes, in the notation of the table: $x$ $(B, T, d)$ → [q | k | v] $(B, T, 2 \cdot H_k \cdot d_k + H_v \cdot d_v)$ →
# $q, k$ $(B, T, H_k, d_k)$, $v$ $(B, T, H_v, d_v)$; $\beta, g$ $(B, T, H_v)$; state $S$ $(B, H_v, d_k, d_v)$ fp32; conv
# state $(B, 2 \cdot H_k \cdot d_k + H_v \cdot d_v, K - 1)$; $o$ $(B, T, H_v, d_v)$ → gated norm with $z$
# $(B, T, H_v, d_v)$ → `out_proj` → $(B, T, d)$.

# %% [markdown] lang="zh"
# ## 小结
#
# - 一个 Gated DeltaNet 头存一块记忆 $S$ $(d_k \times d_v)$。每个 token 做三步：遗忘（$S \leftarrow e^{g} S$），修正
#   （$S \leftarrow S + k \otimes \beta (v - S^\top k)$），读取（$o = S^\top q$）。修正只写入记忆答错的部分，所以重写
#   一个键会替换它的值，不会像普通线性注意力那样越叠越多。
# - 门由 token 算出：$\beta = \operatorname{sigmoid}(b)$ 决定写多少
#   ，$g = -e^{\mathrm{A\_log}} \operatorname{softplus}(a + \mathrm{dt\_bias}) \le 0$ 决定忘多少。$q$ 和 $k$ 是单位向
#   量（l2norm），$q$ 再乘以 $d_k^{-1/2}$；前面先过一个宽度为 4 的因果卷积，后面接一个门控 RMSNorm。
# - 分块形式算出同样的数：块内的修正量是一个单位下三角方程组的解，块与块之间只传递状态。它与递推形式一致
#   （float64，1e-12），与 transformers 也一致（fp32，1e-5）。
# - 线性注意力层的缓存就是它的状态加上最后 3 个卷积输入：大小固定，与上下文多长无关。在真实的 0.8B 里，一个线性注意力
#   层的缓存相当于全注意力层几百个 token 的键值缓存；到 32k 个 token 时，整个模型存的缓存大约只有处处用全注意力时的四
#   分之一。
#
# 各步的形状（记号同符号表）：$x$ $(B, T, d)$ → [q | k | v] $(B, T, 2 \cdot H_k \cdot d_k + H_v \cdot d_v)$ → $q, k$
# $(B, T, H_k, d_k)$，$v$ $(B, T, H_v, d_v)$；$\beta, g$ $(B, T, H_v)$；状态 $S$ $(B, H_v, d_k, d_v)$ fp32；卷积状态
# $(B, 2 \cdot H_k \cdot d_k + H_v \cdot d_v, K - 1)$；$o$ $(B, T, H_v, d_v)$ → 与 $z$ $(B, T, H_v, d_v)$ 一起过门控归
# 一化 → `out_proj` → $(B, T, d)$。

# %%
book.notation(args.checkpoint)

# %% [markdown]
# File added in this chapter: `qwen/deltanet.py` (and `book/ch07.py`, `bench/bench_deltanet.py`).
#
# **Exercises**: 210 · the causal conv with its state; 211 · the gated delta rule, token by token; 212 · the
# chunked delta rule (`python practice/judge.py start 210`, or the cells in sections 2 and 4).
#
# ## How to explain it
#
# 1. **Why linear attention.** Softmax attention compares each new query with every past key: the cost per token and the
#    KV cache grow with the context. Linear attention drops the softmax, so
#    $\sum_j (q \cdot k_j) \, v_j = \left(\sum_j k_j v_j^\top\right)^\top q$: the sum can be kept as one matrix, updated
#    per token. Fixed memory, fixed cost per token.
# 2. **What the delta rule corrects.** Plain linear attention only adds, so the matrix accumulates every pair and
#    old values interfere with new ones. The delta rule treats $S$ as a key → value memory trained online: it
#    predicts the value for $k$, $S^\top k$, and writes $\beta$ times the error — one step of gradient descent, learning
#    rate $\beta$, on $\tfrac{1}{2} \lVert S^\top k - v \rVert^2$.
#    Rewriting a key replaces its value.
# 3. **What the gates do.** $\beta$ (per token, per head) is the learning rate of that step; $e^{g}$ (per token, per
#    head) decays the whole memory first, so a head can forget old context quickly or keep it. Mamba2's gate and the
#    delta rule together are "Gated DeltaNet".
# 4. **Why chunking.** Token by token is $T$ sequential steps of tiny operations. Within a chunk the corrections
#    satisfy a unit lower-triangular linear system; one triangular solve and a few matrix products replace the
#    inner loop (the WY representation / UT transform), and only the chunk-to-chunk step — corrections, outputs
#    and state, each needing the carried state — stays sequential ($T/64$ steps). Same numbers, matrix-sized
#    work — and for generation, the recurrent step is the cheap one.
# 5. **Why a hybrid.** A fixed-size state cannot recall everything exactly (at most $d_k$ independent keys per head);
#    one full-attention layer in four keeps every past key and value, so it can still look up any earlier token —
#    softmax weights are soft, so even that is retrieval, not guaranteed exact recall — at a quarter of the KV cache.

# %% [markdown] lang="zh"
# 本章新增的文件：`qwen/deltanet.py`（以及 `book/ch07.py`、`bench/bench_deltanet.py`）。
#
# **练习**：210 · 带状态的因果卷积；211 · 逐 token 计算的门控 delta 规则；212 · 分块计算的 delta 规则
# （`python practice/judge.py start 210`，或者第 2 节、第 4 节里的单元格）。
#
# ## 面试怎么答
#
# 1. **为什么用线性注意力。** softmax 注意力要拿每个新查询和过去所有的键比较：每个 token 的计算量和键值缓存都随上下文
#    增长。线性注意力去掉 softmax，于是 $\sum_j (q \cdot k_j) \, v_j = \left(\sum_j k_j v_j^\top\right)^\top q$：这个
#    和可以存成一个矩阵，每个 token 更新一次。内存固定，每个 token 的计算量也固定。
# 2. **delta 规则修正的是什么。** 普通线性注意力只做加法，矩阵里堆着所有的键值对，旧值和新值互相干扰。delta 规则把 $S$
#    看作一块在线训练的“键 → 值”记忆：先预测 $k$ 对应的值 $S^\top k$，再写入 $\beta$ 倍的误差——相当于在
#    $\tfrac{1}{2} \lVert S^\top k - v \rVert^2$ 上以学习率 $\beta$ 做一步梯度下降。重写一个键，就替换了它的值。
# 3. **门起什么作用。** $\beta$（每个 token、每个头一个）是这一步的学习率；$e^{g}$（每个 token、每个头一个）先让整块记
#    忆衰减，所以一个头既可以很快忘掉旧的上下文，也可以一直留着。Mamba2 的门加上 delta 规则，就是 Gated DeltaNet。
# 4. **为什么要分块。** 逐 token 计算是 $T$ 个串行的小运算。在一块之内，修正量满足一个单位下三角线性方程组；一次三角求
#    解加几个矩阵乘法就能代替内层循环（WY 表示 / UT 变换），只有块与块之间的那一步仍要串行（$T/64$ 步）：修正量、输出
#    和状态，每一项都要用到传下来的状态。结果不变，计算却变成了大块的矩阵乘法；而生成时，递推那一步反倒是便宜的。
# 5. **为什么要混合。** 固定大小的状态不可能把所有东西都精确记住（每个头最多 $d_k$ 个线性无关的键）；每四层留一层全注
#    意力，保存过去所有的键和值，模型就仍能查到前面任意一个 token（softmax 的权重是软的，所以这也只是检索，不保证精确
#    回忆），而键值缓存只有处处用全注意力时的四分之一。
