"""Chapter 6: gated full attention — query and gate from one projection, QK-norm, RoPE, grouped K/V heads, the
causal softmax written out, the output gate, and the KV cache.

第 6 章：门控全注意力——查询和门出自同一个投影、QK-norm、RoPE、分组共享的键值头、手写的因果
softmax、输出门，以及键值缓存。

Run: python chapters/ch06_attention.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch06_attention.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 6 · Gated full attention and the KV cache
#
# Every fourth layer of Qwen3.5 mixes tokens with ordinary softmax attention: each token builds a query, compares it
# with the keys of every earlier token, and takes a weighted average of their values. Qwen3.5 changes four things in the
# textbook version: a per-head **output gate**, made by the same projection as the query and applied as
# $\operatorname{sigmoid}(\mathrm{gate})$ to the heads' output before the output projection; an RMSNorm on each head's
# query and key (**QK-norm**) before RoPE; **partial RoPE** (only the first quarter of each head's dimensions rotate);
# and **grouped-query attention** (several query heads share one key/value head). This chapter writes
# `qwen/attention.py`, runs it on a sentence step by step, and adds the **KV cache** that generation needs.

# %% [markdown] lang="zh"
# # 第 6 章 · 门控全注意力与键值缓存
#
# Qwen3.5 每四层中有一层用普通的 softmax 注意力在 token 之间交换信息：每个 token 算出一个查询，和它之前每个 token 的键逐
# 一比较，再按比较结果对这些 token 的值加权平均。和教科书上的版本相比，Qwen3.5 改了四处。一是每个头带一个**输出门**：门
# 和查询出自同一个投影，在输出投影之前，以 $\operatorname{sigmoid}(\mathrm{gate})$ 的形式乘到各头的输出上。二是在 RoPE
# 之前，对每个头的查询和键各做一次 RMSNorm（**QK-norm**）。三是**部分 RoPE**：每个头只有前四分之一的维度旋转。四是**分组
# 查询注意力**：几个查询头共用一个键值头。本章写出 `qwen/attention.py`，在一个句子上一步步运行它，最后加上生成要用的**键
# 值缓存**（KV cache）。

# %%
import time

import torch
import torch.nn.functional as F

import book
from book import ch06
from qwen.attention import GatedAttention, KVCache
from qwen.course import chapter_args
from qwen.family import SIZES, all_attention_bytes, cache_bytes
from qwen.lang import tr
from qwen.norm import RMSNorm
from qwen.rope import RotaryEmbedding, apply_rope
from qwen.sizes import real_config
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights, fill

args = chapter_args(__doc__)
cfg = args.checkpoint.config
W = Weights(args.checkpoint)  # lazy: only the tensors this chapter asks for are read
real = real_config()
REAL = tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B")
dev, d, H, Hkv, D = args.device, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
R = int(D * cfg.partial_rotary_factor)
layer = cfg.layer_types.index("full_attention")  # the first full-attention layer
prefix = f"layers.{layer}.self_attn."
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
SYNTHETIC = tr(" (synthetic weights)", "（合成权重）") if args.checkpoint.synthetic else ""  # figures only
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %% [markdown]
# Where it sits: the mixer of layers 3, 7, 11, … (one in four); the other layers use Gated DeltaNet (chapter 7).
# The KV cache box belongs to generation (chapter 9), but this chapter writes it, because attention defines what it
# must hold.

# %% [markdown] lang="zh"
# 它在模型中的位置：第 3、7、11……层的混合器（四层里有一层）；其余各层用 Gated DeltaNet（第 7 章）。图中键值缓存这一格属
# 于生成（第 9 章），却放在本章来写，因为缓存里该存什么，由注意力决定。

# %%
book.show("ch06-map", book.model_map.draw, "attention")

# %% [markdown]
# ## 1. Six tensors per layer
# `q_proj` is twice as tall as the query needs: it makes $H$ query heads **and** $H$ gate heads of $D$ values each.
# `k_proj` and `v_proj` make only $H_{kv}$ heads, shared by groups of query heads. `o_proj` maps the $H$ heads back to
# the residual width $d$. `q_norm` and `k_norm` hold one $(1 + w)$ scale of length $D$, used by every head. No biases.

# %% [markdown] lang="zh"
# ## 1. 每层六个张量
# `q_proj` 的行数是查询所需的两倍：它同时产生 $H$ 个查询头**和** $H$ 个门头，每个头 $D$ 个值。`k_proj` 和 `v_proj` 只产
# 生 $H_{kv}$ 个头，每个头由一组查询头共用。`o_proj` 把 $H$ 个头映射回残差流的宽度 $d$。`q_norm` 和 `k_norm` 各存一个长
# 度为 $D$ 的比例 $(1 + w)$，所有头共用。没有偏置。

# %%
full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
print(tr(f"full-attention layers: {full} ({len(full)} of {cfg.num_hidden_layers})",
         f"全注意力层：{full}（{cfg.num_hidden_layers} 层中的 {len(full)} 层）"))
SHAPES = {"q_proj.weight": ("(2·H·D, d)", lambda c: (2 * c.num_attention_heads * c.head_dim, c.hidden_size)),
          "k_proj.weight": ("(Hkv·D, d)", lambda c: (c.num_key_value_heads * c.head_dim, c.hidden_size)),
          "v_proj.weight": ("(Hkv·D, d)", lambda c: (c.num_key_value_heads * c.head_dim, c.hidden_size)),
          "o_proj.weight": ("(d, H·D)", lambda c: (c.hidden_size, c.num_attention_heads * c.head_dim)),
          "q_norm.weight": ("(D,)", lambda c: (c.head_dim,)), "k_norm.weight": ("(D,)", lambda c: (c.head_dim,))}
print(tr(f"   {'':16s} {'this checkpoint':16s} {'formula':12s} {REAL}",
         f"   {'':16s} {'本检查点':12s} {'公式':10s} {REAL}"))  # a CJK character is two columns wide
for name, (formula, shape) in SHAPES.items():
    assert tuple(W[prefix + name].shape) == shape(cfg)
    print(f"   {name:16s} {str(shape(cfg)):16s} {formula:12s} {shape(real)}")
for label, c in ((tr("this checkpoint", "本检查点"), cfg), (REAL, real)):
    per_layer = sum(torch.Size(shape(c)).numel() for _, shape in SHAPES.values())
    n = c.layer_types.count("full_attention")
    print(tr(f"{label}: H = {c.num_attention_heads}, Hkv = {c.num_key_value_heads}, D = {c.head_dim}: "
             f"{per_layer:,} weights per layer, {per_layer * n:,} in its {n} full-attention layers",
             f"{label}：H = {c.num_attention_heads}，Hkv = {c.num_key_value_heads}，D = {c.head_dim}："
             f"每层 {per_layer:,} 个权重，{n} 个全注意力层共 {per_layer * n:,} 个"))

# %% [markdown]
# ## 2. Write it
# The recipe, for $x$ of shape (B, T, d) and the RoPE tables cos, sin of the $T$ positions (chapter 4):
#
# 1. `q_proj(x)` viewed as $(B, T, H, 2 \cdot D)$: for each head, the first $D$ values are its query, the next $D$ its
#    gate.
# 2. `q_norm` on each query head, `k_norm` on each key head ($k$ = `k_proj(x)` viewed as $(B, T, H_{kv}, D)$);
#    $v$ = `v_proj(x)`.
# 3. RoPE on $q$ and $k$ — after the norm.
# 4. $\mathrm{scores} = q k^\top / \sqrt{D}$ for every pair (query $t$, key $s$); $-\infty$ (in practice the most
#    negative float) where $s > t$ or key $s$ is padding; softmax over $s$ in fp32; the output of each head is the
#    weighted sum of the values. Query head $h$ reads K/V head $\lfloor h / (H/H_{kv}) \rfloor$.
# 5. Heads side by side $(B, T, H \cdot D)$, times $\operatorname{sigmoid}(\mathrm{gate})$, then `o_proj`.
#
# **Try it first:** exercise 208 asks for the attention (`attend`) and the whole layer (`gated_attention`) from its
# six weights. Start it with `python practice/judge.py start 208`, or write the two functions in the cell below (in
# the notebook) and run it: the judge grades them.

# %% [markdown] lang="zh"
# ## 2. 动手写
# 输入 $x$ 的形状为 (B, T, d)，cos、sin 是这 $T$ 个位置的 RoPE 表（第 4 章）。做法如下：
#
# 1. 把 `q_proj(x)` 看成 $(B, T, H, 2 \cdot D)$：每个头的前 $D$ 个值是它的查询，后 $D$ 个是它的门。
# 2. 每个查询头做 `q_norm`，每个键头做 `k_norm`（$k$ = `k_proj(x)`，看成 $(B, T, H_{kv}, D)$）；$v$ = `v_proj(x)`。
# 3. 对 $q$ 和 $k$ 做 RoPE，放在归一化之后。
# 4. 对每一对（查询 $t$，键 $s$）算 $\mathrm{scores} = q k^\top / \sqrt{D}$；$s > t$ 或者键 $s$ 是填充时，分数置为
#    $-\infty$（实际用最负的浮点数）；在 fp32 下对 $s$ 做 softmax；每个头的输出是值的加权和。查询头 $h$ 读第
#    $\lfloor h / (H/H_{kv}) \rfloor$ 个键值头。
# 5. 各头并排拼成 $(B, T, H \cdot D)$，乘以 $\operatorname{sigmoid}(\mathrm{gate})$，再过 `o_proj`。
#
# **先动手：** 练习 208 要用这一层的六个权重写出注意力（`attend`）和整个层（`gated_attention`）。可以用
# `python practice/judge.py start 208` 开始，也可以（在笔记本里）直接在下面的单元格写好这两个函数再运行，评测器会给出评
# 分。


# %%
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    raise NotImplementedError  # your code here


def gated_attention(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor,
                    mask: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(208, attend, gated_attention)

# %% [markdown]
# ### The finished module: `qwen/attention.py`

# %% [markdown] lang="zh"
# ### 写好的模块：`qwen/attention.py`

# %%
book.listing("qwen/attention.py")

# %% [markdown]
# `GatedAttention.forward` is the recipe line by line; `attention` is step 4 and `causal_mask` builds which keys each
# query may see; `KVCache` is section 7. The rest of the chapter runs the module's parts on a sentence, one step at
# a time, and checks each step.
#
# ## 3. Query and gate, interleaved per head
# A sentence, embedded and normalised by the layer's `input_layernorm`. The layers before it are skipped (chapter 8
# runs the whole stack), so what follows is this layer's response to the embeddings alone.

# %% [markdown] lang="zh"
# `GatedAttention.forward` 就是把上面的做法逐行写出来；`attention` 对应第 4 步，`causal_mask` 决定每个查询能看到哪些
# 键；`KVCache` 在第 7 节。本章余下的部分在一个句子上把这个模块拆开，一步一步地运行，每一步都做检查。
#
# ## 3. 查询和门：按头交错
# 取一个句子，做嵌入，再用该层的 `input_layernorm` 归一化。前面的各层都跳过了（第 8 章才运行整个堆叠），所以下面看到的是
# 这一层对嵌入本身的响应。

# %%
tok = load_tokenizer(args.checkpoint.folder)
sentence = "The cat sat on the mat because it was tired."
ids = tok.encode(sentence)
tokens = [tok.decode([i]) for i in ids]
T = len(ids)
emb = W["embed_tokens.weight"][ids].float()[None].to(dev)  # (1, T, d): only this sentence's rows are read
x = fill(RMSNorm(d, cfg.rms_norm_eps), W, f"layers.{layer}.input_layernorm.").to(dev)(emb)
attn = fill(GatedAttention(cfg), W, prefix).to(dev)
qg = attn.q_proj(x)  # (1, T, 2·H·D)
q, gate = qg.view(1, T, H, 2 * D).split(D, dim=-1)  # each (1, T, H, D)
print(tr(f"{T} tokens: {tokens}", f"{T} 个 token：{tokens}"))
print(tr(f"q_proj(x) {tuple(qg.shape)} -> view (1, T, H, 2D) {(1, T, H, 2 * D)} -> query {tuple(q.shape)} "
         f"and gate {tuple(gate.shape)}",
         f"q_proj(x) {tuple(qg.shape)} -> 看成 (1, T, H, 2D) {(1, T, H, 2 * D)} -> 查询 {tuple(q.shape)}，"
         f"门 {tuple(gate.shape)}"))
print(tr(f"head 1 reads rows {2 * D}..{3 * D - 1} of q_proj.weight as its query and rows {3 * D}..{4 * D - 1} as "
         f"its gate",
         f"头 1 把 q_proj.weight 的第 {2 * D}..{3 * D - 1} 行当作查询，第 {3 * D}..{4 * D - 1} 行当作门"))
blocked = qg.view(1, T, 2, H, D)  # the wrong reading: [all queries | all gates]
wrong = torch.equal(blocked[:, :, 0, 1], gate[:, :, 0])
print(tr(f"read as [all queries | all gates], 'query head 1' would be head 0's gate: {wrong}",
         f"按 [全部查询 | 全部门] 读取，“查询头 1”其实是头 0 的门：{'是' if wrong else '否'}"))

# %% [markdown]
# ## 4. QK-norm, then RoPE
# Each head's query and key are RMS-normalised over $D$ (the zero-centred RMSNorm of chapter 3, one weight shared by all
# heads). This bounds every score: $\lvert q \cdot k \rvert \le \lVert q \rVert \, \lVert k \rVert$, and after the norm
# a head's length is at most $\sqrt{D} \cdot \max \lvert 1 + w \rvert$ whatever the input. Then RoPE rotates the first
# $R$ dims; a rotation keeps lengths, so the bound survives.

# %% [markdown] lang="zh"
# ## 4. 先 QK-norm，再 RoPE
# 每个头的查询和键在 $D$ 维上做 RMS 归一化（即第 3 章的零中心 RMSNorm，所有头共用一份权重）。这给每个分数都加了上
# 界：$\lvert q \cdot k \rvert \le \lVert q \rVert \, \lVert k \rVert$，而归一化之后，不论输入是什么，一个头的长度至多
# 是 $\sqrt{D} \cdot \max \lvert 1 + w \rvert$。接着 RoPE 旋转前 $R$ 维。旋转不改变长度，所以上界依然成立。

# %%
rope = RotaryEmbedding(cfg)
positions = torch.arange(T, device=dev)[None]  # (1, T)
cos, sin = rope(positions, x.dtype)  # (1, T, R)
qn = attn.q_norm(q).transpose(1, 2)  # (1, H, T, D)
k = attn.k_norm(attn.k_proj(x).view(1, T, Hkv, D)).transpose(1, 2)  # (1, Hkv, T, D)
v = attn.v_proj(x).view(1, T, Hkv, D).transpose(1, 2)  # (1, Hkv, T, D): no norm, no RoPE
q_raw_rms, q_rms = q.pow(2).mean(-1).sqrt(), qn.pow(2).mean(-1).sqrt()
print(tr(f"RMS of the query heads before q_norm: {q_raw_rms.min():.2f} .. {q_raw_rms.max():.2f}; after: "
         f"{q_rms.min():.2f} .. {q_rms.max():.2f}",
         f"各查询头在 q_norm 之前的 RMS：{q_raw_rms.min():.2f} .. {q_raw_rms.max():.2f}；之后："
         f"{q_rms.min():.2f} .. {q_rms.max():.2f}"))
qr, kr = apply_rope(qn, cos, sin), apply_rope(k, cos, sin)
moved, kept = (qr.norm(dim=-1) - qn.norm(dim=-1)).abs().max(), torch.equal(qr[..., R:], qn[..., R:])
print(tr(f"RoPE keeps each head's length: max change {moved:.1e}; dims {R}..{D - 1} untouched: {kept}",
         f"RoPE 不改变每个头的长度：最大变化 {moved:.1e}；第 {R}..{D - 1} 维原样不动：{'是' if kept else '否'}"))

# %% [markdown]
# ## 5. The scores, the mask, the softmax, the weighted sum
# Grouped-query attention first: K/V head $j$ serves query heads
# $j \cdot (H/H_{kv}), \dots, (j+1) \cdot (H/H_{kv}) - 1$, a run of consecutive heads, so the keys are expanded with
# `repeat_interleave` (not `repeat`, which would tile them). Then four lines: scores, mask, softmax, weighted sum.

# %% [markdown] lang="zh"
# ## 5. 分数、掩码、softmax、加权和
# 先处理分组查询注意力：第 $j$ 个键值头服务查询头 $j \cdot (H/H_{kv}), \dots, (j+1) \cdot (H/H_{kv}) - 1$，这是一串相邻
# 的头，所以键要用 `repeat_interleave` 展开。不能用 `repeat`，它会把整组头平铺重复。然后是四行代码：分数、掩
# 码、softmax、加权和。

# %%
group, real_group = H // Hkv, real.num_attention_heads // real.num_key_value_heads
reads = [h // group for h in range(H)]
real_reads = [h // real_group for h in range(real.num_attention_heads)]
print(tr(f"H = {H} query heads, Hkv = {Hkv} K/V heads: query head h reads K/V head {reads} ({REAL}: {real_reads})",
         f"H = {H} 个查询头，Hkv = {Hkv} 个键值头：查询头 h 依次读取的键值头为 {reads}（{REAL}：{real_reads}）"))
kx, vx = kr.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (1, H, T, D)
raw = qr @ kx.transpose(-2, -1)  # (1, H, T, T): one score per (query, key)
scores = raw * D ** -0.5
allowed = torch.ones(T, T, dtype=torch.bool, device=dev).tril()  # query t sees keys 0..t
scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
probs = torch.softmax(scores, dim=-1, dtype=torch.float32)  # (1, H, T, T)
heads = probs @ vx  # (1, H, T, D)
off_one = (probs.sum(-1) - 1).abs().max()
above, itself = bool((probs[..., ~allowed] == 0).all()), bool((probs[..., 0, 0] == 1).all())
print(tr(f"every row of probabilities sums to 1: max |sum - 1| = {off_one:.1e}; above the diagonal exactly 0: "
         f"{above}; the first token attends only to itself: {itself}",
         f"每行概率之和都是 1，与 1 的最大偏差为 {off_one:.1e}；对角线以上恰好为 0：{'是' if above else '否'}；"
         f"第一个 token 只关注它自己：{'是' if itself else '否'}"))

# %% [markdown]
# Why divide by $\sqrt{D}$: a dot product of $D$ terms grows like $\sqrt{D}$. Without the scale the softmax of a large
# head ($D = 256$ in the real 0.8B) is far sharper; with it, the spread of the scores no longer depends on $D$ — exactly
# so when the entries of $q$ and $k$ are roughly independent with unit variance. QK-norm gives each head an RMS near 1
# (times its $1 + w$), but not independent entries: a trained head's $q$ and $k$ can line up, and its scores spread
# more.

# %% [markdown] lang="zh"
# 为什么除以 $\sqrt{D}$：$D$ 项相加的点积，大小按 $\sqrt{D}$ 增长。不做缩放，宽的头（真实 0.8B 里 $D = 256$）的 softmax
# 会尖锐得多；缩放之后，分数的离散程度就不再依赖 $D$。当 $q$ 和 $k$ 的各分量大致独立、方差为 1 时，这一点严格成
# 立。QK-norm 让每个头的 RMS 接近 1（再乘上它的 $1 + w$），但并不保证各分量独立：训练过的头，其 $q$ 和 $k$ 可能方向趋
# 同，分数就散得更开。

# %%
unscaled = torch.softmax(raw.masked_fill(~allowed, torch.finfo(raw.dtype).min), dim=-1, dtype=torch.float32)
spread, scaled_spread = raw[..., allowed].std(), (raw * D ** -0.5)[..., allowed].std()
print(tr(f"score spread (std over allowed pairs): {spread:.2f} without 1/√D, {scaled_spread:.2f} with it "
         f"(√D = {D ** 0.5:g})",
         f"分数的离散程度（所有允许的位置对上的标准差）：不乘 1/√D 时为 {spread:.2f}，乘上后为 {scaled_spread:.2f}"
         f"（√D = {D ** 0.5:g}）"))
peak, scaled_peak = unscaled[..., 4:, :].amax(-1).mean(), probs[..., 4:, :].amax(-1).mean()
print(tr(f"mean largest probability of a row from token 4 on: {peak:.2f} without the scale, {scaled_peak:.2f} "
         f"with it",
         f"从 token 4 起每行最大概率的平均值：不缩放 {peak:.2f}，缩放后 {scaled_peak:.2f}"))

# %% [markdown]
# The probabilities of a few heads, tokens as labels. On the synthetic checkpoint the weights are random, so these
# maps show the causal triangle and nothing about language; run the chapter with `--model Qwen/Qwen3.5-0.8B` to see
# what trained heads attend to.

# %% [markdown] lang="zh"
# 下图是几个头的概率，刻度标的是 token。合成检查点的权重是随机的，图上只能看出因果掩码的三角形，与语言毫无关系；用
# `--model Qwen/Qwen3.5-0.8B` 运行本章，才能看到训练过的头在关注什么。

# %%
picks = sorted({0, 1, H // 2, H - 1})
book.show("ch06-maps", ch06.attention_maps, probs[0].cpu(), tokens, picks,
          tr(f"Attention of layer {layer}'s heads on one sentence, earlier layers skipped{SYNTHETIC}",
             f"第 {layer} 层各头对一个句子的注意力，前面各层已跳过{SYNTHETIC}"))

# %% [markdown]
# ## 6. The output gate
# Each head's output is multiplied, dimension by dimension, by $\operatorname{sigmoid}(\mathrm{gate})$: a number between
# 0 and 1 computed from the token itself. A head can shut ($\mathrm{gate} \ll 0$) when it has nothing useful to add. The
# Qwen team's study of this gate (Qiu et al., 2025, "Gated Attention for Large Language Models") reports that it adds a
# non-linearity between the value and output projections, makes the output sparse, and mitigates the "attention sink"
# (heads dumping most of their weight on the first token): the sink is much weaker with the gate, not gone. The steps
# above, put together, are the module.

# %% [markdown] lang="zh"
# ## 6. 输出门
# 每个头的输出逐维乘以 $\operatorname{sigmoid}(\mathrm{gate})$，这是一个 0 到 1 之间的数，由这个 token 自己算出。一个头
# 没什么有用的东西可加时，可以把自己关掉（$\mathrm{gate} \ll 0$）。Qwen 团队专门研究过这个门（Qiu et al., 2025，“Gated
# Attention for Large Language Models”）。论文报告说：它在值投影和输出投影之间加了一层非线性，让输出变得稀疏，还缓解了注
# 意力汇聚（attention sink，即各头把大部分权重压在第一个 token 上）。有了门，汇聚现象弱了很多，但并没有消失。把上面的步
# 骤拼在一起，就是这个模块。

# %%
gated = heads.transpose(1, 2).reshape(1, T, H * D) * torch.sigmoid(gate.reshape(1, T, H * D))
y = attn.o_proj(gated)  # (1, T, d)
by_hand = (y - attn(x, cos, sin)).abs().max()
print(tr(f"the steps by hand vs GatedAttention: max |diff| = {by_hand:.1e}",
         f"手写步骤与 GatedAttention 的最大差值：{by_hand:.1e}"))
s = torch.sigmoid(gate)
shut, open_ = (s < 0.1).float().mean(), (s > 0.9).float().mean()
drawn = tr(" (random weights: where they were drawn, not what a model learned)",
           "（随机权重：这只反映抽样方式，不是模型学到的）") if args.checkpoint.synthetic else ""
print(tr(f"sigmoid(gate) on this sentence: mean {s.mean():.2f}, {shut:.0%} below 0.1, {open_:.0%} above 0.9{drawn}",
         f"这个句子上的 sigmoid(gate)：均值 {s.mean():.2f}，{shut:.0%} 小于 0.1，{open_:.0%} 大于 0.9{drawn}"))

# %%
book.show("ch06-gate", ch06.gate_distribution, gate.reshape(T, H * D).cpu(), H,
          tr(f"The output gate of layer {layer} on one sentence{SYNTHETIC}",
             f"第 {layer} 层的输出门在一个句子上的取值{SYNTHETIC}"))

# %% [markdown]
# On random weights the gate sits around 0.5 with a spread set by how the synthetic weights were drawn: a finding
# about the real model needs the real weights.
#
# ## 7. The KV cache
# Generating text adds one token at a time, and each new token's query needs the keys and values of all earlier tokens.
# They never change, because the model is causal: token $s$'s key and value depend only on tokens $0, \dots, s$ (every
# mixer before this layer looks only backwards), and its position $s$ is fixed, so its rotation is too. Tokens added
# later cannot change them, and recomputing them for every new token would be wasted work. The KV cache keeps them: keys
# **after `k_norm` and RoPE**, exactly as attention uses them, and values, each $(B, H_{kv}, S, D)$, growing along $S$.
#
# **Try it first:** exercise 209 asks for one attention step that reads a cache and returns it grown
# (`python practice/judge.py start 209`, or the cell below in the notebook).

# %% [markdown] lang="zh"
# 在随机权重上，门的值集中在 0.5 附近，散开多少取决于合成权重是怎么抽样的。关于真实模型的结论，要用真实权重才能下。
#
# ## 7. 键值缓存
# 生成文本时每次只加一个 token，而每个新 token 的查询都要用到之前所有 token 的键和值。这些键和值永远不会变，因为模型是因
# 果的：token $s$ 的键和值只依赖 token $0, \dots, s$（这一层之前的每个混合器都只看它之前的 token），它的位置 $s$ 也是固
# 定的，旋转角度随之固定。后来的 token 改变不了它们，每来一个新 token 都重算一遍，纯属浪费。键值缓存（KV cache）把它们存
# 下来：键存的是**经过 `k_norm` 和 RoPE 之后**的，和注意力实际用的完全一样；值也一并存下。两者的形状都是
# $(B, H_{kv}, S, D)$，沿 $S$ 增长。
#
# **先动手：** 练习 209 要写一步注意力：读入缓存，返回增长后的缓存（`python practice/judge.py start 209`，或者在笔记本里
# 用下面的单元格）。


# %%
def attention_step(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-6) -> tuple:
    raise NotImplementedError  # your code here


book.attempt(209, attention_step)

# %% [markdown]
# `KVCache.update` appends along S and returns everything stored; `GatedAttention.forward` places new token $i$ at
# position `cache.length + i` in the causal mask. The rule that defines a correct cache: the sentence processed in
# pieces — a prompt, then one token at a time — gives what it gives processed at once. A first piece shorter than
# the next works too.

# %% [markdown] lang="zh"
# `KVCache.update` 沿 S 追加，并返回存下的全部内容；`GatedAttention.forward` 在因果掩码里把第 $i$ 个新 token 放在
# `cache.length + i` 的位置上。缓存是否正确，标准只有一条：把句子分段处理（先是提示词，再每次一个 token），结果与一次处
# 理整句相同。第一段比第二段短也没问题。

# %%
whole = attn(x, cos, sin)
cache, outs, start = KVCache(), [], 0
for n in [2, 5] + [1] * (T - 7):
    end = start + n
    outs.append(attn(x[:, start:end], cos[:, start:end], sin[:, start:end], cache=cache))
    new = tr("new tokens", "个新 token") if n > 1 else tr("new token ", "个新 token")
    print(tr(f"   {n} {new} -> cache keys {tuple(cache.k.shape)}, values {tuple(cache.v.shape)}",
             f"   {n} {new}，缓存的键变为 {tuple(cache.k.shape)}，值变为 {tuple(cache.v.shape)}"))
    start = end
pieces, cached = (torch.cat(outs, 1) - whole).abs().max(), (cache.k - kr).abs().max()
print(tr(f"in pieces vs at once: max |diff| = {pieces:.1e} (fp32 rounding); "
         f"cached keys vs the keys after k_norm and RoPE above: max |diff| = {cached:.1e}",
         f"分段处理与一次处理的最大差值：{pieces:.1e}（fp32 舍入误差）；"
         f"缓存的键与上面经过 k_norm 和 RoPE 的键的最大差值：{cached:.1e}"))

# %% [markdown]
# A continuation projects only its new tokens: the step above multiplied one row of x by `q_proj`, `k_proj` and
# `v_proj`, whatever the length of the cache. Attention itself still reads every cached key, so each step costs time
# and memory in proportion to the context. How much memory: $2 \times H_{kv} \times D$ values per token (K and V) in
# each full-attention layer, 2 bytes each in bf16.

# %% [markdown] lang="zh"
# 续写时只投影新 token：不管缓存多长，上面那一步都只把 x 的一行乘以 `q_proj`、`k_proj` 和 `v_proj`。但注意力本身仍要读缓
# 存里的每个键，所以每一步的时间和内存开销都与上下文长度成正比。内存具体是多少：每个全注意力层每个 token 存
# $2 \times H_{kv} \times D$ 个值（K 和 V 各一份），bf16 下每个值 2 字节。

# %%
per_token = cache_bytes(cfg, 1)[0]  # bf16, as the checkpoint stores it
print(tr(f"this checkpoint: {len(full)} full layers × 2 × {Hkv} × {D} × 2 bytes = {per_token:,} bytes per token",
         f"本检查点：{len(full)} 个全注意力层 × 2 × {Hkv} × {D} × 2 字节 = 每 token {per_token:,} 字节"))
for name, c in SIZES.items():
    per, every = cache_bytes(c, 1)[0], all_attention_bytes(c, 262144)
    print(tr(f"Qwen3.5-{name:4s}: {per:7,} bytes per token; {per * 32768 / 2 ** 30:5.2f} GiB at 32,768 tokens, "
             f"{per * 262144 / 2 ** 30:5.1f} GiB at 262,144; with full attention in all "
             f"{c.num_hidden_layers} layers: {every / 2 ** 30:5.1f} GiB",
             f"Qwen3.5-{name + '：':5s}每 token {per:7,} 字节；32,768 个 token 时 {per * 32768 / 2 ** 30:5.2f} GiB，"
             f"262,144 个时 {per * 262144 / 2 ** 30:5.1f} GiB；若 {c.num_hidden_layers} 层全用全注意力："
             f"{every / 2 ** 30:5.1f} GiB"))
deltanet = cache_bytes(real, 0)[1]  # fp32 states + bf16 conv inputs, none of it growing
others = tr(", ", "，").join(f"{name} {cache_bytes(c, 0)[1] / 2 ** 20:.1f} MiB" for name, c in SIZES.items()
                            if name != "0.8B")
linear = real.layer_types.count("linear_attention")
print(tr(f"{REAL}'s {linear} DeltaNet layers keep {deltanet / 2 ** 20:.1f} MiB of state at any length (chapter 7); "
         f"the other sizes: {others}",
         f"{REAL} 的 {linear} 个 DeltaNet 层无论文本多长，状态都只占 {deltanet / 2 ** 20:.1f} MiB（第 7 章）；"
         f"其他尺寸：{others}"))

# %% [markdown]
# The sizes come from public copies of each model's config (the course cannot reach the hub to check them; the
# sources are listed in `qwen/family.py`). Every size puts full attention in one layer of four, so its cache is a
# quarter of what an all-attention model of the same shape would need; the DeltaNet layers keep a state that does
# not grow (dashed, one line per size).

# %% [markdown] lang="zh"
# 这些尺寸取自各模型 config 的公开副本（本课程连不上 hub，无法核对；出处列在 `qwen/family.py` 里）。每个尺寸都是四层里有
# 一层用全注意力，所以缓存只有同样形状、层层都用全注意力的模型的四分之一；DeltaNet 层存的状态不会增长（虚线，每个尺寸一
# 条）。

# %%
book.show("ch06-kv-bytes", ch06.kv_cache_bytes, SIZES, 262_144)

# %% [markdown]
# ### Appending without copying
# The obvious way to grow the cache, `torch.cat((k_old, k_new), dim=2)`, makes a new tensor and copies every stored
# key into it: on every token, the whole cache. At 32k tokens that is 64 MiB per full-attention layer in the real
# 0.8B, more bytes per step than the layer's weights. `KVCache` writes the new rows into buffers that have room to
# spare and keeps a `length`; only a full buffer is moved to a larger one, a quarter larger each time, so a row is
# copied about four times in total however long the text grows. One layer of the real 0.8B, bf16, one new token:

# %% [markdown] lang="zh"
# ### 追加而不复制
# 让缓存变长，最直接的写法是 `torch.cat((k_old, k_new), dim=2)`。它会新建一个张量，把存过的每个键都复制进去，也就是每来
# 一个 token，整个缓存都要复制一遍。在真实 0.8B 里，32k 个 token 时每个全注意力层就要复制 64 MiB，每一步搬的字节比这一层
# 的权重还多。`KVCache` 把新行写进留有余量的缓冲区，并记下 `length`；只有缓冲区写满时，才整体搬到一个大四分之一的新缓冲
# 区里。这样不管文本多长，每一行总共只被复制大约四次。下面是真实 0.8B 的一层，bf16，追加一个新 token：


# %%
def append_ms(S, how, repeats=5):
    """Median milliseconds to append one token's key and value to a layer holding S tokens (the real 0.8B's
    Hkv × D, bf16), by torch.cat or by KVCache.update."""
    old = torch.zeros(1, real.num_key_value_heads, S, real.head_dim, dtype=torch.bfloat16)
    new = torch.ones(1, real.num_key_value_heads, 1, real.head_dim, dtype=torch.bfloat16)
    cache = KVCache()
    cache.update(old, old)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        if how == "cat":
            torch.cat((old, new), dim=2), torch.cat((old, new), dim=2)  # a new K and a new V: everything copied
        else:
            cache.update(new, new)  # one row written into each buffer
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[repeats // 2]


full_layers = real.layer_types.count("full_attention")
for S in (1024, 8192, 32768):
    cat, update = append_ms(S, "cat"), append_ms(S, "update")
    print(tr(f"   {S:6,} tokens cached: torch.cat {cat:.3f} ms, KVCache.update {update:.3f} ms per layer; "
             f"× {full_layers} layers: {full_layers * cat:.2f} ms against {full_layers * update:.2f} ms per token",
             f"   缓存了 {S:6,} 个 token：每层 torch.cat {cat:.3f} ms，KVCache.update {update:.3f} ms；"
             f"× {full_layers} 层，每个 token 合计 {full_layers * cat:.2f} ms 与 {full_layers * update:.2f} ms"))

# %% [markdown]
# The copy grows with the text; the write does not (timings on a shared machine vary from run to run; the growth
# does not). Reading the cache still grows with the text: 12 KiB per token over the six layers, about 384 MiB at
# 32k beside 1.5 GB of bf16 weights, so a decode step at 32k should cost about a quarter more than at 1k, not
# several times more. `bench/bench_model.py --contexts 1024 8192 32768` measures it on the whole model.

# %% [markdown] lang="zh"
# 复制的开销随文本增长，写入的开销不随之增长（共享机器上的计时每次运行都不同，但增长的趋势不变）。读缓存的开销仍随文本增
# 长：六层合计每 token 12 KiB，32k 时约 384 MiB，而 bf16 权重有 1.5 GB，所以 32k 时一步解码应当只比 1k 时多四分之一左
# 右，而不是贵好几倍。`bench/bench_model.py --contexts 1024 8192 32768` 在整个模型上测量了这一点。

# %% [markdown]
# ## 8. A faster path, proven equal
# PyTorch's fused `F.scaled_dot_product_attention` computes the same function (on GPUs with flash or memory-efficient
# kernels that never store the $T \times S$ matrix). It is a different order of operations, so it agrees to rounding,
# not bit for bit: in bf16 it can be one grid step away from the written-out version that transformers' eager path and
# this course use.

# %% [markdown] lang="zh"
# ## 8. 更快的路径，结果一致
# PyTorch 的融合算子 `F.scaled_dot_product_attention` 计算的是同一个函数（在 GPU 上用 flash 或 memory-efficient kernel，
# 从不把 $T \times S$ 的矩阵存下来）。它的运算顺序不同，所以结果只在舍入误差以内一致，并非逐位一致：在 bf16 下，它与
# transformers 的 eager 路径以及本课程的手写版本可能差一个 bf16 步长。

# %%
fused = (F.scaled_dot_product_attention(qr, kx, vx, is_causal=True) - heads).abs().max()
print(tr(f"F.scaled_dot_product_attention vs the written-out attention: max |diff| = {fused:.1e}",
         f"F.scaled_dot_product_attention 与手写注意力的最大差值：{fused:.1e}"))

# %% [markdown]
# ## Try this
#
# - Load `q_proj` as [all queries | all gates] (view (1, T, 2, H, D) and split on dim 2) and run the layer: how far
#   does the output move? Nothing errors: every shape still fits, which is why this bug survives.
# - Replace `repeat_interleave` by `repeat` for the keys and values: with $H = 8$ and $H_{kv} = 2$ (the real 0.8B),
#   which query heads now read a different K/V head?
# - Decode with the cache, but feed the RoPE tables of positions $0, \dots, n-1$ again for the new tokens instead of
#   their real positions: the output changes though every weight is the same. Which part of the cache is now wrong?
#
# ## Show the proof
# The sentence through transformers' `Qwen3_5Attention` (eager) of the same layer, with its own RoPE tables and
# causal mask: the same operations in the same order, so the outputs agree exactly in fp32 and in bf16.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 把 `q_proj` 按 [全部查询 | 全部门] 的方式读取（用 `view` 变成 (1, T, 2, H, D)，再在第 2 维上拆开），然后运行这一层：
#   输出偏了多远？程序不会报错，每个形状都对得上，这正是这个 bug 不容易被发现的原因。
# - 把键和值的 `repeat_interleave` 换成 `repeat`：在 $H = 8$、$H_{kv} = 2$ 时（真实 0.8B），哪些查询头读到了别的键值头？
# - 用缓存解码，但给新 token 传位置 $0, \dots, n-1$ 的 RoPE 表，而不是它们真实的位置：权重一个没变，输出却变了。缓存里的
#   哪一部分这时是错的？
#
# ## 对照验证
# 把这个句子送进 transformers 同一层的 `Qwen3_5Attention`（eager），用它自己的 RoPE 表和因果掩码：运算相同、顺序相同，所
# 以 fp32 和 bf16 下的输出都完全一致。


# %%
def compare(transformers, path):
    from transformers.masking_utils import create_causal_mask
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention, Qwen3_5TextRotaryEmbedding

    text = transformers.AutoConfig.from_pretrained(path).text_config
    text._attn_implementation = "eager"
    theirs = Qwen3_5Attention(text, layer_idx=layer)
    theirs.load_state_dict({n: W[prefix + n] for n in theirs.state_dict()})
    ours = fill(GatedAttention(cfg), W, prefix)
    for dtype in (torch.float32, torch.bfloat16):
        xs, ours, theirs = x.cpu().to(dtype), ours.to(dtype), theirs.to(dtype)
        hf_tables = Qwen3_5TextRotaryEmbedding(text)(xs, positions.cpu())
        mask = create_causal_mask(config=text, inputs_embeds=xs, attention_mask=None, cache=None)
        book.oracle.difference(tr(f"gated attention, {dtype}", f"门控注意力，{dtype}"),
                               ours(xs, *rope(positions.cpu(), dtype)), theirs(xs, hf_tables, mask)[0])


book.proof(compare, args.checkpoint.folder)

# %% [markdown]
# ## Summary
#
# - Full attention is every fourth layer: 6 of 24 in the 0.8B. `q_proj` makes a query and a gate per head,
#   interleaved per head; `k_proj` and `v_proj` make $H_{kv}$ heads, each shared by $H/H_{kv}$ consecutive query heads.
# - `q_norm` and `k_norm` (zero-centred RMSNorm over $D$) come before RoPE, which rotates the first $R = D/4$ dims.
# - $\mathrm{scores} = q k^\top / \sqrt{D}$, the causal and padding mask (the most negative float, so a padding row
#   stays finite), softmax in fp32, weighted sum of the values; then $\operatorname{sigmoid}(\mathrm{gate})$ per
#   dimension, then `o_proj`.
# - The KV cache stores keys after norm and RoPE and the values: a prompt in pieces equals the prompt at once. It grows
#   by $2 \cdot H_{kv} \cdot D$ values per token per full-attention layer: 12 KiB per token in bf16 for the 0.8B, 3 GiB
#   at 262,144 tokens.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | x (after `input_layernorm`) | (B, T, d) | (B, T, 1024) |
# | `q_proj(x)` → query, gate | (B, T, H, 2D) → 2 × (B, T, H, D) | (B, T, 8, 512) → 2 × (B, T, 8, 256) |
# | `k_proj(x)`, `v_proj(x)` | (B, T, Hkv, D) | (B, T, 2, 256) |
# | q, k after norm and RoPE, heads first | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | cached keys / values (S = cached + new) | (B, Hkv, S, D) | (B, 2, S, 256) |
# | scores, probabilities | (B, H, T, S) | (B, 8, T, S) |
# | heads' output, times $\operatorname{sigmoid}(\mathrm{gate})$ | (B, T, H·D) | (B, T, 2048) |
# | `o_proj(…)` | (B, T, d) | (B, T, 1024) |

# %% [markdown] lang="zh"
# ## 小结
#
# - 全注意力每四层出现一次：0.8B 的 24 层里有 6 层。`q_proj` 为每个头产生一个查询和一个门，按头交错排列；`k_proj` 和
#   `v_proj` 产生 $H_{kv}$ 个头，每个由 $H/H_{kv}$ 个相邻的查询头共用。
# - `q_norm` 和 `k_norm`（在 $D$ 维上的零中心 RMSNorm）在 RoPE 之前；RoPE 旋转前 $R = D/4$ 维。
# - $\mathrm{scores} = q k^\top / \sqrt{D}$，加上因果掩码和填充掩码（用最负的浮点数，所以全是填充的一行仍是有限值），在
#   fp32 下做 softmax，再对值加权求和；然后逐维乘以 $\operatorname{sigmoid}(\mathrm{gate})$，最后过 `o_proj`。
# - 键值缓存存的是经过归一化和 RoPE 的键，以及值：提示词分段处理和一次处理的结果相同。每个全注意力层每个 token 增加
#   $2 \cdot H_{kv} \cdot D$ 个值：0.8B 在 bf16 下是每 token 12 KiB，262,144 个 token 时 3 GiB。
#
# ### 形状
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | x（`input_layernorm` 之后） | (B, T, d) | (B, T, 1024) |
# | `q_proj(x)` → 查询、门 | (B, T, H, 2D) → 2 × (B, T, H, D) | (B, T, 8, 512) → 2 × (B, T, 8, 256) |
# | `k_proj(x)`、`v_proj(x)` | (B, T, Hkv, D) | (B, T, 2, 256) |
# | 归一化和 RoPE 之后的 q、k，头维在前 | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | 缓存的键 / 值（S = 已缓存 + 新增） | (B, Hkv, S, D) | (B, 2, S, 256) |
# | 分数、概率 | (B, H, T, S) | (B, 8, T, S) |
# | 各头的输出，乘以 $\operatorname{sigmoid}(\mathrm{gate})$ | (B, T, H·D) | (B, T, 2048) |
# | `o_proj(…)` | (B, T, d) | (B, T, 1024) |

# %%
book.notation(args.checkpoint)

# %% [markdown]
# ### Exercises
# 208 · the attention and the gated layer, with hints for the usual mistakes ([all queries | all gates], no sigmoid, the
# gate after `o_proj`, norm after RoPE, softmax in bf16, `repeat` for `repeat_interleave`, no $1/\sqrt{D}$, the mask off
# by one). 209 · the KV cache: a cached continuation must equal the whole sequence processed at once.

# %% [markdown] lang="zh"
# ### 练习
# 208 · 注意力和门控层，附常见错误的提示（按 [全部查询 | 全部门] 读取、漏了 sigmoid、门放在 `o_proj` 之后、RoPE 之后才归
# 一化、在 bf16 下做 softmax、把 `repeat_interleave` 写成 `repeat`、漏了 $1/\sqrt{D}$、掩码错了一位）。209 · 键值缓存：
# 带缓存的续写，结果必须和一次处理整个序列相同。

# %%
book.attempt(208)
book.attempt(209)

# %% [markdown]
# ## How to explain it
#
# 1. **The core.** $\operatorname{softmax}(QK^\top/\sqrt{D} + \mathrm{mask}) \, V$ per head: each token's query scores
#    every earlier token's key, the scores become weights, the output is the weighted average of the values. The
#    $\sqrt{D}$ keeps the scores' spread independent of the head size (for roughly independent, unit-variance entries);
#    the causal mask hides the future; the softmax runs in fp32.
# 2. **What Qwen3.5 changes.** QK-norm (RMSNorm of q and k per head, before RoPE) bounds the logits and stabilises
#    training; partial RoPE (a quarter of each head's dims rotate); GQA (8 query heads share 2 K/V heads in the 0.8B),
#    which cuts the KV cache by $H/H_{kv}$; and an output gate, sigmoid of a second projection of the input, applied per
#    dimension before `o_proj` — a head can switch itself off, and the Qwen team reports that it mitigates the
#    attention sink.
# 3. **The cache.** Decoding reuses every past key and value, stored after norm and RoPE — valid because the model is
#    causal (a token's key and value depend only on the tokens up to it) — so each step projects only the new token; the
#    cost is memory that grows with the context — $2 \cdot H_{kv} \cdot D \cdot 2$ bytes per token per attention layer.
#    Qwen3.5 keeps it small by putting full attention in only a quarter of its layers; the other three quarters are
#    linear attention with a fixed-size state (chapter 7).
#
# ## Files
#
# ```
# qwen/
# ├── weights.py           (chapter 1)
# ├── tokenizer.py         (chapter 2)
# ├── embedding.py         (chapter 2)
# ├── norm.py              (chapter 3)
# ├── rope.py              (chapter 4)
# ├── mlp.py               (chapter 5)
# ├── attention.py         + GatedAttention, KVCache, attention, causal_mask
# └── family.py            + the dense Qwen3.5 sizes and the arithmetic of their cache
# book/
# └── ch06.py              + this chapter's figures
# chapters/
# └── ch06_attention.py    + this chapter's script
# notebooks/
# └── ch06_attention.ipynb + this notebook, written from the script
# practice/
# ├── 208_gated_attention/ + exercise 208
# └── 209_kv_cache/        + exercise 209
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **核心。** 每个头算 $\operatorname{softmax}(QK^\top/\sqrt{D} + \mathrm{mask}) \, V$：每个 token 的查询给之前每个
#    token 的键打分，分数变成权重，输出是值的加权平均。除以 $\sqrt{D}$，是为了让分数的离散程度与头的大小无关（对大致
#    独立、方差为 1 的分量而言）；因果掩码挡住未来的 token；softmax 在 fp32 下算。
# 2. **Qwen3.5 改了什么。** QK-norm（RoPE 之前对每个头的 q 和 k 做 RMSNorm）限制了 logits 的大小，让训练更稳定；部分
#    RoPE（每个头只旋转四分之一的维度）；GQA（0.8B 里 8 个查询头共用 2 个键值头），键值缓存因此缩小为原来的
#    $H_{kv}/H$；还有输出门：输入的另一个投影过 sigmoid，在 `o_proj` 之前逐维相乘。一个头可以借此把自己关掉，Qwen 团
#    队报告说它缓解了注意力汇聚（attention sink）。
# 3. **缓存。** 解码时，过去的每个键和值都要重复使用，存的是归一化和 RoPE 之后的结果。这样做之所以成立，是因为模型是因果
#    的：一个 token 的键和值只依赖它自己和它之前的 token。于是每一步只需投影新 token；代价是内存随上下文增长，每个注
#    意力层每个 token 占 $2 \cdot H_{kv} \cdot D \cdot 2$ 字节。Qwen3.5 只在四分之一的层里用全注意力，把这部分压得很
#    小；另外四分之三是线性注意力，状态大小固定（第 7 章）。
#
# ## 文件
#
# ```
# qwen/
# ├── weights.py           （第 1 章）
# ├── tokenizer.py         （第 2 章）
# ├── embedding.py         （第 2 章）
# ├── norm.py              （第 3 章）
# ├── rope.py              （第 4 章）
# ├── mlp.py               （第 5 章）
# ├── attention.py         + GatedAttention、KVCache、attention、causal_mask
# └── family.py            + Qwen3.5 各稠密尺寸，以及它们缓存大小的算术
# book/
# └── ch06.py              + 本章的图
# chapters/
# └── ch06_attention.py    + 本章的脚本
# notebooks/
# └── ch06_attention.ipynb + 本笔记本，由脚本生成
# practice/
# ├── 208_gated_attention/ + 练习 208
# └── 209_kv_cache/        + 练习 209
#
# + 本章新增 · 无标记：来自前面的章节
# ```
