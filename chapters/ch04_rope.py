"""Chapter 4: rotary position embedding — partial, rotate-half, and Qwen3.5's interleaved M-RoPE.

第 4 章：旋转位置编码——部分旋转、rotate-half，以及 Qwen3.5 交错排列的 M-RoPE。

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
# 注意力用点积比较查询和键，而点积分辨不出两个 token 各在什么位置。Qwen3.5 的办法是把查询和键**旋转**起来：每一对维度转
# 过一个与 token 位置成正比的角度，于是分数 $q \cdot k$ 只取决于两个 token 相隔多远，与它们的位置再无别的关系。本章写
# `qwen/rope.py`：角度表、旋转，以及 Qwen3.5 从视觉语言训练中继承下来的 M-RoPE 布局——对文本来说，它和普通的 RoPE 完全一
# 样。
#
# RoPE 没有权重。本章的一切都由 config 里的四个数决定
# （`head_dim`、`partial_rotary_factor`、`rope_theta`、`mrope_section`），所以不管本章跑在哪个检查点上，为真实
# Qwen3.5-0.8B 打印的数字都是真实模型的数字。

# %%
import math

import torch

import book
from book import ch04
from qwen.course import chapter_args
from qwen.lang import tr
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
# 它的位置：只在全注意力层里（0.8B 的 24 层中有 6 层），作用在经过 `q_norm` 和 `k_norm`（第 3 章）之后、算分数（第 6
# 章）之前的查询和键上。线性注意力层（第 7 章）完全不用位置编码。

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
# ## 1. 哪些维度在转，转得多快
# 一个头有 $D$ 维，但只有前 **$R = D \cdot \mathrm{partial\_rotary\_factor}$** 维参与旋转：Qwen3.5-0.8B 的 256 维里有 64
# 维（$R$ 和 $\theta$ 会在本章末尾加入记号表）。它们组成 $R/2 = 32$ 对，第 $j$ 对在位置 $p$ 转过的角度是
# $p \cdot \mathrm{inv\_freq}_j$，其中
#
# $$
# \mathrm{inv\_freq}_j = \theta^{-2j/R}, \quad j = 0, \dots, R/2 - 1, \quad \theta = \mathrm{rope\_theta} =
# 10{,}000{,}000
# $$
#
# 第 0 对每个 token 转 1 弧度（每 $2\pi \approx 6.3$ 个 token 转一整圈）；之后每一对都比前一对慢同样的倍数
# $\theta^{2/R}$，一直慢到大约 $3.8 \times 10^7$ 个 token 才转一圈。其余 $D - R$ 维完全不带位置信息。

# %%
for name, c, r in ((HERE, cfg, rope), (REAL, real, rope_real)):
    lam = 2 * math.pi / r.inv_freq.double()
    D, R, n, theta, first, last = c.head_dim, r.R, r.R // 2, c.rope_theta, lam[0], lam[-1]
    print(tr(f"{name:20s} D = {D}, R = {R} ({D - R} dims pass through), θ = {theta:g}, {n} frequencies;\n"
             f"{'':20s} wavelength of j = 0: {first:.2f} tokens, of j = {n - 1}: {last:,.0f} tokens",
             f"{name}：D = {D}，R = {R}（{D - R} 维原样通过），θ = {theta:g}，{n} 个频率；\n"
             f"{'':4s}j = 0 的波长为 {first:.2f} 个 token，j = {n - 1} 的为 {last:,.0f} 个 token"))
lam = 2 * math.pi / rope_real.inv_freq.double()
ctx = real.max_position_embeddings
never, slowest = int((lam > ctx).sum()), 2 * math.pi * ctx / lam[-1]
print(tr(f"{REAL}: {never} of 32 frequencies never finish a turn within its {ctx:,}-token context; the slowest turns "
         f"{slowest:.3f} radians over all of it",
         f"{REAL}：32 个频率中有 {never} 个在 {ctx:,} token 的上下文里转不完一圈；最慢的那个在整个上下文里只转了 "
         f"{slowest:.3f} 弧度"))

# %% [markdown]
# ### Check it by hand
# With $\theta = 10^7$ and $R = 64$, $\mathrm{inv\_freq}_1 = (10^7)^{-2/64} = 10^{-7/32} \approx 0.6043$. At position 2
# pair 0 has turned by 2 radians and pair 1 by 1.2086: $\cos 2 = -0.4161$, $\cos 1.2086 \approx 0.3543$. The table
# `RotaryEmbedding` returns holds exactly these, written twice (dims $i$ and $i + 32$ share angle $i$).

# %% [markdown] lang="zh"
# ### 手算验证
# $\theta = 10^7$、$R = 64$ 时，$\mathrm{inv\_freq}_1 = (10^7)^{-2/64} = 10^{-7/32} \approx 0.6043$。在位置 2，第 0 对转
# 过了 2 弧度，第 1 对转过 1.2086：$\cos 2 = -0.4161$，$\cos 1.2086 \approx 0.3543$。`RotaryEmbedding` 返回的表里正是这
# 些值，而且写了两遍（第 $i$ 维和第 $i + 32$ 维共用第 $i$ 个角度）。

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
             f"   手算 cos({p}) = {h0:+.4f}，cos({p} · 0.6043) = {h1:+.4f}   第 32 维的角度相同：{same}"))

# %% [markdown]
# The fast pairs wind round many times within a sentence; the slow ones barely move in a whole book. The right
# panel shows the angle itself: a dot marks where a pair completes its first turn, at its wavelength, and the
# dotted line the 262,144-token context: the slowest frequencies never finish a turn inside it.

# %% [markdown] lang="zh"
# 快的那几对在一句话之内就绕了好多圈；慢的那几对在一整本书里几乎不动。右图画的是角度本身：
# 圆点标出每一对在其波长处转完第一圈的位置，点线是 262,144 个 token 的上下文：最慢的那些频率在上下文之内连一圈都转不完。

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
# 第 $j$ 对是 $(x_j, x_{j+R/2})$——第 $j$ 维配第 $j + R/2$ 维，这是 “rotate half” 的配对方式，而不是原始 RoPE 论文和
# GPT-J 里的相邻维 $(2j, 2j+1)$。把它转过角度 $a$ 就是
#
# $$
# x_j \to x_j \cos a - x_{j+R/2} \sin a, \qquad x_{j+R/2} \to x_{j+R/2} \cos a + x_j \sin a,
# $$
#
# 对整个旋转块来说就是 $x \odot \cos + \mathrm{rotate\_half}(x) \odot \sin$，其中
# $\mathrm{rotate\_half}(x_1, x_2) = (-x_2, x_1)$。两种配对方式都让每一对转过它自己的角度，区别只在于哪些维组成一对。对
# 每个头的旋转维做一次置换（$j \to 2j$，$j + R/2 \to 2j + 1$），作用在 `q_proj` 和 `k_proj` 的行上，两者就是同一个模
# 型——Llama 的检查点就是这样在两种布局之间转换的。所以用一种方式训练出的检查点，换另一种方式就是错的，除非把它的权重置换
# 过来。
#
# **先动手：** 练习 206 要求写出频率、角度表和旋转。用 `python practice/judge.py start 206` 开始，
# 或者在下面的单元格（笔记本里）写好这三个函数并运行：评测器会给它们打分。


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
# - `RotaryEmbedding` 不含权重：`inv_freq` 和每个频率对应的轴都由 config 决定。它们是普通属性，不是 buffer，这样
#   `model.to(torch.bfloat16)` 就不会把频率舍入掉。
# - `forward(positions, dtype)` 在 fp32 里算角度，算完才把 cos 和 sin 舍入到模型的 dtype——transformers 也是这么做的，
#   bf16 模型要得到相同的比特，就必须这样做。
# - `apply_rope(x, cos, sin)` 把 x (B, H, T, D) 每个头的前 R 维转过去，其余维原样通过。
#
# 旋转不改变向量的长度。在位置 1 上单看一对，很容易看出转了多少：(1, 0) 变成 (cos 1, sin 1) = (0.5403, 0.8415)。

# %%
x = torch.zeros(1, 1, 1, real.head_dim)
x[..., 0] = 1.0
c1, s1 = rope_real(torch.tensor([[1]]), torch.float32)
y = apply_rope(x, c1, s1)
y0, y32, rest = y[0, 0, 0, 0], y[0, 0, 0, 32], bool(y[..., 1:32].eq(0).all() and y[..., 33:].eq(0).all())
print(tr(f"(x_0, x_32) = (1, 0) at position 1 -> ({y0:.4f}, {y32:.4f}); every other dim stays 0: {rest}",
         f"(x_0, x_32) = (1, 0) 在位置 1 -> ({y0:.4f}, {y32:.4f})；其余各维都保持 0：{rest}"))
q = torch.randn(2, real.num_attention_heads, 50, real.head_dim, device=dev)
cos, sin = rope_real(torch.arange(0, 5000, 100, device=dev).expand(2, -1), torch.float32)
change = (apply_rope(q, cos, sin).norm(dim=-1) - q.norm(dim=-1)).abs().max()
print(tr(f"50 positions, 8 heads, batch 2: largest change of a length under rotation {change:.1e} (fp32 rounding)",
         f"50 个位置、8 个头、batch 2：旋转前后长度的最大变化 {change:.1e}（fp32 舍入）"))

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
# ## 3. 为什么管用：分数只看得见距离
# 把 $q$ 转过角度 $m \cdot \omega_j$，把 $k$ 转过 $n \cdot \omega_j$。两者的第 $j$ 对各是一个二维向量 $q_j$ 和 $k_j$，转
# 之前夹角为 $\varphi_j$；不旋转的 $D - R$ 维（0.8B 里是 192 维）组成 $q_{\mathrm{pass}}$ 和 $k_{\mathrm{pass}}$。分数是
#
# $$
# q \cdot k = \sum_j \lvert q_j \rvert \, \lvert k_j \rvert \cos\left(\varphi_j + (m - n) \cdot \omega_j\right) +
# q_{\mathrm{pass}} \cdot k_{\mathrm{pass}},
# $$
#
# 所以只剩下差 $m - n$，而不旋转的部分根本不依赖位置。把查询和键一起沿着文本平移，什么都不会变——除了角度的 fp32 舍入误
# 差，它随位置增大（一个接近 50,000 弧度的角度只精确到约 0.004）。

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
             f"q 在 {m:6d}，k 在 {n:6d}（距离 {m - n:+d}）：分数 {s:+.4f}"))

# %% [markdown]
# The same for a whole range of distances, starting from three places in the text: the three curves lie on top
# of each other (random $q$ and $k$; the right panel uses $q = k$ = all ones, the curve usually drawn to show that
# scores shrink, on average, with distance).

# %% [markdown] lang="zh"
# 对一整段距离做同样的事，从文本中三个不同的地方出发：三条曲线彼此重合（$q$ 和 $k$ 是随机的；右图用 $q = k$ = 全 1，
# 这是通常用来说明分数平均随距离变小的那条曲线）。

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
# ## 4. M-RoPE：三个位置轴，以及为什么文本察觉不到
# Qwen3.5 也在图像和视频上训练过。一个图像 patch 有时间、行和列，所以旋转模块给每个 token 取三个位置——$t$（时间）、
# $h$（高）、$w$（宽）；用小写，因为 $T$ 和 $H$ 已经用来表示 token 和头——并让每个频率从其中一个读取角度。读哪一个由
# `mrope_section` = [11, 11, 10] 和一个**交错**的模式决定：$j \bmod 3 = 1$ 时（在 $3 \cdot 11$ 以内）频率 $j$ 读 $h$，
# $j \bmod 3 = 2$ 时（在 $3 \cdot 10$ 以内）读 $w$，其余读 $t$。交错让每个轴都同时拥有快频率和慢频率。Qwen2-VL 用的则是
# 连续的块：在它的 64 个频率中（`head_dim` 128，全部旋转），`mrope_section` [16, 24, 24] 把最快的 16 个给了 $t$，接下来
# 24 个给 $h$，最慢的 24 个给 $w$。
#
# 对文本来说三个位置是同一个数，所以一个频率读哪个轴都无所谓：角度表和普通 RoPE 的完全一样。因此这个模块对文本接受 (B,
# T) 的位置，对图像接受 (3, B, T)。

# %%
for name, c, r in ((HERE, cfg, rope), (REAL, real, rope_real)):
    axis = "".join("thw"[a] for a in mrope_axes(r.R // 2, c.mrope_section).tolist())
    print(tr(f"{name:20s} mrope_section {c.mrope_section}: axis per frequency {axis}",
             f"{name}：mrope_section {c.mrope_section}，每个频率的轴 {axis}"))
p = torch.arange(0, 40000, 1000)[None]  # text: one position per token
angle = p[..., None].float() * rope_real.inv_freq  # plain RoPE, no axes at all
plain = torch.cat((angle, angle), dim=-1)
cos, sin = rope_real(p, torch.float32)
same = torch.equal(cos, plain.cos()) and torch.equal(sin, plain.sin())
print(tr(f"text through M-RoPE == plain RoPE, bit for bit: {same}", f"文本经过 M-RoPE == 普通 RoPE，逐位相同：{same}"))
image = torch.stack([p, p + 1, p])  # a token whose row differs from its time: h reads another position
delta = (rope_real(image, torch.float32)[0] - cos).abs().max()
print(tr(f"with h != t the tables differ: max |Δcos| = {delta:.3f}", f"h != t 时角度表不同：max |Δcos| = {delta:.3f}"))

# %%
book.show("ch04-mrope", ch04.interleave_map, real, REAL_CONFIG)

# %% [markdown]
# ## 5. cos and sin are rounded to the model dtype
# The angles are computed in fp32; cos and sin are then rounded to the model's dtype before they touch q and k. In bf16
# that rounding is up to $2^{-9} \approx 0.002$ — large next to fp32, and part of the model: transformers does it, so a
# bf16 implementation that keeps fp32 tables gives different outputs from the reference.

# %% [markdown] lang="zh"
# ## 5. cos 和 sin 会被舍入到模型的 dtype
# 角度在 fp32 里计算；cos 和 sin 在碰到 q 和 k 之前，先被舍入到模型的 dtype。在 bf16 下，这次舍入最多达
# $2^{-9} \approx 0.002$——比 fp32 大得多，而且它是模型的一部分：transformers 这么做，所以一个保留 fp32 角度表的 bf16 实
# 现，输出会与参考实现不同。

# %%
cos32, _ = rope_real(torch.tensor([[1000]]), torch.float32)
cos16, _ = rope_real(torch.tensor([[1000]]), torch.bfloat16)
a, b, worst = cos32[0, 0, 0], cos16[0, 0, 0].float(), (cos16.float() - cos32).abs().max()
print(tr(f"position 1000, pair 0: cos in fp32 {a:.7f}, in bf16 {b:.7f}; largest rounding over the 64 dims {worst:.1e}",
         f"位置 1000，第 0 对：fp32 下的 cos 为 {a:.7f}，bf16 下为 {b:.7f}；64 维中最大的舍入误差 {worst:.1e}"))

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
# - 把 $\theta$ 设成 10,000（RoPE 论文和 Llama 2 用的值，也是 config 里没有 `rope_theta` 时 transformers 的默认值；Llama
#   3 用 500,000）：`RotaryEmbedding(Config(rope_theta=1e4))`。现在最长的波长是多少，和 262,144 个 token 的上下文比呢？
# - 把 `rotate_half` 换成相邻配对的转法，`torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)`，测一下向量长度，
#   以及从两个地方出发、同一距离下的分数。角度表保持原样时，两者都保不住：第 $2j$ 维和第 $2j + 1$
#   维现在拿到的是两个不同频率的角度，所以这已经不是旋转了。把角度表按对排开，`cos[..., :32].repeat_interleave(2,
#   -1)`（sin 也一样），两者就又成立了。但数字仍然和 transformers 的不同——对这个检查点是错的，除非把每个头的 q 和 k
#   的行置换过来（tests/test_book_ch04.py 把这三种情况都测了）。
# - 给一个 token $t = h = w = 7$，另一个 $t = 7, h = 3, w = 5$：32 个频率中哪些会变？
#
# ## 拿出证明
# 同样的位置送进 transformers 的 `Qwen3_5TextRotaryEmbedding` 和 `apply_rotary_pos_emb`：文本位置用这个检查点的 config，
# 类图像的位置——每个 token 一个不同的 (t, h, w)——用真实 0.8B 的 config，这样在真实的 $R$、$\theta$ 和 `mrope_section`
# 下，每个频率的轴都被检验到。同样的 fp32 运算、同样的顺序，所以差值恰好是 0，fp32 和 bf16 都是。


# %%
def compare(transformers, path):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    real_text = transformers.Qwen3_5TextConfig(**{k: v for k, v in REAL_TEXT_CONFIG.items()
                                                   if k not in ("model_type", "dtype")})
    for name, ours, config, positions in (
            (tr("this checkpoint, text", "本检查点，文本"), rope,
             transformers.AutoConfig.from_pretrained(path).text_config, torch.randint(0, 30000, (2, 16), generator=g)),
            (tr(f"{REAL}, distinct (t, h, w)", f"{REAL}，各不相同的 (t, h, w)"), rope_real, real_text,
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
# - RoPE 按“位置 · 频率”把查询/键的维度成对旋转，所以 $q \cdot k$ 只取决于两个 token 之间的距离。它没有权重。
# - Qwen3.5 只旋转每个头 256 维中的前 $R = 64$ 维，第 $i$ 维和第 $i + 32$ 维配对（rotate half），用 32 个频率
#   $\theta^{-2j/64}$，$\theta = 10^7$：波长从 6.3 个 token 到约 $3.8 \times 10^7$ 个。
# - M-RoPE 给每个频率分配三个位置轴之一（t、h、w：时间、高、宽），交错排列；对文本三者相等，角度表和普通 RoPE 完全一样。
# - 角度在 fp32 里算；cos 和 sin 舍入到模型的 dtype，和 transformers 一样。
#
# ### 形状
#
# B、T、H、Hkv、D、R 同下面的记号表（T：token 数，H：查询头数；M-RoPE 的轴是 t、h、w）。
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | 位置，文本 / 图像 (t, h, w) | (B, T) / (3, B, T) | |
# | `inv_freq` | (R/2,) | (32,) |
# | cos, sin | (B, T, R) | (B, T, 64) |
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
# 206 · 旋转位置编码：频率、角度表和旋转，附有常见错误的提示（256 维全转了、相邻配对、$\theta$ 用错、cos 和 sin 留在
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
# ## 怎么讲清楚
#
# 1. **问题是什么。** 注意力是一种集合运算：$q \cdot k$ 不知道 token 在哪里。绝对位置编码是往输入上加一个位置向量；RoPE
#    则按与位置有关的角度旋转 $q$ 和 $k$，使分数取决于相对位置 $m - n$——这正是注意力需要的——而且不需要任何参数。
# 2. **怎么做。** 把参与旋转的维度分成对，给第 $j$ 对频率 $\theta^{-2j/R}$，把它转过 $p$ 乘以这个频率。
#    快的那几对分辨近处的先后顺序；慢的那几对在很长的距离上仍在变化。更大的 $\theta$（Qwen3.5 用 $10^7$ 而不是 $10^4$）
#    拉长了慢的一端，这正是长上下文所需要的。
# 3. **Qwen3.5 的细节。** 部分旋转（256 维中转 64 维：每个头其余的维度可以只按内容匹配）、rotate-half 配对（第 $i$ 维配
#    第 $i + R/2$ 维），以及用于图像的 M-RoPE，它采用交错的 t/h/w 布局，对文本退化为普通 RoPE。cos/sin 在使用前舍入到
#    bf16，忠实的重新实现也必须这样做。
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
# + 本章新增 · 无标记：前面章节写的
# ```
