"""Chapter 4: rotary position embedding — partial, rotate-half, and Qwen3.5's interleaved M-RoPE.

第 4 章：旋转位置编码——部分旋转、前后半交换（rotate-half），以及 Qwen3.5 交错排列的 M-RoPE。

Run: python chapters/ch04_rope.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch04_rope.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 4 · Rotary position embedding
#
# Attention compares a query with keys by a dot product, and a dot product cannot tell where the two tokens sit. Qwen3.5
# tells it by **rotating** query and key: each pair of dimensions turns by an angle proportional to the token's
# position, so the score $q \cdot k$ ends up depending on how far apart the tokens are, and on nothing else about their
# positions. This chapter writes `qwen/rope.py`: the angle tables, the rotation, and the M-RoPE layout that Qwen3.5
# inherited from its vision-language training — which, for text, is exactly ordinary RoPE.
#
# RoPE has no weights. Everything in this chapter follows from four numbers of the config (`head_dim`,
# `partial_rotary_factor`, `rope_theta`, `mrope_section`), so the numbers printed for the real Qwen3.5-0.8B are the real
# model's, whatever checkpoint the chapter runs on.

# %% [markdown] lang="zh"
# # 第 4 章 · 旋转位置编码
#
# 注意力靠点积比较查询和键，可点积本身看不出两个 token 各在哪个位置。Qwen3.5 的办法是把查询和键**旋转**一下：每一对维度
# 按 token 的位置转过一个角度，角度与位置成正比。这样，分数 $q \cdot k$ 只取决于两个 token 相隔多远，与它们各自在哪儿无
# 关。本章写 `qwen/rope.py`：角度表、旋转，以及 M-RoPE 布局。M-RoPE 是 Qwen3.5 从视觉语言训练里继承来的，用在文本上和普
# 通 RoPE 完全相同。
#
# RoPE 没有权重。本章的内容全部由 config 里的四个数决定
# （`head_dim`、`partial_rotary_factor`、`rope_theta`、`mrope_section`），所以不管本章跑在哪个检查点上，打印出的真实
# Qwen3.5-0.8B 的数字都来自真实模型。

# %%
import math

import torch

import book
from book import ch04
from qwen.course import chapter_args
from qwen.lang import ljust, tr
from qwen.rope import RotaryEmbedding
from qwen.sizes import REAL_TEXT_CONFIG, real_config

args = chapter_args(__doc__)
cfg = args.checkpoint.config  # the config is all RoPE needs: no tensor is read in this chapter
real = real_config()
dev = args.device
torch.manual_seed(0)
rope, rope_real = RotaryEmbedding(cfg), RotaryEmbedding(real)
REAL, HERE = tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B"), tr("this checkpoint", "本检查点")
REAL_CONFIG = tr("real Qwen3.5-0.8B config", "真实 Qwen3.5-0.8B 的 config")  # the figures' label

# %% [markdown]
# Where it sits: in the full-attention layers only (6 of the 0.8B's 24), on the queries and keys after `q_norm` and
# `k_norm` (chapter 3) and before the scores (chapter 6). The linear-attention layers (chapter 7) use no position
# embedding at all.

# %% [markdown] lang="zh"
# 它在模型中的位置：只出现在全注意力层（0.8B 的 24 层里有 6 层），作用在查询和键上，时机是 `q_norm`、`k_norm`（第 3 章）
# 之后、算分数（第 6 章）之前。线性注意力层（第 7 章）完全不用位置编码。

# %%
book.show("ch04-map", book.model_map.draw, "rope")

# %% [markdown]
# ## 1. Which dims turn, and how fast
# A head has $D$ dims, but only the first **$R = D \cdot \mathrm{partial\_rotary\_factor}$** of them rotate: 64 of 256
# in Qwen3.5-0.8B ($R$ and $\theta$ join the notation table at the end of the chapter). They form $R/2 = 32$ pairs, and
# pair $j$ turns by angle $p \cdot \mathrm{inv\_freq}_j$ at position $p$, with
#
# $$
# \mathrm{inv\_freq}_j = \theta^{-2j/R}, \quad j = 0, \dots, R/2 - 1, \quad \theta = \mathrm{rope\_theta} =
# 10{,}000{,}000
# $$
#
# Pair 0 turns by 1 radian per token (a full turn every $2\pi \approx 6.3$ tokens); each next pair is slower by the
# same factor $\theta^{2/R}$, down to one turn in about 38 million tokens. The other $D - R$ dims carry no position at
# all.

# %% [markdown] lang="zh"
# ## 1. 哪些维度旋转，转多快
# 一个头有 $D$ 维，但只有前 **$R = D \cdot \mathrm{partial\_rotary\_factor}$** 维参与旋转：Qwen3.5-0.8B 是 256 维里的
# 64 维（$R$ 和 $\theta$ 会补进本章末尾的记号表）。这 $R$ 维两两组成 $R/2 = 32$ 对。在位置 $p$，第 $j$ 对转过的角度是
# $p \cdot \mathrm{inv\_freq}_j$，其中
#
# $$
# \mathrm{inv\_freq}_j = \theta^{-2j/R}, \quad j = 0, \dots, R/2 - 1, \quad \theta = \mathrm{rope\_theta} =
# 10{,}000{,}000
# $$
#
# 第 0 对每个 token 转 1 弧度（每 $2\pi \approx 6.3$ 个 token 转满一圈）；往后每一对都比前一对慢同样的倍数
# $\theta^{2/R}$，最慢的一对大约 3800 万个 token 才转一圈。其余 $D - R$ 维不携带任何位置信息。

# %%
for name, c, r in ((HERE, cfg, rope), (REAL, real, rope_real)):
    lam = 2 * math.pi / r.inv_freq.double()
    D, R, n, theta, first, last = c.head_dim, r.R, r.R // 2, c.rope_theta, lam[0], lam[-1]
    print(tr(f"{name:20s} D = {D}, R = {R} ({D - R} dims pass through), θ = {theta:g}, {n} frequencies;\n"
             f"{'':20s} wavelength of j = 0: {first:.2f} tokens, of j = {n - 1}: {last:,.0f} tokens",
             f"{ljust(name + '：', 20)}D = {D}，R = {R}（另 {D - R} 维不旋转），θ = {theta:g}，共 {n} 个频率；\n"
             f"{'':20s}波长：j = 0 为 {first:.2f} 个 token，j = {n - 1} 为 {last:,.0f} 个 token"))
lam = 2 * math.pi / rope_real.inv_freq.double()
ctx = real.max_position_embeddings
never, slowest = int((lam > ctx).sum()), 2 * math.pi * ctx / lam[-1]
print(tr(f"{REAL}: {never} of 32 frequencies never finish a turn within its {ctx:,}-token context; the slowest turns "
         f"{slowest:.3f} radians over all of it",
         f"{REAL}：32 个频率中有 {never} 个在 {ctx:,} 个 token 的上下文里转不满一圈；最慢的一个在整个上下文里只转 "
         f"{slowest:.3f} 弧度"))

# %% [markdown]
# ### Check it by hand
# With $\theta = 10^7$ and $R = 64$, $\mathrm{inv\_freq}_1 = (10^7)^{-2/64} = 10^{-7/32} \approx 0.6043$. At position 2
# pair 0 has turned by 2 radians and pair 1 by 1.2086: $\cos 2 = -0.4161$, $\cos 1.2086 \approx 0.3543$. The table
# `RotaryEmbedding` returns holds exactly these, written twice (dims $i$ and $i + 32$ share angle $i$).

# %% [markdown] lang="zh"
# ### 手算验证
# $\theta = 10^7$、$R = 64$ 时，$\mathrm{inv\_freq}_1 = (10^7)^{-2/64} = 10^{-7/32} \approx 0.6043$。到了位置 2，第 0 对
# 转过 2 弧度，第 1 对转过 1.2086 弧度：$\cos 2 = -0.4161$，$\cos 1.2086 \approx 0.3543$。`RotaryEmbedding` 返回的表里正
# 是这些值，而且每个值存了两遍（第 $i$ 维和第 $i + 32$ 维共用第 $i$ 个角度）。

# %%
cos, sin = rope_real(torch.tensor([[0, 1, 2, 100]]), torch.float32)
inv1, by_hand = rope_real.inv_freq[1], 10 ** (-7 / 32)
print(tr(f"inv_freq_1 = {inv1:.4f} (by hand 10^(-7/32) = {by_hand:.4f})",
         f"inv_freq_1 = {inv1:.4f}（手算 10^(-7/32) = {by_hand:.4f}）"))
for i, p in enumerate((0, 1, 2, 100)):
    c0, c1, c31, h0, h1 = cos[0, i, 0], cos[0, i, 1], cos[0, i, 31], math.cos(p), math.cos(p * by_hand)
    same = bool(cos[0, i, 0] == cos[0, i, 32])
    print(tr(f"position {p:3d}: cos of pairs 0, 1, 31 = {c0:+.4f} {c1:+.4f} {c31:+.4f}"
             f"   by hand cos({p}) = {h0:+.4f}, cos({p} · 0.6043) = {h1:+.4f}   same angle in dim 32: {same}",
             f"位置 {p:3d}：第 0、1、31 对的 cos = {c0:+.4f} {c1:+.4f} {c31:+.4f}"
             f"   手算 cos({p}) = {h0:+.4f}，cos({p} · 0.6043) = {h1:+.4f}"
             f"   第 32 维角度相同：{'是' if same else '否'}"))

# %% [markdown]
# The fast pairs wind round many times within a sentence; the slow ones barely move in a whole book. The right
# panel shows the angle itself: a dot marks where a pair completes its first turn, at its wavelength, and the
# dotted line the 262,144-token context: the slowest frequencies never finish a turn inside it.

# %% [markdown] lang="zh"
# 快的几对在一句话里就转了好多圈，慢的几对在一整本书里也几乎不动。右图直接画角度：圆点标出每一对转满第一圈的位置，也就是
# 它的波长；点线是 262,144 个 token 的上下文长度。最慢的那些频率，在整个上下文里连一圈都转不完。

# %%
book.show("ch04-angles", ch04.angle_vs_position, real, REAL_CONFIG)

# %% [markdown]
# ## 2. The rotation
# Pair $j$ is $(x_j, x_{j+R/2})$ — dim $j$ with dim $j + R/2$, the "rotate half" pairing, not the adjacent dims
# $(2j, 2j+1)$ of the original RoPE paper and of GPT-J. Turning it by angle $a$ is
#
# $$
# x_j \to x_j \cos a - x_{j+R/2} \sin a, \qquad x_{j+R/2} \to x_{j+R/2} \cos a + x_j \sin a,
# $$
#
# which for the whole rotated block is $x \odot \cos + \mathrm{rotate\_half}(x) \odot \sin$ with
# $\mathrm{rotate\_half}(x_1, x_2) = (-x_2, x_1)$. Both pairings turn each pair by its angle; they differ only in which
# dims form a pair. They are the same model up to a permutation of each head's rotated dims
# ($j \to 2j$, $j + R/2 \to 2j + 1$), applied to the rows of `q_proj` and `k_proj` —
# which is how Llama checkpoints are converted between the two layouts. So a checkpoint trained with one is wrong
# under the other unless its weights are permuted.
#
# **Try it first:** exercise 206 asks for the frequencies, the tables and the rotation. Start it with
# `python practice/judge.py start 206`, or write the three functions in the cell below (in the notebook) and run
# it: the judge grades them.

# %% [markdown] lang="zh"
# ## 2. 旋转
# 第 $j$ 对是 $(x_j, x_{j+R/2})$，即第 $j$ 维与第 $j + R/2$ 维配对：前一半和后一半一一对应，这种配法叫前后半交换
# （rotate-half）。原始 RoPE 论文和 GPT-J 则是相邻两维 $(2j, 2j+1)$ 配对。把一对转过角度 $a$：
#
# $$
# x_j \to x_j \cos a - x_{j+R/2} \sin a, \qquad x_{j+R/2} \to x_{j+R/2} \cos a + x_j \sin a,
# $$
#
# 对整个旋转块，写成向量形式就是 $x \odot \cos + \mathrm{rotate\_half}(x) \odot \sin$，其中
# $\mathrm{rotate\_half}(x_1, x_2) = (-x_2, x_1)$。两种配法都让每一对转过各自的角度，区别只在哪两维配成一对。对每个头的
# 旋转维做一次置换（$j \to 2j$，$j + R/2 \to 2j + 1$），作用在 `q_proj` 和 `k_proj` 的行上，两种配法就是同一个模
# 型。Llama 的检查点正是这样在两种布局之间转换的。反过来，用一种配法训练出的检查点，按另一种配法直接跑就是错的，除非先把
# 权重置换过来。
#
# **先动手：** 练习 206 要写出频率、角度表和旋转。可以用 `python practice/judge.py start 206` 开始，也可以（在笔记本里）
# 直接在下面的单元格写好这三个函数再运行，评测器会给出评分。


# %%
def inv_frequencies(head_dim: int, partial_rotary_factor: float, rope_theta: float) -> torch.Tensor:
    raise NotImplementedError  # your code here


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple:
    raise NotImplementedError  # your code here


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(206, inv_frequencies, rope_tables, apply_rope)

# %% [markdown]
# ### The finished module: `qwen/rope.py`

# %% [markdown] lang="zh"
# ### 写好的模块：`qwen/rope.py`

# %%
from qwen.rope import apply_rope, mrope_axes  # noqa: E402  (the module's, in place of the attempt above)

book.listing("qwen/rope.py")

# %% [markdown]
# - `RotaryEmbedding` holds no weights: `inv_freq` and the axis of each frequency follow from the config. They are
#   plain attributes, not buffers, so that `model.to(torch.bfloat16)` cannot round the frequencies.
# - `forward(positions, dtype)` computes the angles in fp32 and only then rounds cos and sin to the model dtype —
#   transformers does the same, and a bf16 model must, to give the same bits.
# - `apply_rope(x, cos, sin)` turns the first R dims of every head of x (B, H, T, D) and passes the rest through.
#
# A rotation keeps a vector's length. On a single pair at position 1 the turn is easy to see: (1, 0) goes to
# (cos 1, sin 1) = (0.5403, 0.8415).

# %% [markdown] lang="zh"
# - `RotaryEmbedding` 不含权重：`inv_freq` 和每个频率对应的轴都由 config 算出。它们是普通属性而不是 buffer，这样
#   `model.to(torch.bfloat16)` 就不会把频率也舍入掉。
# - `forward(positions, dtype)` 先在 fp32 下算角度，算完才把 cos 和 sin 舍入到模型的 dtype。transformers 也是这样做
#   的；bf16 模型想得到逐位相同的结果，就必须照做。
# - `apply_rope(x, cos, sin)` 旋转 x (B, H, T, D) 每个头的前 R 维，其余维原样保留。
#
# 旋转不改变向量的长度。单看位置 1 上的一对，转动一目了然：(1, 0) 变成 (cos 1, sin 1) = (0.5403, 0.8415)。

# %%
x = torch.zeros(1, 1, 1, real.head_dim)
x[..., 0] = 1.0
c1, s1 = rope_real(torch.tensor([[1]]), torch.float32)
y = apply_rope(x, c1, s1)
y0, y32, rest = y[0, 0, 0, 0], y[0, 0, 0, 32], bool(y[..., 1:32].eq(0).all() and y[..., 33:].eq(0).all())
print(tr(f"(x_0, x_32) = (1, 0) at position 1 -> ({y0:.4f}, {y32:.4f}); every other dim stays 0: {rest}",
         f"位置 1 上 (x_0, x_32) = (1, 0) 转成 ({y0:.4f}, {y32:.4f})；其余各维仍全为 0：{'是' if rest else '否'}"))
q = torch.randn(2, real.num_attention_heads, 50, real.head_dim, device=dev)
cos, sin = rope_real(torch.arange(0, 5000, 100, device=dev).expand(2, -1), torch.float32)
change = (apply_rope(q, cos, sin).norm(dim=-1) - q.norm(dim=-1)).abs().max()
print(tr(f"50 positions, 8 heads, batch 2: largest change of a length under rotation {change:.1e} (fp32 rounding)",
         f"50 个位置、8 个头、批次大小 2：旋转前后向量长度的最大变化 {change:.1e}（fp32 舍入）"))

# %% [markdown]
# ## 3. Why it works: the score sees only the distance
# Rotate $q$ by the angles $m \cdot \omega_j$ and $k$ by $n \cdot \omega_j$. Pair $j$ of each is a 2-vector, $q_j$ and
# $k_j$, at an angle $\varphi_j$ to each other before the turn; the $D - R$ dims that do not rotate (192 in the 0.8B)
# form $q_{\mathrm{pass}}$ and $k_{\mathrm{pass}}$. The score is
#
# $$
# q \cdot k = \sum_j \lvert q_j \rvert \, \lvert k_j \rvert \cos\left(\varphi_j + (m - n) \cdot \omega_j\right) +
# q_{\mathrm{pass}} \cdot k_{\mathrm{pass}},
# $$
#
# so only the difference $m - n$ is left, and the unrotated part does not depend on position at all. Moving a query
# and a key together along the text changes nothing — up to fp32 rounding of the angles, which grows with the
# position (an angle near 50,000 radians is only good to about 0.004).

# %% [markdown] lang="zh"
# ## 3. 为什么管用：分数只看距离
# 把 $q$ 按角度 $m \cdot \omega_j$ 旋转，$k$ 按 $n \cdot \omega_j$ 旋转。两者的第 $j$ 对各是一个二维向量 $q_j$、$k_j$，
# 旋转前夹角为 $\varphi_j$；不旋转的 $D - R$ 维（0.8B 中是 192 维）记作 $q_{\mathrm{pass}}$ 和 $k_{\mathrm{pass}}$。分数
# 为
#
# $$
# q \cdot k = \sum_j \lvert q_j \rvert \, \lvert k_j \rvert \cos\left(\varphi_j + (m - n) \cdot \omega_j\right) +
# q_{\mathrm{pass}} \cdot k_{\mathrm{pass}},
# $$
#
# 式中只剩下位置差 $m - n$，不旋转的那部分则与位置完全无关。把查询和键一起沿文本平移，分数不变。唯一的偏差来自角度的
# fp32 舍入，它随位置增大：接近 50,000 弧度的角度只精确到约 0.004。

# %%
qv, kv = torch.randn(1, 1, 1, real.head_dim), torch.randn(1, 1, 1, real.head_dim)


def score(m, n):
    """q at position m, k at position n, both rotated: their dot product."""
    cq, sq = rope_real(torch.tensor([[m]]), torch.float32)
    ck, sk = rope_real(torch.tensor([[n]]), torch.float32)
    return (apply_rope(qv, cq, sq) * apply_rope(kv, ck, sk)).sum().item()


for m, n in ((10, 3), (1010, 1003), (50007, 50000), (3, 10)):
    s = score(m, n)
    print(tr(f"q at {m:6d}, k at {n:6d} (distance {m - n:+d}): score {s:+.4f}",
             f"q 位于 {m:6d}，k 位于 {n:6d}（距离 {m - n:+d}）：分数 {s:+.4f}"))

# %% [markdown]
# The same for a whole range of distances, starting from three places in the text: the three curves lie on top
# of each other (random $q$ and $k$; the right panel uses $q = k$ = all ones, the curve usually drawn to show that
# scores shrink, on average, with distance).

# %% [markdown] lang="zh"
# 换成一整段距离来画，分别从文本中三个不同的位置出发：三条曲线完全重合（$q$、$k$ 是随机向量）。右图取 $q = k$ = 全 1，常
# 有人用这条曲线说明分数平均随距离减小。

# %%
book.show("ch04-score", ch04.score_vs_distance, real, REAL_CONFIG)

# %% [markdown]
# ## 4. M-RoPE: three position axes, and why text does not notice
# Qwen3.5 was trained on images and video too. An image patch has a time, a row and a column, so the rotary module takes
# three positions per token — $t$ (time), $h$ (height), $w$ (width); lower case, since $T$ and $H$ already name the
# tokens and the heads — and lets each frequency read its angle from one of them. Which one is fixed by `mrope_section`
# = [11, 11, 10] and an **interleaved** pattern: frequency $j$ reads $h$ when $j \bmod 3 = 1$ (below $3 \cdot 11$), $w$
# when $j \bmod 3 = 2$ (below $3 \cdot 10$), and $t$ otherwise. Interleaving gives every axis fast and slow frequencies
# alike. Qwen2-VL used contiguous blocks instead: of its 64 frequencies (`head_dim` 128, all rotated), `mrope_section`
# [16, 24, 24] gave $t$ the 16 fastest, $h$ the next 24 and $w$ the 24 slowest.
#
# For text all three positions are the same number, so it does not matter which axis a frequency reads: the table
# is exactly that of plain RoPE. The module therefore takes (B, T) positions for text and (3, B, T) for images.

# %% [markdown] lang="zh"
# ## 4. M-RoPE：三个位置轴，文本为何察觉不到
# Qwen3.5 也在图像和视频上训练过。图像的一个 patch 有时间、行、列三个坐标，所以旋转模块给每个 token 取三个位置：$t$（时
# 间）、$h$（高）、$w$（宽）。这里用小写，因为 $T$ 和 $H$ 已经分别表示 token 数和头数。每个频率从其中一个位置读取角度，
# 读哪一个由 `mrope_section` = [11, 11, 10] 和一种**交错**排法决定：$j \bmod 3 = 1$ 时（$j$ 小于 $3 \cdot 11$）频率 $j$
# 读 $h$，$j \bmod 3 = 2$ 时（$j$ 小于 $3 \cdot 10$）读 $w$，其余读 $t$。交错排列让每个轴都同时分到快频率和慢频
# 率。Qwen2-VL 用的是连续分块：它有 64 个频率（`head_dim` 128，全部旋转），`mrope_section` [16, 24, 24] 把最快的 16 个
# 给 $t$，接下来 24 个给 $h$，最慢的 24 个给 $w$。
#
# 文本的三个位置是同一个数，频率读哪个轴都一样，角度表和普通 RoPE 完全相同。所以这个模块对文本接收形状为 (B, T) 的位置，
# 对图像接收 (3, B, T)。

# %%
for name, c, r in ((HERE, cfg, rope), (REAL, real, rope_real)):
    axis = "".join("thw"[a] for a in mrope_axes(r.R // 2, c.mrope_section).tolist())
    print(tr(f"{name:20s} mrope_section {c.mrope_section}: axis per frequency {axis}",
             f"{ljust(name + '：', 20)}mrope_section {c.mrope_section}，各频率读取的轴依次为 {axis}"))
p = torch.arange(0, 40000, 1000)[None]  # text: one position per token
angle = p[..., None].float() * rope_real.inv_freq  # plain RoPE, no axes at all
plain = torch.cat((angle, angle), dim=-1)
cos, sin = rope_real(p, torch.float32)
same = torch.equal(cos, plain.cos()) and torch.equal(sin, plain.sin())
print(tr(f"text through M-RoPE == plain RoPE, bit for bit: {same}",
         f"文本经过 M-RoPE 与经过普通 RoPE 逐位一致：{'是' if same else '否'}"))
image = torch.stack([p, p + 1, p])  # a token whose row differs from its time: h reads another position
delta = (rope_real(image, torch.float32)[0] - cos).abs().max()
print(tr(f"with h != t the tables differ: max |Δcos| = {delta:.3f}",
         f"h != t 时角度表就不同了：max |Δcos| = {delta:.3f}"))

# %%
book.show("ch04-mrope", ch04.interleave_map, real, REAL_CONFIG)

# %% [markdown]
# ## 5. cos and sin are rounded to the model dtype
# The angles are computed in fp32; cos and sin are then rounded to the model's dtype before they touch q and k. In bf16
# that rounding is up to $2^{-9} \approx 0.002$ — large next to fp32, and part of the model: transformers does it, so a
# bf16 implementation that keeps fp32 tables gives different outputs from the reference.

# %% [markdown] lang="zh"
# ## 5. cos 和 sin 要舍入到模型的 dtype
# 角度在 fp32 下计算；cos 和 sin 与 q、k 相乘之前，先舍入到模型的 dtype。bf16 下这次舍入的误差最大到
# $2^{-9} \approx 0.002$，比 fp32 大得多，而且它是模型的一部分：transformers 就是这么做的。所以 bf16 实现如果保留 fp32
# 的角度表，输出就会和参考实现对不上。

# %%
cos32, _ = rope_real(torch.tensor([[1000]]), torch.float32)
cos16, _ = rope_real(torch.tensor([[1000]]), torch.bfloat16)
a, b, worst = cos32[0, 0, 0], cos16[0, 0, 0].float(), (cos16.float() - cos32).abs().max()
print(tr(f"position 1000, pair 0: cos in fp32 {a:.7f}, in bf16 {b:.7f}; largest rounding over the 64 dims {worst:.1e}",
         f"位置 1000，第 0 对：cos 在 fp32 下为 {a:.7f}，在 bf16 下为 {b:.7f}；64 维中最大的舍入误差为 {worst:.1e}"))

# %% [markdown]
# ## Try this
#
# - Set $\theta$ to 10,000 (the RoPE paper's and Llama 2's value, and transformers' default when a config has no
#   `rope_theta`; Llama 3 uses 500,000): `RotaryEmbedding(Config(rope_theta=1e4))`. How long is the slowest
#   wavelength now, against a 262,144-token context?
# - Replace `rotate_half` by the adjacent-pair turn, `torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)`,
#   and measure a length and the score at one distance from two places. With the tables as they are, neither is
#   kept: dims $2j$ and $2j + 1$ now get the angles of two different frequencies, so it is not a rotation. Lay the
#   tables out per pair, `cos[..., :32].repeat_interleave(2, -1)` (and sin), and both hold again. The numbers still
#   differ from transformers' — wrong for this checkpoint unless each head's q and k rows are permuted
#   (tests/test_book_ch04.py measures all three).
# - Give a token $t = h = w = 7$ and another $t = 7, h = 3, w = 5$: which of the 32 frequencies change?
#
# ## Show the proof
# The same positions through transformers' `Qwen3_5TextRotaryEmbedding` and `apply_rotary_pos_emb`: text positions
# with this checkpoint's config, and image-like positions — a distinct (t, h, w) for every token — with the real
# 0.8B's config, so every frequency's axis is exercised at the real $R$, $\theta$ and `mrope_section`. The same fp32
# operations in the same order, so the difference is exactly 0, in fp32 and in bf16.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 把 $\theta$ 设为 10,000（RoPE 论文和 Llama 2 的取值，也是 config 里缺 `rope_theta` 时 transformers 的默认值；Llama
#   3 用 500,000）：`RotaryEmbedding(Config(rope_theta=1e4))`。现在最长的波长是多少？和 262,144 个 token 的上下文比呢？
# - 把 `rotate_half` 换成相邻配对的转法 `torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)`，量一下向量长度，再
#   从两个位置出发、在同一距离上算分数。角度表不动的话，两者都保不住：第 $2j$ 维和第 $2j + 1$ 维拿到的是两个不同频率的
#   角度，这已经不是旋转了。把角度表改成按对排列，即 `cos[..., :32].repeat_interleave(2, -1)`（sin 同理），两者又都成
#   立。但结果仍和 transformers 不同：对这个检查点来说是错的，除非把每个头 q、k 的行置换过来（tests/test_book_ch04.py
#   对这三种情况都做了测量）。
# - 一个 token 取 $t = h = w = 7$，另一个取 $t = 7, h = 3, w = 5$：32 个频率中哪些会变？
#
# ## 对照验证
# 把同样的位置送进 transformers 的 `Qwen3_5TextRotaryEmbedding` 和 `apply_rotary_pos_emb`。文本位置配本检查点的 config；
# 类似图像的位置（每个 token 的 (t, h, w) 各不相同）配真实 0.8B 的 config，这样在真实的 $R$、$\theta$ 和
# `mrope_section` 下，每个频率的轴都检验到了。两边的 fp32 运算相同、顺序相同，所以 fp32 和 bf16 下的差值都恰好是 0。


# %%
def compare(transformers, path):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    real_text = transformers.Qwen3_5TextConfig(**{k: v for k, v in REAL_TEXT_CONFIG.items()
                                                   if k not in ("model_type", "dtype")})
    for name, ours, config, positions in (
            (tr("this checkpoint, text", "本检查点，文本"), rope,
             transformers.AutoConfig.from_pretrained(path).text_config, torch.randint(0, 30000, (2, 16), generator=g)),
            (tr(f"{REAL}, distinct (t, h, w)", f"{REAL}，每个 token 的 (t, h, w) 各不相同"), rope_real, real_text,
             torch.randint(0, 30000, (3, 2, 16), generator=g))):
        theirs = Qwen3_5TextRotaryEmbedding(config)
        x = torch.randn(2, config.num_attention_heads, 16, config.head_dim, generator=g)
        for dtype in (torch.float32, torch.bfloat16):
            cos, sin = ours(positions, dtype)
            hf_cos, hf_sin = theirs(x.to(dtype), positions)
            book.oracle.difference(tr(f"{name}: cos/sin tables, {dtype}", f"{name}：cos/sin 表，{dtype}"),
                                   torch.cat((cos, sin)), torch.cat((hf_cos, hf_sin)))
            hf_x, _ = apply_rotary_pos_emb(x.to(dtype), x.to(dtype), hf_cos, hf_sin)
            book.oracle.difference(tr(f"{name}: rotated q, {dtype}", f"{name}：旋转后的 q，{dtype}"),
                                   apply_rope(x.to(dtype), cos, sin), hf_x)


book.proof(compare, args.checkpoint.folder)

# %% [markdown]
# ## Summary
#
# - RoPE turns pairs of query/key dims by position · frequency, so $q \cdot k$ depends only on the distance between
#   the tokens. It has no weights.
# - Qwen3.5 rotates only the first $R = 64$ of each head's 256 dims, pairs dim $i$ with dim $i + 32$ (rotate half),
#   and uses 32 frequencies $\theta^{-2j/64}$ with $\theta = 10^7$: wavelengths from 6.3 tokens to about 38 million.
# - M-RoPE gives each frequency one of three position axes (t, h, w: time, height, width), interleaved; for text
#   the three are equal and the tables are exactly plain RoPE.
# - Angles in fp32; cos and sin rounded to the model dtype, as transformers does.
#
# ### Shapes
#
# B, T, H, Hkv, D, R as in the notation table below (T: tokens, H: query heads; the M-RoPE axes are t, h, w).
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | positions, text / image (t, h, w) | (B, T) / (3, B, T) | |
# | `inv_freq` | (R/2,) | (32,) |
# | cos, sin | (B, T, R) | (B, T, 64) |
# | q after `q_norm`, k after `k_norm` | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | `apply_rope(q, cos, sin)` | (B, H, T, D): dims $0, \dots, R - 1$ turned, the rest unchanged | (B, 8, T, 256) |

# %% [markdown] lang="zh"
# ## 小结
#
# - RoPE 按“位置 · 频率”的角度把查询和键的维度成对旋转，于是 $q \cdot k$ 只取决于两个 token 之间的距离。它没有权重。
# - Qwen3.5 每个头的 256 维里只旋转前 $R = 64$ 维，第 $i$ 维与第 $i + 32$ 维配对（前后半交换），用 32 个频率
#   $\theta^{-2j/64}$，$\theta = 10^7$：波长从 6.3 个 token 到约 3800 万个 token。
# - M-RoPE 让每个频率从三个位置轴（t、h、w：时间、高、宽）中读一个，交错排列；文本的三个位置相等，角度表和普通 RoPE 完全
#   相同。
# - 角度用 fp32 算；cos 和 sin 舍入到模型的 dtype，与 transformers 一致。
#
# ### 形状
#
# B、T、H、Hkv、D、R 的含义见下面的记号表（T：token 数，H：查询头数；M-RoPE 的三个轴是 t、h、w）。
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | 位置，文本 / 图像 (t, h, w) | (B, T) / (3, B, T) | |
# | `inv_freq` | (R/2,) | (32,) |
# | cos、sin | (B, T, R) | (B, T, 64) |
# | `q_norm` 之后的 q，`k_norm` 之后的 k | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | `apply_rope(q, cos, sin)` | (B, H, T, D)：第 $0, \dots, R - 1$ 维旋转，其余不变 | (B, 8, T, 256) |

# %%
book.notation(args.checkpoint)

# %% [markdown]
# ### Exercises
# 206 · rotary position embedding: the frequencies, the tables and the rotation, with hints for the usual mistakes
# (all 256 dims rotated, adjacent pairs, the wrong $\theta$, cos and sin kept in fp32).

# %% [markdown] lang="zh"
# ### 练习
# 206 · 旋转位置编码：频率、角度表和旋转，附常见错误的提示（256 维全都旋转、相邻配对、$\theta$ 取错、cos 和 sin 留在
# fp32）。

# %%
book.attempt(206)

# %% [markdown]
# ## How to explain it
#
# 1. **The problem.** Attention is a set operation: $q \cdot k$ does not know where the tokens are. Absolute position
#    embeddings add a position vector to the input; RoPE instead rotates $q$ and $k$ by position-dependent angles, so
#    that the score depends on the relative position $m - n$ — exactly what attention needs — with no parameters.
# 2. **The mechanics.** Split the rotated dims into pairs, give pair $j$ the frequency $\theta^{-2j/R}$, turn it by $p$
#    times that frequency. Fast pairs resolve nearby order; slow pairs still change over very long distances. A bigger
#    $\theta$ (Qwen3.5: $10^7$ instead of $10^4$) stretches the slow end, which is what long contexts need.
# 3. **Qwen3.5's details.** Partial rotation (64 of 256 dims: the rest of each head can match on content alone),
#    rotate-half pairing ($i$ with $i + R/2$), and M-RoPE for images with an interleaved t/h/w layout that reduces to
#    plain RoPE for text. cos/sin are rounded to bf16 before use, and a faithful re-implementation has to do the
#    same.
#
# ## Files
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── tokenizer.py    (chapter 2)
# ├── embedding.py    (chapter 2)
# ├── norm.py         (chapter 3)
# └── rope.py         + RotaryEmbedding, apply_rope, mrope_axes
# book/
# └── ch04.py         + this chapter's figures
# chapters/
# └── ch04_rope.py    + this chapter's script
# notebooks/
# └── ch04_rope.ipynb + this notebook, written from the script
# practice/
# └── 206_rope/       + exercise 206
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **要解决的问题。** 注意力是一种集合运算：$q \cdot k$ 不知道 token 在哪儿。绝对位置编码是在输入上加一个位置向
#    量；RoPE 则按与位置有关的角度旋转 $q$ 和 $k$，让分数取决于相对位置 $m - n$。这正是注意力需要的，而且不引入任何参
#    数。
# 2. **具体做法。** 把参与旋转的维度两两分组，第 $j$ 对的频率为 $\theta^{-2j/R}$，在位置 $p$ 转过 $p$ 乘以该频率的角度。
#    快的几对分辨近处的先后，慢的几对隔得很远仍有变化。$\theta$ 越大（Qwen3.5 用 $10^7$，而不是 $10^4$），慢的一端拉
#    得越长，长上下文正需要这一点。
# 3. **Qwen3.5 的细节。** 部分旋转（256 维只转 64 维，每个头其余的维度可以只按内容匹配）；前后半交换配对（第 $i$ 维配第
#    $i + R/2$ 维）；图像用 M-RoPE，t/h/w 交错排列，用在文本上就退化为普通 RoPE。cos/sin 在使用前舍入到 bf16，要忠实
#    复现就得照做。
#
# ## 文件
#
# ```
# qwen/
# ├── weights.py      （第 1 章）
# ├── tokenizer.py    （第 2 章）
# ├── embedding.py    （第 2 章）
# ├── norm.py         （第 3 章）
# └── rope.py         + RotaryEmbedding, apply_rope, mrope_axes
# book/
# └── ch04.py         + 本章的图
# chapters/
# └── ch04_rope.py    + 本章的脚本
# notebooks/
# └── ch04_rope.ipynb + 本笔记本，由脚本生成
# practice/
# └── 206_rope/       + 练习 206
#
# + 本章新增 · 无标记：来自前面的章节
# ```
