"""Chapter 5: the SwiGLU MLP — down(silu(gate(x)) ⊙ up(x)).

第 5 章：SwiGLU MLP——down(silu(gate(x)) ⊙ up(x))。

Run: python chapters/ch05_mlp.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch05_mlp.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 5 · The SwiGLU MLP
#
# Every decoder layer (24 in the 0.8B) ends with an MLP: after the mixer has moved information between tokens, the
# MLP works on each token on its own. It widens the vector from $d$ to $I$, lets a **gate** decide how much of each
# hidden unit passes, and projects back to $d$. Outside the embedding it holds most of the weights (264M of 498M in
# the 0.8B). This chapter writes `qwen/mlp.py` and runs one layer's MLP on a sentence.

# %% [markdown] lang="zh"
# # 第 5 章 · SwiGLU MLP
#
# 每个解码层（0.8B 共 24 层）的最后一步都是 MLP。混合器负责在 token 之间传递信息，MLP 则对每个 token 单独加工：先把向量
# 从 $d$ 维拓宽到 $I$ 维，由一个**门**决定每个隐藏单元放行多少，再投影回 $d$ 维。除去嵌入，模型的大部分权重都在 MLP 里
# （0.8B 的 498M 中占 264M）。本章写 `qwen/mlp.py`，并用一层的 MLP 处理一个句子。

# %%
import torch
import torch.nn.functional as F

import book
from book import ch05
from qwen.course import chapter_args
from qwen.lang import ljust, tr
from qwen.mlp import MLP
from qwen.norm import RMSNorm
from qwen.sizes import real_config
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights, fill

args = chapter_args(__doc__)
cfg = args.checkpoint.config
W = Weights(args.checkpoint)  # lazy: only the tensors this chapter asks for are read
real = real_config()
dev, d, I = args.device, cfg.hidden_size, cfg.intermediate_size
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
SYNTHETIC = tr(" (synthetic weights)", "（合成权重）") if args.checkpoint.synthetic else ""  # the figure only
REAL, HERE = tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B"), tr("this checkpoint", "本检查点")
torch.manual_seed(0)

# %% [markdown]
# Where it sits: after `post_attention_layernorm`, in every layer, linear-attention and full-attention alike.

# %% [markdown] lang="zh"
# 它在模型中的位置：紧跟在 `post_attention_layernorm` 之后。每一层都有，线性注意力层和全注意力层都一样。

# %%
book.show("ch05-map", book.model_map.draw, "mlp")

# %% [markdown]
# ## 1. Three matrices
# `gate_proj` and `up_proj` are $(I, d)$, `down_proj` is $(d, I)$, with no biases. In the real 0.8B, $d = 1024$ and
# $I = 3584$ ($3.5d$): $3 \cdot 1024 \cdot 3584 = 11.0\text{M}$ weights per layer, 264M over 24 layers — more than the
# embedding's 254M and more than all mixers together. The classic MLP of the same $d$, relu with a width of $4d$, has
# two matrices: $2 \cdot d \cdot 4d = 8d^2$ against SwiGLU's $3 \cdot d \cdot 3.5d = 10.5d^2$, so Qwen3.5's MLP is 31 %
# larger than it.

# %% [markdown] lang="zh"
# ## 1. 三个矩阵
# `gate_proj` 和 `up_proj` 的形状是 $(I, d)$，`down_proj` 是 $(d, I)$，都没有偏置。真实 0.8B 中
# $d = 1024$，$I = 3584$（即 $3.5d$）：每层 $3 \cdot 1024 \cdot 3584 = 11.0\text{M}$ 个权重，24 层共 264M，比嵌入的
# 254M 还多，也超过所有混合器的总和。同样 $d$ 的经典 MLP 用 relu、宽 $4d$，只有两个矩阵，共 $2 \cdot d \cdot 4d = 8d^2$
# 个权重；SwiGLU 则是 $3 \cdot d \cdot 3.5d = 10.5d^2$，所以 Qwen3.5 的 MLP 比经典 MLP 大 31 %。

# %%
for name, c in ((HERE, cfg), (REAL, real)):
    per_layer = 3 * c.hidden_size * c.intermediate_size
    cd, ci, L = c.hidden_size, c.intermediate_size, c.num_hidden_layers
    one, all_layers = per_layer / 1e6, per_layer * L / 1e6
    print(tr(f"{name:20s} d = {cd:5,}, I = {ci:6,} ({ci / cd:.2f} d): {one:7.3f}M weights per MLP, "
             f"{all_layers:8.2f}M in {L} layers",
             f"{ljust(name + '：', 20)}d = {cd:5,}，I = {ci:6,}（{ci / cd:.2f} d）：每个 MLP {one:7.3f}M 个权重，"
             f"{L} 层共 {all_layers:8.2f}M"))
relu_4d = 2 * real.hidden_size * 4 * real.hidden_size
width, more = real.intermediate_size / real.hidden_size, 3 * real.hidden_size * real.intermediate_size / relu_4d - 1
print(tr(f"{REAL}: a 4d relu MLP would have {relu_4d / 1e6:.3f}M weights; SwiGLU at {width:.1f} d has {more:.0%} more",
         f"{REAL}：宽 4d 的 relu MLP 会有 {relu_4d / 1e6:.3f}M 个权重；宽 {width:.1f} d 的 SwiGLU 比它多 {more:.0%}"))
for name in ("gate_proj", "up_proj", "down_proj"):
    t = W[f"layers.0.mlp.{name}.weight"]
    print(f"layers.0.mlp.{name}.weight: {tuple(t.shape)} {t.dtype}")

# %% [markdown]
# ## 2. The gate: silu
# The classic transformer MLP is $\operatorname{down}(\operatorname{relu}(\operatorname{up}(x)))$. SwiGLU (Shazeer,
# 2020) splits the widening in two: one projection goes through
#
# $$
# \operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)
# $$
#
# and multiplies the other, unit by unit. silu is smooth, lets a little through below zero (its minimum is $-0.278$ at
# $z \approx -1.28$), and is $\approx z$ for large $z$.
#
# Check by hand: $\operatorname{sigmoid}(1) = 1 / (1 + e^{-1}) = 0.7311$, so $\operatorname{silu}(1) = 0.7311$ and
# $\operatorname{silu}(-1) = -0.2689$.

# %% [markdown] lang="zh"
# ## 2. 门：silu
# 经典 transformer 的 MLP 是 $\operatorname{down}(\operatorname{relu}(\operatorname{up}(x)))$。SwiGLU（Shazeer，2020）把
# 拓宽这一步拆成两路：一路投影经过
#
# $$
# \operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)
# $$
#
# 再与另一路逐个单元相乘。silu 处处光滑，在 0 以下也会放过一点负值（在 $z \approx -1.28$ 处取到最小值 $-0.278$），$z$ 很
# 大时 $\approx z$。
#
# 手算验证：$\operatorname{sigmoid}(1) = 1 / (1 + e^{-1}) = 0.7311$，所以
# $\operatorname{silu}(1) = 0.7311$，$\operatorname{silu}(-1) = -0.2689$。

# %%
z = torch.tensor([-6.0, -1.2785, -1.0, 0.0, 1.0, 6.0])
print("z        :", [f"{v:+.4f}" for v in z.tolist()])
print("silu(z)  :", [f"{v:+.4f}" for v in F.silu(z).tolist()])
print("relu(z)  :", [f"{v:+.4f}" for v in F.relu(z).tolist()])

# %%
book.show("ch05-activations", ch05.activations)

# %% [markdown]
# ## 3. Write it
# **Try it first:** exercise 207 asks for silu and the whole MLP from its three weight matrices. Start it with
# `python practice/judge.py start 207`, or write the two functions in the cell below (in the notebook) and run it:
# the judge grades them.

# %% [markdown] lang="zh"
# ## 3. 动手写
# **先动手：** 练习 207 要写出 silu，以及由三个权重矩阵组成的整个 MLP。可以用 `python practice/judge.py start 207` 开
# 始，也可以（在笔记本里）直接在下面的单元格写好这两个函数再运行，评测器会给出评分。


# %%
def silu(z: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


def swiglu_mlp(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor,
               down_weight: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(207, silu, swiglu_mlp)

# %% [markdown]
# ### The finished module: `qwen/mlp.py`

# %% [markdown] lang="zh"
# ### 写好的模块：`qwen/mlp.py`

# %%
book.listing("qwen/mlp.py")

# %% [markdown]
# One line of math: `down_proj(silu(gate_proj(x)) * up_proj(x))`. The names are the checkpoint's, so loading a layer's
# MLP is a plain copy of three tensors. Check it on one token by hand: the MLP's output equals the sum over hidden units
# $u$ of $\operatorname{silu}(\mathrm{gate}_u \cdot x) \cdot (\mathrm{up}_u \cdot x)$ times column $u$ of `down_proj`.

# %% [markdown] lang="zh"
# 写成数学式只有一行：`down_proj(silu(gate_proj(x)) * up_proj(x))`。子模块的名字和检查点里的一样，所以加载一层的 MLP 就
# 是原样拷贝三个张量。在一个 token 上手算验证：对所有隐藏单元 $u$，把
# $\operatorname{silu}(\mathrm{gate}_u \cdot x) \cdot (\mathrm{up}_u \cdot x)$ 乘以 `down_proj` 的第 $u$ 列，再全部加起
# 来，就是 MLP 的输出。

# %%
mlp = fill(MLP(cfg), W, "layers.0.mlp.").to(dev)
x = torch.randn(1, 1, d, device=dev)
gw, uw, dw = (getattr(mlp, n).weight for n in ("gate_proj", "up_proj", "down_proj"))
by_units = sum(F.silu(gw[u] @ x[0, 0]) * (uw[u] @ x[0, 0]) * dw[:, u] for u in range(I))
with torch.no_grad():
    y = mlp(x)
shape, off = tuple(y.shape), (y[0, 0] - by_units).abs().max()
print(tr(f"layer 0 MLP on one random vector: output {shape}; unit-by-unit sum differs by {off:.1e} (fp32 rounding)",
         f"第 0 层的 MLP 处理一个随机向量：输出形状 {shape}；与逐单元求和的结果相差 {off:.1e}（fp32 舍入）"))

# %% [markdown]
# ## 4. Each token on its own
# The MLP never mixes positions: changing one token's input changes only that token's output.

# %% [markdown] lang="zh"
# ## 4. 每个 token 各算各的
# MLP 从不混合不同位置：改动一个 token 的输入，只有这个 token 的输出会变。

# %%
xs = torch.randn(1, 5, d, device=dev)
changed = xs.clone()
changed[0, 2] += 1.0
with torch.no_grad():
    moved = (mlp(changed) - mlp(xs)).abs().amax(-1)[0]
print(tr("largest change of each output after changing token 2's input:",
         "改动 token 2 的输入后，各位置输出的最大变化："), [f"{v:.2g}" for v in moved.tolist()])

# %% [markdown]
# ## 5. The gate on a sentence
# A sentence, embedded and normalised by layer 0's `post_attention_layernorm`, through layer 0's MLP. The mixer is
# skipped here (chapter 8 runs the whole layer), so this is the MLP's response to the embeddings alone. For each token:
# how many hidden units pass almost nothing to `down_proj` ($\lvert \operatorname{silu}(z) \cdot \mathrm{up} \rvert$
# below 1 % of that token's largest). That is a small product, not a shut gate: either factor can be the small one, and
# many such units have an open gate ($z > 0$); the count of those is printed too.

# %% [markdown] lang="zh"
# ## 5. 句子上的门
# 取一个句子，做嵌入，用第 0 层的 `post_attention_layernorm` 归一化，再送进第 0 层的 MLP。这里跳过了混合器（第 8 章会把
# 整层跑完），所以看到的只是 MLP 对嵌入本身的响应。对每个 token，统计有多少隐藏单元几乎没往 `down_proj` 传东西，即
# $\lvert \operatorname{silu}(z) \cdot \mathrm{up} \rvert$ 不到该 token 最大值的 1 %。这说明的是乘积小，不是门关上了：两
# 个因子哪个小都有可能，而且这样的单元里有很多门是开着的（$z > 0$），它们的个数也一并打印出来。

# %%
tok = load_tokenizer(args.checkpoint.folder)
sentence = "The capital of France is Paris, and the capital of Japan is Tokyo."
ids = torch.tensor([tok.encode(sentence)], device=dev)
emb = W["embed_tokens.weight"][ids[0].cpu()].to(dev).float()[None]  # (1, T, d): only this sentence's rows
h = fill(RMSNorm(d, cfg.rms_norm_eps), W, "layers.0.post_attention_layernorm.").to(dev)(emb)
with torch.no_grad():
    gate, up = mlp.gate_proj(h)[0], mlp.up_proj(h)[0]  # (T, I) each
act = F.silu(gate) * up
tiny = act.abs() < 0.01 * act.abs().amax(-1, keepdim=True)  # (T, I): passes almost nothing
small = tiny.float().mean(-1)
tokens = [tok.decode([i]) for i in ids[0].tolist()]
T = len(tokens)
units = tr(f" ({REAL}: {real.intermediate_size:,})", f"（{REAL}：{real.intermediate_size:,}）") \
    if args.checkpoint.synthetic else ""
print(tr(f"{T} tokens, {I:,} units{units}", f"{T} 个 token，{I:,} 个单元{units}"))
negative, shares = (gate < 0).float().mean(), [f"{v:.0%}" for v in small.tolist()]
print(tr(f"gate z < 0 (there |silu(z)| ≤ 0.28): {negative:.0%} of (token, unit) pairs; passing almost nothing, "
         f"per token: {shares}",
         f"门 z < 0（此时 |silu(z)| ≤ 0.28）的 (token, 单元) 对占 {negative:.0%}；各 token 中几乎不向下传的单元占比："
         f"{shares}"))
n_tiny, n_open = int(tiny.sum()), int((tiny & (gate > 0)).sum())
print(tr(f"of the {n_tiny} (token, unit) pairs that pass almost nothing, {n_open} have an open gate (z > 0): a small "
         f"product, not a shut gate",
         f"在几乎不向下传的 {n_tiny} 个 (token, 单元) 对中，有 {n_open} 个的门是开着的（z > 0）：小的是乘积，"
         f"门并没有关上"))

# %%
book.show("ch05-gates", ch05.gate_activations, gate.cpu(), up.cpu(), tokens,
          tr(f"Layer 0's MLP on one sentence, mixer skipped{SYNTHETIC}",
             f"第 0 层的 MLP 处理一个句子，跳过混合器{SYNTHETIC}"))

# %% [markdown]
# On the synthetic checkpoint the weights are random, so these shares say nothing about the real model: a random
# gate is negative about half the time by construction. Run the chapter with `--model Qwen/Qwen3.5-0.8B` to see how
# the trained gate behaves.
#
# ## Try this
#
# - Replace silu by relu in a copy of the MLP and compare the outputs on the sentence: how many units does relu
#   shut exactly, and how far do the outputs move?
# - Swap `gate_proj` and `up_proj` when loading (load one tensor into the other): the output changes, though every
#   weight is the same. Which of the two does silu see?
# - Feed the same token twice in a sentence: its two MLP outputs are identical, since the mixer is skipped here.
#
# ## Show the proof
# The same input through transformers' `Qwen3_5MLP` of this checkpoint's layer 0: the same three `F.linear`, `F.silu`
# and product in the same order, so the outputs agree to fp32 rounding in fp32 and bit for bit in bf16.

# %% [markdown] lang="zh"
# 合成检查点的权重是随机的，这些比例对真实模型说明不了什么：随机的门本来就有大约一半是负的。用
# `--model Qwen/Qwen3.5-0.8B` 运行本章，可以看看训练好的门表现如何。
#
# ## 动手试试
#
# - 复制一份 MLP，把 silu 换成 relu，比较句子上的输出：relu 恰好关掉了多少个单元？输出偏了多远？
# - 加载时交换 `gate_proj` 和 `up_proj`（把一个张量加载到另一个的位置上）：每个权重都没变，输出却变了。silu 作用在哪一个
#   上？
# - 在一个句子里放两次同一个 token：它的两个 MLP 输出完全相同，因为这里跳过了混合器。
#
# ## 对照验证
# 把同样的输入送进 transformers 里本检查点第 0 层的 `Qwen3_5MLP`：同样是三次 `F.linear`、一次 `F.silu` 和一次乘法，顺序
# 也一样。所以 fp32 下两者的输出在舍入误差内一致，bf16 下逐位一致。


# %%
def compare(transformers, path):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5MLP

    text = transformers.AutoConfig.from_pretrained(path).text_config
    theirs = Qwen3_5MLP(text, intermediate_size=text.intermediate_size)
    theirs.load_state_dict({n: W[f"layers.0.mlp.{n}"] for n in theirs.state_dict()})
    ours = fill(MLP(cfg), W, "layers.0.mlp.")
    x = torch.randn(2, 7, d)
    with torch.no_grad():
        book.oracle.difference(tr("MLP, fp32", "fp32 下的 MLP"), ours(x), theirs(x))
        book.oracle.difference(tr("MLP, bf16", "bf16 下的 MLP"), ours.bfloat16()(x.bfloat16()),
                               theirs.bfloat16()(x.bfloat16()))


book.proof(compare, args.checkpoint.folder)

# %% [markdown]
# ## Summary
#
# - The MLP is $\operatorname{down}(\operatorname{silu}(\operatorname{gate}(x)) \odot \operatorname{up}(x))$: two
#   widening projections, one through silu, multiplied unit by unit, and one projection back. No biases; each token on
#   its own.
# - In the real 0.8B it is 1024 → 3584 → 1024 in every layer: 264M weights over 24 layers, more than the
#   embedding (254M) and more than all the mixers together.
# - $\operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)$: smooth, slightly negative below 0, $\approx z$ above a
#   few units.
# - In bf16 `F.silu` rounds once; $z \cdot \operatorname{sigmoid}(z)$ written out rounds twice — the reference uses
#   `F.silu`.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | $x$ (after `post_attention_layernorm`) | (B, T, d) | (B, T, 1024) |
# | `gate_proj(x)`, `up_proj(x)` | (B, T, I) | (B, T, 3584) |
# | $\operatorname{silu}(\mathrm{gate}) \odot \mathrm{up}$ | (B, T, I) | (B, T, 3584) |
# | `down_proj(…)` | (B, T, d) | (B, T, 1024) |

# %% [markdown] lang="zh"
# ## 小结
#
# - MLP 是 $\operatorname{down}(\operatorname{silu}(\operatorname{gate}(x)) \odot \operatorname{up}(x))$：两个拓宽投影，
#   其中一个经过 silu，两者逐个单元相乘，再由一个投影变回原来的宽度。没有偏置；每个 token 单独计算。
# - 真实 0.8B 的每一层都是 1024 → 3584 → 1024：24 层共 264M 个权重，比嵌入（254M）多，也超过所有混合器的总和。
# - $\operatorname{silu}(z) = z \cdot \operatorname{sigmoid}(z)$：光滑，0 以下略为负，$z$ 大过几之后 $\approx z$。
# - bf16 下 `F.silu` 只舍入一次；把 $z \cdot \operatorname{sigmoid}(z)$ 拆开写会舍入两次。参考实现用的是 `F.silu`。
#
# ### 形状
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | $x$（`post_attention_layernorm` 之后） | (B, T, d) | (B, T, 1024) |
# | `gate_proj(x)`、`up_proj(x)` | (B, T, I) | (B, T, 3584) |
# | $\operatorname{silu}(\mathrm{gate}) \odot \mathrm{up}$ | (B, T, I) | (B, T, 3584) |
# | `down_proj(…)` | (B, T, d) | (B, T, 1024) |

# %%
book.notation(args.checkpoint)

# %% [markdown]
# ### Exercises
# 207 · the SwiGLU MLP, with hints for the usual mistakes (silu on the wrong branch, gate and up swapped, sigmoid in
# place of silu, `x @ W` for `x @ W.T`).

# %% [markdown] lang="zh"
# ### 练习
# 207 · SwiGLU MLP，附常见错误的提示（silu 放错了分支、gate 和 up 弄反、用 sigmoid 代替 silu、把 `x @ W.T` 写成
# `x @ W`）。

# %%
book.attempt(207)

# %% [markdown]
# ## How to explain it
#
# 1. **What it is.** A gated linear unit:
#    $\mathrm{out} = W_{\mathrm{down}} \left(\operatorname{silu}(W_{\mathrm{gate}} x) \odot W_{\mathrm{up}} x\right)$.
#    Against the classic $W_2 \operatorname{relu}(W_1 x)$ it has a third matrix; Shazeer kept the parameter count by
#    shrinking the width from $4d$ to $\tfrac{8}{3} d$ ($3 \cdot \tfrac{8}{3} = 2 \cdot 4$). Qwen3.5-0.8B uses $3.5d$,
#    so its MLP has 31 % more parameters than a $4d$ relu MLP.
# 2. **Why the gate.** The product lets the network modulate each hidden unit multiplicatively by a function of the
#    input — a learned, input-dependent mask — and in Shazeer's comparisons GLU variants trained to lower
#    perplexity than relu or gelu MLPs at the same cost.
# 3. **Why silu.** Smooth (a non-zero gradient for negative inputs, unlike relu), close to the identity for large
#    inputs, and cheap. The MLP runs on each token alone, so it batches easily; at short contexts its 264M weights
#    are about a third of the 752M every token is multiplied by in the 0.8B.
#
# ## Files
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── tokenizer.py    (chapter 2)
# ├── embedding.py    (chapter 2)
# ├── norm.py         (chapter 3)
# ├── rope.py         (chapter 4)
# └── mlp.py          + MLP
# book/
# └── ch05.py         + this chapter's figures
# chapters/
# └── ch05_mlp.py     + this chapter's script
# notebooks/
# └── ch05_mlp.ipynb  + this notebook, written from the script
# practice/
# └── 207_swiglu/     + exercise 207
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **它是什么。** 一个门控线性单元（GLU），写出来是
#    $\mathrm{out} = W_{\mathrm{down}} \left(\operatorname{silu}(W_{\mathrm{gate}} x) \odot W_{\mathrm{up}} x\right)$。
#    和经典的 $W_2 \operatorname{relu}(W_1 x)$ 相比多了一个矩阵；为了让参数量不变，Shazeer 把宽度从 $4d$ 缩到
#    $\tfrac{8}{3} d$（$3 \cdot \tfrac{8}{3} = 2 \cdot 4$）。Qwen3.5-0.8B 用 $3.5d$，所以它的 MLP 比 $4d$ 的 relu
#    MLP 多 31 % 的参数。
# 2. **为什么要门。** 这个乘积让网络可以用输入的某个函数去乘每个隐藏单元，相当于一个学出来、随输入变化的掩码。Shazeer 的
#    对比实验里，计算量相同时，GLU 变体训练出的困惑度比 relu 或 gelu 的 MLP 更低。
# 3. **为什么用 silu。** 光滑（负输入也有非零梯度，relu 没有），输入大时接近恒等映射，计算也便宜。MLP 对每个 token 单独
#    计算，很容易凑成批次一起算；上下文较短时，0.8B 里每个 token 要乘的 752M 个权重中，MLP 的 264M 约占三分之一。
#
# ## 文件
#
# ```
# qwen/
# ├── weights.py      （第 1 章）
# ├── tokenizer.py    （第 2 章）
# ├── embedding.py    （第 2 章）
# ├── norm.py         （第 3 章）
# ├── rope.py         （第 4 章）
# └── mlp.py          + MLP
# book/
# └── ch05.py         + 本章的图
# chapters/
# └── ch05_mlp.py     + 本章的脚本
# notebooks/
# └── ch05_mlp.ipynb  + 本笔记本，由脚本生成
# practice/
# └── 207_swiglu/     + 练习 207
#
# + 本章新增 · 无标记：来自前面的章节
# ```
