"""Chapter 10: the vision tower by hand — a photo becomes tokens that the decoder of chapters 1–9 reads.

第 10 章：手写视觉塔——一张照片变成 token，交给第 1–9 章的解码器去读。

The tower cuts the picture into patches, embeds and merges them into tokens of the text width, and M-RoPE gives
them three position axes (time, row, column).

Run: python chapters/ch10_vision.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch10_vision.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 10 · The vision tower: a picture becomes tokens
#
# Qwen3.5 is natively multimodal. Beside the 752 M parameters of the text model, the checkpoint of the 0.8B holds a
# vision transformer of about 100 M parameters (`model.visual.*`) that the chapters so far never read. This chapter
# follows one photograph all the way: pixels → patches → the vision blocks → merged tokens of the text width → placed
# into the prompt with positions on three axes (time, row, column) → the decoder of chapters 1–9 reads them like any
# other token and answers.
#
# ```
# qwen/
# ├── …               (chapters 1–9)
# ├── image.py        + from a picture to patches: the resize rule, normalisation, the patch order
# ├── vision.py       + the tower (patch embedding, position grid, 2-D rotary, blocks, merger) and load_vision
# ├── mrope.py        + the image in the prompt and its 3-D positions
# ├── model.py        ~ model(ids, pixel_values=..., image_grid_thw=...) once model.visual = load_vision(checkpoint)
# ├── generate.py     ~ generate(..., images=(pixel_values, image_grid_thw))
# └── chat.py         ~ an image content part renders as <|vision_start|><|image_pad|><|vision_end|>
# book/
# └── ch10.py         + this chapter's figures, the token bill, the vision notation (real values: qwen/sizes.py)
# chapters/
# └── ch10_vision.py  + this chapter's script
# notebooks/
# └── ch10_vision.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch10_vision.py` (`--figures` saves the figures, `--proof`
# compares with transformers). With the synthetic checkpoint the tower has the real 0.8B's layout and depth with
# narrow widths and random weights. Real there: every step, and every shape that follows from the image and the
# preprocessor settings (the resize, the patches, `pixel_values`, the token count, the positions). Not real: the
# widths (the tower's C and the text's d, 768 and 1,024 in the real 0.8B, are far narrower here), so every shape
# that has one of them, and every number computed from the weights. Where they differ, the real 0.8B's value is
# printed beside this checkpoint's.

# %% [markdown] lang="zh"
# # 第 10 章 · 视觉塔（视觉编码器）：一张图变成 token
#
# Qwen3.5 原生支持多模态。0.8B 的检查点里，除了文本模型的 752 M 个参数，还有一个约 100 M 参数的视觉
# Transformer（`model.visual.*`），前面各章从没读过它。本章跟着一张照片走完全程：像素 → patch → 视觉块 → 合并成与文本
# 同宽的 token → 放进提示词，位置分三个轴（时间、行、列）→ 第 1–9 章的解码器像读普通 token 一样读它们，然后作答。
#
# ```
# qwen/
# ├── …               （第 1–9 章）
# ├── image.py        + 从图片到 patch：缩放规则、归一化、patch 的顺序
# ├── vision.py       + 视觉塔（patch 嵌入、位置网格、二维旋转位置编码、视觉块、合并器）和 load_vision
# ├── mrope.py        + 提示词里的图片及其三维位置
# ├── model.py        ~ 设好 model.visual = load_vision(checkpoint) 后：model(ids, pixel_values=..., image_grid_thw=...)
# ├── generate.py     ~ generate(..., images=(pixel_values, image_grid_thw))
# └── chat.py         ~ 图片内容渲染成 <|vision_start|><|image_pad|><|vision_end|>
# book/
# └── ch10.py         + 本章的图、token 开销表、视觉部分的符号表（真实值：qwen/sizes.py）
# chapters/
# └── ch10_vision.py  + 本章的脚本
# notebooks/
# └── ch10_vision.ipynb + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的也是这份代码：`python chapters/ch10_vision.py`（`--figures` 保存图，`--proof` 与 transformers 对照）。用合
# 成检查点时，视觉塔的结构和深度与真实 0.8B 相同，只是宽度窄、权重随机。与真实模型一致的：每一步计算，以及由图片和预处
# 理设置决定的所有形状（缩放、patch、`pixel_values`、token 数、位置）。与真实模型不同的：宽度（视觉塔的 C 和文本的 d，
# 真实 0.8B 里分别是 768 和 1,024，这里窄得多），因而凡是带这两个宽度的形状、由权重算出的每个数，都和真实模型不同。两
# 者不一样的地方，会在本检查点的值旁边打印真实 0.8B 的值。

# %%
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import cbook
from PIL import Image

import book
from book import ch10
from qwen.chat import render
from qwen.checkpoint import open_checkpoint
from qwen.course import chapter_args
from qwen.generate import generate
from qwen.image import ImageSettings, load_image, preprocess, smart_resize, to_rgb
from qwen.lang import columns, ljust, rjust, tr, yes_no
from qwen.model import load_model
from qwen.mrope import expand_image_tokens, tokens_per_image
from qwen.rope import RotaryEmbedding, mrope_axes
from qwen.sizes import real_config
from qwen.synthetic import banner, synthetic_path
from qwen.tokenizer import load_tokenizer
from qwen.vision import load_vision, merge_order

args = chapter_args(__doc__)
missing = ch10.missing_tower(args.checkpoint)
if missing:  # a text-only Qwen3.5 folder: this chapter needs a tower, so it shows the synthetic one's
    print(tr(f"(no vision tower here: {missing}; this chapter runs on the synthetic checkpoint instead)",
             f"（这里没有视觉塔：{missing}；本章改用合成检查点运行）"))
    args.checkpoint = open_checkpoint(synthetic_path())
    print(banner(book.in_notebook()))
SYNTHETIC = args.checkpoint.synthetic
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
NOISE = tr(" (random weights: the tokens mean nothing)", "（随机权重：这些 token 没有意义）") if SYNTHETIC else ""
dev = args.device
dtype = torch.float32 if dev.type == "cpu" else None  # a CPU multiplies fp32 faster than bf16; elsewhere bf16
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %%
book.show("ch10-map", book.model_map.draw, "vision")

# %% [markdown]
# ## 1. The photograph and the pixel budget
# matplotlib ships a photograph with its sample data: Grace Hopper, in uniform. Every learner has it offline, so
# it is the picture of this chapter. The preprocessing settings come from the checkpoint's
# `preprocessor_config.json`: the pixel budget (`size`: `shortest_edge` is the least number of pixels, `longest_edge`
# the most, despite their names), the patch size, the merge size, and the mean and std of the normalisation. A
# checkpoint without that file gets the values Qwen3.5 publishes there, except the three its tower is built for (the
# patch size, the merge size, the frames per patch): those come from its vision_config, and a
# `preprocessor_config.json` that disagrees with the vision_config is an error.

# %% [markdown] lang="zh"
# ## 1. 照片与像素预算
# matplotlib 的示例数据里自带一张照片：身穿军装的 Grace Hopper。每个学习者离线也能拿到它，本章就用这张图。预处理设置来
# 自检查点的 `preprocessor_config.json`：像素预算（`size`；别被名字误导，`shortest_edge` 是最少像素数，`longest_edge`
# 是最多像素数）、patch 大小、合并尺寸，以及归一化用的均值和标准差。检查点里没有这个文件时，就用 Qwen3.5 在该文件里公
# 布的值；只有三个值例外，它们决定了视觉塔的结构（patch 大小、合并尺寸、每个 patch 的帧数），要取自检查点的
# vision_config。`preprocessor_config.json` 与 vision_config 不一致时，直接报错。

# %%
photo = load_image(cbook.get_sample_data("grace_hopper.jpg"))
try:
    s = args.checkpoint.image  # its preprocessor_config.json, read now
except ValueError as e:  # a preprocessor_config.json that disagrees with the tower: one clear line
    sys.exit(f"error: {e}")
published = ImageSettings()
own = (tr("this checkpoint's preprocessor_config.json", "本检查点的 preprocessor_config.json")
       if (args.checkpoint.folder / "preprocessor_config.json").is_file() else
       tr("this checkpoint (no preprocessor_config.json: patch, merge and frames from its vision_config)",
          "本检查点（没有 preprocessor_config.json：patch 大小、合并尺寸和帧数取自它的 vision_config）"))
n_pixels = photo.width * photo.height
print(tr(f"the photo: {photo.width} × {photo.height} pixels (width × height), mode {photo.mode}, {n_pixels:,} pixels",
         f"照片：{photo.width} × {photo.height} 像素（宽 × 高），模式 {photo.mode}，共 {n_pixels:,} 像素"))
for name, x in ((own, s),
                (tr("published with Qwen3.5 (third-party copies, not verified here)",
                    "Qwen3.5 公布的值（据第三方副本，这里未核实）"), published)):
    lo, hi, mean, std = x.min_pixels ** 0.5, x.max_pixels ** 0.5, list(x.image_mean), list(x.image_std)
    print(tr(f"{name}: {x.min_pixels:,} to {x.max_pixels:,} pixels ({lo:.0f}² to {hi:.0f}²), patch {x.patch_size}, "
             f"merge {x.merge_size}, frames per patch {x.temporal_patch_size}, mean {mean}, std {std}",
             f"{name}：{x.min_pixels:,} 到 {x.max_pixels:,} 像素（{lo:.0f}² 到 {hi:.0f}²），patch 大小 {x.patch_size}，"
             f"合并尺寸 {x.merge_size}，每个 patch {x.temporal_patch_size} 帧，均值 {mean}，标准差 {std}"))

# %% [markdown]
# ## 2. The resize rule
# The tower cuts the image into $P \times P$ patches ($P = 16$) and its merger later joins $m \times m$ neighbouring
# patches ($m = 2$) into one token, so both sides must be multiples of $P \cdot m = 32$. `smart_resize` rounds each side
# to the nearest multiple of 32 (Python's `round`, which sends halves to the even neighbour: 10.5 → 10, 11.5 → 12),
# keeping the aspect ratio as well as it can. Only that rounded size is checked against the budget. If it has more
# pixels than `max_pixels`, it is dropped and the *original* sides $H$ and $W$ are divided by
# $\beta = \sqrt{H \cdot W / \mathrm{max\_pixels}}$ (the original pixel count, not the rounded one), each rounded *down*
# to a multiple of 32 (at least 32); if it has fewer than `min_pixels`, the original sides are multiplied by
# $\beta = \sqrt{\mathrm{min\_pixels} / (H \cdot W)}$, each rounded *up*. Rounding down keeps a shrunk image within
# `max_pixels`, rounding up keeps an enlarged one at `min_pixels` or more. This is the rule of transformers'
# `smart_resize`; ours adds one clear error for an image too thin to fit. The photo:

# %% [markdown] lang="zh"
# ## 2. 缩放规则
# 视觉塔把图切成 $P \times P$ 的 patch（$P = 16$），合并器之后再把 $m \times m$ 个相邻 patch（$m = 2$）并成一个
# token，所以两条边都必须是 $P \cdot m = 32$ 的倍数。`smart_resize` 把每条边取整到最近的 32 的倍数（用 Python 的
# `round`，恰好一半时取偶数：10.5 → 10，11.5 → 12），尽量保持宽高比。拿去和预算比较的，只有取整后的尺寸。像素数超过
# `max_pixels` 时，弃用这个尺寸，改把*原始*边长 $H$、$W$ 都除以 $\beta = \sqrt{H \cdot W / \mathrm{max\_pixels}}$（用
# 原始像素数，不是取整后的），再各自*向下*取整到 32 的倍数（至少为 32）；少于 `min_pixels` 时，把原始边长乘以
# $\beta = \sqrt{\mathrm{min\_pixels} / (H \cdot W)}$，各自*向上*取整。向下取整，缩小后的图就不会超过 `max_pixels`；向
# 上取整，放大后的图就不会少于 `min_pixels`。这就是 transformers 里 `smart_resize` 的规则；我们的版本只多做了一件事：
# 图太细长、放不进预算时，给出一条明确的报错。这张照片：

# %%
f = s.factor
h, w = smart_resize(photo.height, photo.width, s)
for side, n in ((tr("height", "高"), photo.height), (tr("width", "宽"), photo.width)):
    k = round(n / f)
    print(tr(f"{side:6s} {n} / {f} = {n / f:.4g} -> round -> {k} · {f} = {k * f}",
             f"{side} {n} / {f} = {n / f:.4g} -> 取整 -> {k} · {f} = {k * f}"))
ph, pw, P = h // s.patch_size, w // s.patch_size, s.patch_size
print(tr(f"{w} × {h} = {w * h:,} pixels: inside the budget, so no further scaling; {ph} × {pw} patches of {P} × {P}, "
         f"{h * w // f ** 2} tokens",
         f"{w} × {h} = {w * h:,} 像素：在预算之内，不再缩放；{ph} × {pw} 个 {P} × {P} 的 patch，"
         f"{h * w // f ** 2} 个 token"))
for width, height in ((8000, 6000), (100, 80)):  # a 48-megapixel photo, and a thumbnail
    rh, rw = smart_resize(height, width, s)
    shrunk = rh * rw < width * height
    way = tr("shrunk, rounding down", "缩小，向下取整") if shrunk else tr("enlarged, rounding up", "放大，向上取整")
    print(tr(f"{width} × {height} ({width * height:,} pixels) is {way}: {rw} × {rh} = {rw * rh:,} pixels, "
             f"{rh * rw // f ** 2:,} tokens",
             f"{width} × {height}（{width * height:,} 像素）要{way}：{rw} × {rh} = {rw * rh:,} 像素，"
             f"{rh * rw // f ** 2:,} 个 token"))

# %% [markdown]
# ## 3. From pixels to patches
# After the resize (bicubic, on the 8-bit image), three steps turn the picture into `pixel_values`:
#
# 1. **rescale and normalise**: each 8-bit value times `rescale_factor` (1/255) gives $[0, 1]$; then
#    $(x - \mathrm{mean}) / \mathrm{std}$ per channel. With Qwen3.5's $\mathrm{mean} = \mathrm{std} = 0.5$ every value
#    lands in $[-1, 1]$.
# 2. **repeat in time**: the patch embedding reads $T_p = 2$ frames at once (the same weights read videos), so a still
#    image is repeated: both frames of every patch are the same picture.
# 3. **patchify in the merge order**: cut the (3, h, w) array into $P \times P$ patches and flatten each one in the
#    order (channel, frame, row, column): $3 \cdot 2 \cdot 16 \cdot 16 = 1{,}536$ numbers, one row of `pixel_values`.
#    The rows are *not* in reading order: they go block by block (each block is the $m \times m = 2 \times 2$ patches
#    the merger will join), and inside a block row by row. Then the 4 patches of merged token $k$ are rows
#    $4k, \dots, 4k + 3$, and the merger only has to put 4 consecutive rows side by side.
#
# The result is `pixel_values` (N, 1536) with $N = (h/16) \cdot (w/16)$ patches, and `image_grid_thw` = [[1, h/16,
# w/16]]: one frame ($t = 1$ after the temporal merge), the patch grid's height and width. The figure shows the order on
# the photo.

# %% [markdown] lang="zh"
# ## 3. 从像素到 patch
# 缩放（在 uint8 图像上做双三次插值）之后，还要三步才把图变成 `pixel_values`：
#
# 1. **缩放数值并归一化**：每个 uint8 值乘以 `rescale_factor`（1/255），落到 $[0, 1]$；再逐通道算
#    $(x - \mathrm{mean}) / \mathrm{std}$。Qwen3.5 的 $\mathrm{mean} = \mathrm{std} = 0.5$，所以每个值都落在 $[-1, 1]$
#    内。
# 2. **在时间上重复**：patch 嵌入一次读 $T_p = 2$ 帧（同一套权重也用来读视频），所以静态图要复制一份：每个 patch 的两
#    帧是同一张图。
# 3. **按合并顺序切 patch**：把 (3, h, w) 的数组切成 $P \times P$ 的 patch，每个 patch 按（通道，帧，行，列）的顺序展
#    平成 $3 \cdot 2 \cdot 16 \cdot 16 = 1{,}536$ 个数，就是 `pixel_values` 的一行。这些行*不*按阅读顺序排列，而是一组
#    一组地排（每组是合并器要合并的 $m \times m = 2 \times 2$ 个 patch），组内再逐行排列。这样，合并后第 $k$ 个 token
#    的 4 个 patch 正好是第 $4k, \dots, 4k + 3$ 行，合并器只需把相邻的 4 行并排拼起来。
#
# 结果是 `pixel_values` (N, 1536)，其中 $N = (h/16) \cdot (w/16)$ 是 patch 数；另有 `image_grid_thw` = [[1, h/16,
# w/16]]：一帧（时间维合并后 $t = 1$），再加上 patch 网格的高和宽。下图把这个顺序画在照片上。

# %%
resized = to_rgb(photo).resize((w, h), resample=Image.Resampling.BICUBIC)
book.show("ch10-patches", ch10.patch_grid, np.array(resized), s.patch_size, s.merge_size)

# %% [markdown]
# **Try it first**: exercise 216 is the patchify order (run `python practice/judge.py start 216`, or write it in the
# cell below: the judge grades it here). Its named mistakes: patches in plain reading order (which breaks the 2 × 2
# groups), channels last, the temporal repeat left out.

# %% [markdown] lang="zh"
# **先自己试试**：练习 216 就是切 patch 的顺序（运行 `python practice/judge.py start 216`，或者直接写在下面的单元格里
# ，评测器就在这里评分）。它点名的典型错误有三个：按普通的阅读顺序排 patch（会打散 2 × 2 的分组）、把通道放在最后、漏
# 掉时间上的重复。

# %%
def patchify(pixels, patch_size, merge_size, temporal_patch_size):
    raise NotImplementedError  # your code: (3, H, W) normalised pixels -> (pixel_values, image_grid_thw)


book.attempt(216, patchify)

# %% [markdown]
# ### The finished module: `qwen/image.py`

# %% [markdown] lang="zh"
# ### 完成的模块：`qwen/image.py`

# %%
book.listing("qwen/image.py")

# %% [markdown]
# `patchify` is one reshape that names every axis — (channel, block row, row in block, y, block column, column in
# block, x) — one permute that puts the blocks first and each patch's pixels last, and an `expand` that repeats the
# frame without copying. On the photo, and a check of every row against the resized picture cut by hand: row
# 4k + 2a + b must be the patch at row 2i + a, column 2j + b of the patch grid, where token k sits at (i, j).

# %% [markdown] lang="zh"
# `patchify` 只有三步：一次 reshape，给每个轴起好名字（通道、组行、组内行、y、组列、组内列、x）；一次 permute，把组放
# 在最前、每个 patch 的像素放在最后；再用 `expand` 重复帧，不复制数据。下面在照片上运行它，并把每一行和从缩放后的图上
# 手工切下的 patch 逐一对照：如果 token k 位于 (i, j)，那么第 4k + 2a + b 行必须是 patch 网格中第 2i + a 行、第 2j + b
# 列的 patch。

# %%
pixel_values, grid = preprocess(photo, s)
gh, gw = int(grid[0, 1]), int(grid[0, 2])
x = torch.from_numpy(np.array(resized)).permute(2, 0, 1)  # (3, h, w) uint8
x = (x.double() * s.rescale_factor).float()  # [0, 1]
x = (x - torch.tensor(s.image_mean)[:, None, None]) / torch.tensor(s.image_std)[:, None, None]  # (3, h, w)
P, m = s.patch_size, s.merge_size
rows_match = all(
    torch.equal(pixel_values[m * m * (i * (gw // m) + j) + m * a + b],
                x[:, P * (m * i + a):P * (m * i + a + 1), P * (m * j + b):P * (m * j + b + 1)][:, None]
                .expand(-1, s.temporal_patch_size, -1, -1).flatten())
    for i in range(gh // m) for j in range(gw // m) for a in range(m) for b in range(m))
low, high, merged_n = float(x.min()), float(x.max()), tokens_per_image(grid, m)[0]
print(tr(f"normalised pixels {tuple(x.shape)}, from {low:+.2f} to {high:+.2f}",
         f"归一化后的像素 {tuple(x.shape)}，从 {low:+.2f} 到 {high:+.2f}"))
print(tr(f"pixel_values {tuple(pixel_values.shape)} {pixel_values.dtype}, image_grid_thw {grid.tolist()}: "
         f"{gh} × {gw} = {gh * gw:,} patches, {merged_n} merged tokens",
         f"pixel_values {tuple(pixel_values.shape)} {pixel_values.dtype}，image_grid_thw {grid.tolist()}："
         f"{gh} × {gw} = {gh * gw:,} 个 patch，合并成 {merged_n} 个 token"))
print(tr(f"every row is the patch cut by hand from the resized photo, both frames the same: {rows_match}",
         f"每一行都和从缩放后的照片上手工切下的 patch 相同，两帧也相同：{yes_no(rows_match)}"))

# %% [markdown]
# ## 4. The patch embedding is a matrix product
# The checkpoint stores the first layer as a Conv3d with kernel (2, 16, 16) and the *same* stride: the kernel never
# overlaps itself, so each output reads exactly one patch, and a convolution that reads one patch per output is a matrix
# product: $\mathrm{embed} = \mathrm{pixel\_values} \cdot W^\top + b$, with the kernel $W$ (C, 3, 2, 16, 16) flattened
# to (C, 1,536) in the same (channel, frame, row, column) order as a patch. Here it is proven on the photo. Because both
# frames of a still image are equal, a still image in effect uses the sum of the kernel's two frame slices.
#
# The tower is read from the checkpoint here, and only the tower: `load_vision` opens the safetensors files lazily
# and reads the `model.visual.*` tensors alone.

# %% [markdown] lang="zh"
# ## 4. patch 嵌入就是一次矩阵乘法
# 检查点把第一层存成一个 Conv3d：卷积核（kernel）为 (2, 16, 16)，步长*与卷积核相同*。卷积核每次挪动都不与上一次重叠，
# 每个输出恰好只读一个 patch；而每个输出只读一个 patch 的卷积，就是一次矩阵乘法
# ：$\mathrm{embed} = \mathrm{pixel\_values} \cdot W^\top + b$，其中卷积核 $W$ (C, 3, 2, 16, 16) 按与 patch 相同的（通
# 道，帧，行，列）顺序展平成 (C, 1,536)。下面在照片上验证这一点。静态图的两帧相同，所以实际效果相当于只用一帧，乘以卷
# 积核两个帧切片之和。
#
# 这里从检查点读入视觉塔，而且只读视觉塔：`load_vision` 惰性地打开 safetensors 文件，只读其中 `model.visual.*` 这些张
# 量。

# %%
tower = load_vision(args.checkpoint, dtype=dtype, device=dev)
vcfg = tower.cfg
C = vcfg.hidden_size
W = tower.patch_embed.proj.weight.float().cpu()  # (C, 3, Tp, P, P): the stored Conv3d kernel
bias = tower.patch_embed.proj.bias.float().cpu()
conv = F.conv3d(pixel_values.view(-1, 3, s.temporal_patch_size, P, P), W, bias, stride=(s.temporal_patch_size, P, P))
product = pixel_values @ W.flatten(1).T + bias  # (N, C)
one_frame = pixel_values.view(-1, 3, s.temporal_patch_size, P, P)[:, :, 0].flatten(1) @ W.sum(2).flatten(1).T + bias
scale = float(product.abs().max())
by_conv, by_frame = float((conv.flatten(1) - product).abs().max()), float((one_frame - product).abs().max())
matrix = tuple(W.flatten(1).shape)
print(tr(f"kernel {tuple(W.shape)} -> matrix {matrix}; Conv3d output {tuple(conv.shape)} = (N, C, 1, 1, 1)",
         f"kernel {tuple(W.shape)} -> 矩阵 {matrix}；Conv3d 的输出 {tuple(conv.shape)} = (N, C, 1, 1, 1)"))
print(tr(f"max |Conv3d − matrix product| = {by_conv:.1e}, max |one frame · summed kernel − matrix product| = "
         f"{by_frame:.1e} (embeddings up to {scale:.2f})",
         f"max |Conv3d − 矩阵乘积| = {by_conv:.1e}，max |单帧 · 两帧相加后的 kernel − 矩阵乘积| = "
         f"{by_frame:.1e}（嵌入的绝对值最大为 {scale:.2f}）"))
real = ch10.real_vision()
real_width = real.in_channels * real.temporal_patch_size * real.patch_size ** 2  # 3 · 2 · 16 · 16 = 1,536
kernel = (real.hidden_size, real.in_channels, real.temporal_patch_size, real.patch_size, real.patch_size)
print(tr(f"real Qwen3.5-0.8B: kernel {kernel} = {real.hidden_size * real_width:,} weights, "
         f"so each patch becomes a {real.hidden_size}-vector; this checkpoint: C = {C}",
         f"真实 Qwen3.5-0.8B：kernel {kernel} = {real.hidden_size * real_width:,} 个权重，"
         f"所以每个 patch 变成一个 {real.hidden_size} 维向量；本检查点：C = {C}"))

# %% [markdown]
# ## 5. Positions I: the learned grid, resampled
# The tower learns one position vector per cell of a 48 × 48 grid (`pos_embed`, `num_position_embeddings` = 2,304 rows
# of C). An image has its own patch grid (38 × 32 for the photo), so the learned grid is resampled to it **bilinearly
# with corners aligned**: the corner patches take the corner vectors exactly, and patch $(r, c)$ reads the grid at
# $\left(\frac{(\mathrm{side} - 1) \cdot r}{g_h - 1}, \frac{(\mathrm{side} - 1) \cdot c}{g_w - 1}\right)$, blending its
# four neighbours. The result, listed in the merge order, is added to the patch embeddings. By hand, for one patch,
# against the tower's own:

# %% [markdown] lang="zh"
# ## 5. 位置之一：学到的网格，重新采样
# 视觉塔为 48 × 48 网格的每个格子学一个位置向量（`pos_embed`，`num_position_embeddings` = 2,304 行，每行 C 维）。一张
# 图有自己的 patch 网格（这张照片是 38 × 32），所以要把学到的网格重新采样到这个网格上，方法是**双线性插值、角点对
# 齐**：四个角上的 patch 正好取到四个角的向量，patch $(r, c)$ 在网格的
# $\left(\frac{(\mathrm{side} - 1) \cdot r}{g_h - 1}, \frac{(\mathrm{side} - 1) \cdot c}{g_w - 1}\right)$ 处取值，由周
# 围四个格点混合而成。结果按合并顺序排好，加到 patch 嵌入上。下面对一个 patch 手算一遍，再和视觉塔自己的结果对比：

# %%
table = tower.pos_embed.weight.float().cpu()  # (side², C)
side = int(table.shape[0] ** 0.5)


def resample(t):
    """(side², C) grid -> (gh, gw, C) in reading order: bilinear, corners aligned."""
    out = F.interpolate(t.T.reshape(1, -1, side, side), size=(gh, gw), mode="bilinear", align_corners=True)
    return out[0].permute(1, 2, 0)


raster = resample(table)  # (gh, gw, C)
r, c = 5, 7  # one patch, away from the corners
yy, xx = (side - 1) * r / (gh - 1), (side - 1) * c / (gw - 1)
y0, x0 = int(yy), int(xx)
grid2d = table.reshape(side, side, C)
by_hand = ((1 - (yy - y0)) * ((1 - (xx - x0)) * grid2d[y0, x0] + (xx - x0) * grid2d[y0, x0 + 1])
           + (yy - y0) * ((1 - (xx - x0)) * grid2d[y0 + 1, x0] + (xx - x0) * grid2d[y0 + 1, x0 + 1]))
theirs = tower.positions(gh, gw).float().cpu()  # (gh·gw, C) in the merge order
off = float((by_hand - raster[r, c]).abs().max())
print(tr(f"patch ({r}, {c}) reads the {side} × {side} grid at ({yy:.3f}, {xx:.3f}): max |by hand − interpolate| = "
         f"{off:.1e}",
         f"patch ({r}, {c}) 在 {side} × {side} 网格上的取值点是 ({yy:.3f}, {xx:.3f})：max |手算 − F.interpolate| = "
         f"{off:.1e}"))
first_corner, last_corner = torch.equal(raster[0, 0], grid2d[0, 0]), torch.allclose(raster[-1, -1], grid2d[-1, -1],
                                                                                     atol=1e-6)
same_table = torch.allclose(merge_order(raster, m), theirs, atol=1e-6)
print(tr(f"the corners are the grid's corners: {first_corner}, {last_corner}; "
         f"in the merge order it is the tower's table: {same_table}",
         f"角上的 patch 取到的正是网格的角：{yes_no(first_corner)}、{yes_no(last_corner)}；"
         f"按合并顺序排好后，与视觉塔自己的表一致：{yes_no(same_table)}"))

# %% [markdown]
# The figure projects every vector on the table's first principal component (one number per position), the learned
# grid on the left, the image's resampled grid on the right. In a trained ViT the learned position vectors vary
# smoothly: neighbouring positions get similar vectors, with a visible row and column structure (Dosovitskiy et al.,
# *An Image is Worth 16x16 Words*, 2021, figure 7). The synthetic checkpoint's table is random noise, with nothing to
# see, so on it the figure draws a **stand-in**, labelled so: a table of the same shape made of random
# low-frequency waves over rows and columns, resampled by the same rule. With a real checkpoint it draws the real
# table.

# %% [markdown] lang="zh"
# 下图把每个向量投影到这张表的第一主成分上（每个位置得到一个数）：左边是学到的网格，右边是重新采样到这张图上的网格。训
# 练好的 ViT 里，学到的位置向量变化平滑：相邻位置的向量相近，能看出明显的行、列结构（Dosovitskiy 等，*An Image is
# Worth 16x16 Words*，2021，图 7）。合成检查点的表是随机噪声，什么也看不出来，所以这时图里画的是一个**替身**，图上也注
# 明了：一张形状相同的表，由沿行、列方向的随机低频波叠加而成，再按同样的规则重新采样。用真实检查点时，画的就是真实的表
# 。

# %%
shown = ch10.smooth_standin(side, C) if SYNTHETIC else table  # random weights: a stand-in, labelled so
book.show("ch10-positions", ch10.position_grid, shown, resample(shown), SYNTHETIC)

# %% [markdown]
# ## 6. Positions II: the 2-D rotary embedding
# Inside the blocks, attention also turns q and k by angles, as in chapter 4, but in two dimensions. A head of
# $D_h = C / \mathrm{heads}$ dims is turned in rotate-half pairs, all of it (no partial rotary here), with $D_h/4$
# frequencies $f_j = \theta^{-4j/D_h}$, $\theta$ = the vision config's `rope_theta` (10,000 unless it says otherwise).
# The first $D_h/4$ pair angles are $\mathrm{row} \cdot f_j$, the next $D_h/4$ are $\mathrm{column} \cdot f_j$. So a
# score $q \cdot k$ depends on the two patches' row difference and column
# difference only. Shifting both patches by the same (3, 5) leaves it unchanged:

# %% [markdown] lang="zh"
# ## 6. 位置之二：二维旋转位置编码
# 在视觉块内部，注意力也像第 4 章那样按角度旋转 q 和 k，只是换成了两个维度。一个 $D_h = C / \mathrm{heads}$ 维的头按前
# 后半交换（rotate-half）两两配对旋转，整个头都转（这里没有部分旋转）；共 $D_h/4$ 个频率
# $f_j = \theta^{-4j/D_h}$，$\theta$ 是视觉配置里的 `rope_theta`（配置里没写就是 10,000）。前 $D_h/4$ 对的角度是
# $\mathrm{row} \cdot f_j$，后 $D_h/4$ 对是 $\mathrm{column} \cdot f_j$。因此分数 $q \cdot k$ 只取决于两个 patch 的行
# 差和列差。把两个 patch 同时平移 (3, 5)，分数不变：

# %%
Dh = C // vcfg.num_heads
cos, sin = (t.float().cpu() for t in tower.rotary(gh, gw, "cpu"))  # (gh·gw, Dh) each, in the merge order


def at(rr, cc):
    """The row of patch (rr, cc) in the merge order."""
    return ch10.merge_row(rr, cc, gw, m)


def score(q, k, a, b):
    """q at patch a, k at patch b, both turned by the 2-D rotary embedding: their dot product."""
    def turn(v, i):
        return v * cos[i] + torch.cat((-v[Dh // 2:], v[:Dh // 2])) * sin[i]
    return float(turn(q, at(*a)) @ turn(k, at(*b)))


q, k = torch.randn(Dh), torch.randn(Dh)
real_dh = real.hidden_size // real.num_heads
pairs, per_axis, real_pairs, real_per_axis = Dh // 2, Dh // 4, real_dh // 2, real_dh // 4
print(tr(f"a head of Dh = {Dh} dims is {pairs} rotate-half pairs: {per_axis} turned by the row, {per_axis} by the "
         f"column, at {per_axis} frequencies per axis, θ = {vcfg.rope_theta:g} (real Qwen3.5-0.8B: Dh = {real_dh}, "
         f"{real_pairs} pairs, {real_per_axis} frequencies per axis)",
         f"一个头 Dh = {Dh} 维，按前后半交换（rotate-half）配成 {pairs} 对：{per_axis} 对按行旋转，"
         f"{per_axis} 对按列旋转，每个轴 {per_axis} 个频率，θ = {vcfg.rope_theta:g}"
         f"（真实 Qwen3.5-0.8B：Dh = {real_dh}，{real_pairs} 对，每个轴 {real_per_axis} 个频率）"))
here, moved, apart = score(q, k, (2, 3), (4, 1)), score(q, k, (5, 8), (7, 6)), score(q, k, (2, 3), (9, 1))
print(tr(f"q·k at patches (2, 3) and (4, 1): {here:+.6f}; both moved by (3, 5): {moved:+.6f}; "
         f"moved apart instead: {apart:+.6f}",
         f"q·k（patch (2, 3) 与 (4, 1)）：{here:+.6f}；两者同时平移 (3, 5)：{moved:+.6f}；"
         f"改为拉开距离：{apart:+.6f}"))

# %% [markdown]
# ## 7. The blocks: attention within one image
# Then `depth` pre-norm blocks, as in a ViT: LayerNorm (with a bias, not the RMSNorm of the text model), attention,
# residual; LayerNorm, an MLP with GELU (tanh form), residual. Attention is **bidirectional** — no causal mask, a
# patch sees the whole picture — but it stays **inside one image**: when several images go through the tower in one
# call, their patches are listed one after another and each image attends only to its own. So one call with two
# images gives what two calls give:

# %% [markdown] lang="zh"
# ## 7. 视觉块：注意力只在一张图之内
# 接下来是 `depth` 个 pre-norm 块，与 ViT 相同：LayerNorm（带偏置，不是文本模型的 RMSNorm）、注意力、残差；LayerNorm、
# 用 GELU（tanh 近似）的 MLP、残差。注意力是**双向的**——没有因果掩码，一个 patch 能看到整张图——但只在**一张图之内**：
# 多张图在一次调用里经过视觉塔时，它们的 patch 首尾相接排成一列，每张图只关注自己的 patch。所以两张图放在一次调用里，
# 和每张图各调用一次，结果相同：

# %%
face = photo.crop((150, 80, 330, 260))  # 180 × 180 pixels: enlarged to the minimum budget
corner = photo.crop((0, 0, 320, 200))  # 320 × 200: enlarged too, to another grid
(a_values, a_grid), (b_values, b_grid) = preprocess(face, s), preprocess(corner, s)
both = tower(torch.cat([a_values, b_values]).to(dev), torch.cat([a_grid, b_grid]))
alone = torch.cat([tower(a_values.to(dev), a_grid), tower(b_values.to(dev), b_grid)])
print(tr(f"two crops of the photo: grids {a_grid.tolist()} and {b_grid.tolist()}, {a_values.shape[0]} and "
         f"{b_values.shape[0]} patches",
         f"从照片上裁出两张小图：网格 {a_grid.tolist()} 和 {b_grid.tolist()}，分别有 {a_values.shape[0]} 和 "
         f"{b_values.shape[0]} 个 patch"))
diff, top_out = float((both - alone).abs().max()), float(alone.abs().max())
print(tr(f"both in one call vs one call each: max |diff| = {diff:.1e} (outputs up to {top_out:.2f})",
         f"两张图放在一次调用里，与每张各调用一次相比：max |差| = {diff:.1e}（输出的绝对值最大为 {top_out:.2f}）"))

# %% [markdown]
# ## 8. Placing the image in the text
# In the prompt an image is three kinds of special tokens: `<|vision_start|>`, then one `<|image_pad|>` per merged
# token, then `<|vision_end|>`. The chat format writes a single pad for an image content part;
# `expand_image_tokens` repeats it as many times as the image has tokens. The model embeds the ids as usual, and
# replaces the rows at the pads by the merger's outputs, in order (section 10 builds the merger; all that counts
# here is how many tokens it makes: one per 2 × 2 block of patches). The ids come from the checkpoint's config:

# %% [markdown] lang="zh"
# ## 8. 把图片放进文本
# 在提示词里，一张图由三种特殊 token 组成：先是 `<|vision_start|>`，然后每个合并后的 token 对应一个占位符
# `<|image_pad|>`，最后是 `<|vision_end|>`。聊天格式为一个图片内容只写一个占位符；`expand_image_tokens` 把它重复到图片
# 的 token 数。模型照常对 ids 做嵌入，再把占位符所在的行依次换成合并器的输出（合并器在第 10 节实现；这里只关心它产生多
# 少个 token：每 2 × 2 个 patch 一个）。这些 id 取自检查点的 config：

# %%
tok = load_tokenizer(args.checkpoint.folder)
START, END, PAD = vcfg.vision_start_token_id, vcfg.vision_end_token_id, vcfg.image_token_id
question = "Describe this picture in one sentence."
chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]
text = render(chat)
ids = expand_image_tokens(tok.encode(text), grid, PAD, m)
print(repr(text))
print(f"ids: {START} = {tok.decode([START])}, {PAD} = {tok.decode([PAD])}, {END} = {tok.decode([END])}")
first, last = ids.index(PAD), len(ids) - 1 - ids[::-1].index(PAD)
n_text, n_pads = len(tok.encode(text)), ids.count(PAD)
print(tr(f"{n_text} tokens with one pad -> {len(ids)} with {n_pads} pads "
         f"(tokens {first} … {last}), one per merged token of the {gh} × {gw} patch grid",
         f"{n_text} 个 token，其中一个占位符 -> 展开成 {len(ids)} 个，其中 {n_pads} 个占位符"
         f"（token {first} … {last}）：{gh} × {gw} 的 patch 网格合并后，每个 token 对应一个占位符"))

# %% [markdown]
# ## 9. Positions III: M-RoPE with three different rows
# Chapter 4 built M-RoPE and noted that for text its three position rows (t, h, w) are equal, so it is plain RoPE.
# An image is where they differ. Following transformers' `get_rope_index`: text tokens count on as usual, the same
# number on all three rows. The image's tokens all start from $p$, the position the next text token would have had;
# merged token $(i, j)$ of the image gets $(p, p + i, p + j)$ — the same time, its own row and column. The text after
# the image continues from the image's **largest position + 1**, $p + \max(g_h, g_w)/m$, not from its token count. So a
# 304-token image moves the positions on by only 19. The tokens generated after the prompt keep that offset
# (the cache stores it: `cache.delta`).
#
# **Try it first**: exercise 217 is the 3-D position ids (`python practice/judge.py start 217`, or the cell below);
# its named mistakes: the text after the image continuing from the token count instead of the largest position + 1,
# and h and w swapped.

# %% [markdown] lang="zh"
# ## 9. 位置之三：三行各不相同的 M-RoPE
# 第 4 章实现了 M-RoPE，并指出：对文本来说，三行位置 (t, h, w) 相同，它就是普通的 RoPE。到了图片，三行才各不相同。按照
# transformers 的 `get_rope_index`：文本 token 照常递增，三行取同一个数。图片的所有 token 都从 $p$ 开始，$p$ 是下一个
# 文本 token 本该得到的位置；图片中合并后的 token $(i, j)$ 得到 $(p, p + i, p + j)$——时间相同，行、列各自不同。图片之
# 后的文本从图片的**最大位置 + 1** 接着数，即 $p + \max(g_h, g_w)/m$，而不是按 token 数接着数。所以一张 304 个 token
# 的图，只让位置前进 19。提示词之后生成的 token 保持这个偏移（缓存里存着它：`cache.delta`）。
#
# **先自己试试**：练习 217 是三维位置 id（`python practice/judge.py start 217`，或下面的单元格）；它点名的典型错误：图
# 片之后的文本按 token 数接着数，而不是从最大位置 + 1 开始；把 h 和 w 弄反。

# %%
def position_ids(input_ids, image_grid_thw, mask, image_token_id):
    raise NotImplementedError  # your code: (B, T) ids -> (3, B, T) positions (t, h, w)


book.attempt(217, position_ids)

# %%
from qwen.mrope import position_ids  # noqa: E402  (the finished one, from here on)

pos = position_ids(torch.tensor([ids]), grid, None, PAD, m)[:, 0]  # (3, T)
p = int(pos[0, first])
at_first, at_last = tuple(pos[:, first].tolist()), tuple(pos[:, last].tolist())
print(tr(f"positions (t, h, w): the text before the image 0 … {first - 1} on all three rows; the image's first token "
         f"{at_first}, its last {at_last}",
         f"位置 (t, h, w)：图片之前的文本在三行上都是 0 … {first - 1}；图片的第一个 token 是 {at_first}，"
         f"最后一个是 {at_last}"))
end_at, top_pos, bh, bw = int(pos[0, last + 1]), int(pos.max()), gh // m, gw // m
print(tr(f"<|vision_end|> at token {last + 1} has position {end_at} = {p} + max({bh}, {bw}); "
         f"a plain count would give {last + 1}; the prompt's last position is {top_pos} for {len(ids)} tokens",
         f"<|vision_end|>（token {last + 1}）的位置是 {end_at} = {p} + max({bh}, {bw})；"
         f"若按 token 数往下数，会是 {last + 1}；提示词共 {len(ids)} 个 token，最大位置是 {top_pos}"))

# %%
book.show("ch10-mrope", ch10.mrope_rows, pos, (first, last))

# %%
book.listing("qwen/mrope.py", "expand_image_tokens", "position_ids", "rope_delta", "place_images")

# %% [markdown]
# The positions go into the interleaved M-RoPE of chapter 4 unchanged: frequency $j$ of the full-attention layers takes
# its angle from the axis `mrope_axes` assigns it (t, h or w, interleaved). For text the three rows are equal, so
# nothing changes; for an image token the h-frequencies turn with its row and the w-frequencies with its column:

# %% [markdown] lang="zh"
# 这些位置原样送进第 4 章的交错式 M-RoPE：全注意力层的第 $j$ 个频率，按 `mrope_axes` 分给它的轴（t、h 或 w，交错排列）
# 取角度。文本的三行相同，所以什么也不变；图片 token 的 h 频率随它所在的行旋转，w 频率随它所在的列旋转：

# %%
cfg = args.checkpoint.config
axes = "".join("thw"[a] for a in mrope_axes(int(cfg.head_dim * cfg.partial_rotary_factor) // 2, cfg.mrope_section))
rope = RotaryEmbedding(cfg)
cos3, _ = rope(pos[:, None], torch.float32)  # (1, T, R): the three rows
cos1, _ = rope(pos[:1], torch.float32)  # the time row alone, as if it were text
same = (cos3[0] == cos1[0]).all(-1)  # (T,)
real_text = real_config()
real_freqs, n_same = int(real_text.head_dim * real_text.partial_rotary_factor) // 2, int(same.sum())
print(tr(f"mrope_section {cfg.mrope_section}: axis per frequency {axes} (real Qwen3.5-0.8B: "
         f"{real_text.mrope_section}, {real_freqs} frequencies)",
         f"mrope_section {cfg.mrope_section}：每个频率所属的轴 {axes}（真实 Qwen3.5-0.8B："
         f"{real_text.mrope_section}，共 {real_freqs} 个频率）"))
print(tr(f"tokens whose angles equal plain RoPE at their t position: {n_same} of {len(ids)}; the "
         f"{len(ids) - n_same} others are the image's tokens but its first, whose row and column offsets are 0",
         f"角度与按 t 位置算的普通 RoPE 相同的 token：{len(ids)} 个中有 {n_same} 个；其余 "
         f"{len(ids) - n_same} 个都是图片 token（图片的第一个 token 除外，它的行、列偏移都是 0）"))

# %% [markdown]
# ## 10. The merger: 2 × 2 patches → one token of the text width
# After the last block, the merger LayerNorms every patch (C), puts the 4 patches of each 2 × 2 block side by side (4C:
# rows $4k, \dots, 4k + 3$ of the patch order), and maps them through Linear(4C, 4C), the exact GELU, Linear(4C, d) to
# the text model's width $d$.
#
# **Try it first**: exercise 218 is the merger (`python practice/judge.py start 218`, or the cell below); its named
# mistakes: merging the wrong neighbours (4 patches of reading order, which are not a 2 × 2 block), and the norm
# after the merge instead of on each patch before it.

# %% [markdown] lang="zh"
# ## 10. 合并器：2 × 2 个 patch → 一个文本宽度的 token
# 最后一个视觉块之后，合并器先对每个 patch 做 LayerNorm（C 维），再把每组 2 × 2 共 4 个 patch 并排拼起来（4C：即 patch
# 顺序中的第 $4k, \dots, 4k + 3$ 行），然后依次经过 Linear(4C, 4C)、精确的 GELU、Linear(4C, d)，映射到文本模型的宽度
# $d$。
#
# **先自己试试**：练习 218 就是合并器（`python practice/judge.py start 218`，或下面的单元格）；它点名的典型错误：合并
# 了错误的邻居（按阅读顺序取的 4 个 patch 并不构成一组 2 × 2），以及把归一化放到合并之后，而不是在合并前对每个 patch
# 做。

# %%
def patch_merger(x, image_grid_thw, weights):
    raise NotImplementedError  # your code: (N, C) patches in the merge order -> (N/4, d) tokens


book.attempt(218, patch_merger)

# %% [markdown]
# The worked solution: the whole tower step by step, with its shapes, and the merger by hand at the end, against one
# call of the finished tower:

# %% [markdown] lang="zh"
# 参考解答：一步步走完整个视觉塔，列出每一步的形状，最后手算合并器，再和完成的视觉塔调用一次的结果对比：

# %%
xs = tower.patch_embed(pixel_values.to(dev, tower.pos_embed.weight.dtype))  # (N, C)
print(tr(f"pixel_values {tuple(pixel_values.shape)} -> patch embedding {tuple(xs.shape)}",
         f"pixel_values {tuple(pixel_values.shape)} -> patch 嵌入 {tuple(xs.shape)}"))
xs = xs + tower.positions(gh, gw).to(xs.dtype)  # + the resampled position grid
rot_cos, rot_sin = tower.rotary(gh, gw, xs.device)  # (N, Dh) each, fp32: q and k are turned in fp32
for block in tower.blocks:
    xs = block(xs, rot_cos, rot_sin, [gh * gw])  # (N, C); [gh · gw]: one image, attending to itself
print(tr(f"after {len(tower.blocks)} blocks {tuple(xs.shape)}",
         f"经过 {len(tower.blocks)} 个视觉块：{tuple(xs.shape)}"))
joined = tower.merger.norm(xs).reshape(-1, m * m * C)  # (N/4, 4C)
print(tr(f"merger: LayerNorm, then {m * m} rows side by side {tuple(joined.shape)}",
         f"合并器：先做 LayerNorm，再把 {m * m} 行并排拼起来：{tuple(joined.shape)}"))
merged = tower.merger.linear_fc2(F.gelu(tower.merger.linear_fc1(joined)))  # (N/4, d)
image_tokens = tower(pixel_values.to(dev), grid)
off = float((merged - image_tokens).abs().max())
print(tr(f"-> Linear, GELU, Linear {tuple(merged.shape)}: {merged.shape[0]} tokens of width d = {merged.shape[1]}; "
         f"max |by hand − tower| = {off:.1e}",
         f"-> Linear、GELU、Linear {tuple(merged.shape)}：{merged.shape[0]} 个宽度 d = {merged.shape[1]} 的 token；"
         f"max |手算 − 视觉塔| = {off:.1e}"))
real_h, real_w = smart_resize(photo.height, photo.width, published)  # the photo under the real 0.8B's settings
real_n, real_m2 = (real_h // real.patch_size) * (real_w // real.patch_size), real.spatial_merge_size ** 2
real_tokens, real_joined = real_n // real_m2, real_m2 * real.hidden_size
print(tr(f"real Qwen3.5-0.8B: ({real_n}, {real_width}) -> ({real_n}, {real.hidden_size}) through {real.depth} blocks "
         f"-> ({real_tokens}, {real_joined}) -> ({real_tokens}, {real.out_hidden_size})",
         f"真实 Qwen3.5-0.8B：({real_n}, {real_width}) -> ({real_n}, {real.hidden_size})，经过 {real.depth} 个视觉块 "
         f"-> ({real_tokens}, {real_joined}) -> ({real_tokens}, {real.out_hidden_size})"))

# %% [markdown]
# ### The finished tower: `qwen/vision.py`

# %% [markdown] lang="zh"
# ### 完成的视觉塔：`qwen/vision.py`

# %%
book.listing("qwen/vision.py", "PatchProjection", "VisionAttention", "VisionBlock", "PatchMerger", "VisionTower")

# %% [markdown]
# - **`PatchProjection`** keeps the stored Conv3d kernel and multiplies by it flattened (section 4).
# - **`VisionAttention`** splits `qkv` into q, k, v of `heads` heads, turns q and k by the 2-D angles (in fp32), and
#   runs the softmax over each image's patches alone: the `lengths` list cuts the sequence per image (per frame, for
#   a video). Each image's q, k and v go to `scaled_dot_product_attention` as 4-D (1, heads, n, Dh) tensors, and
#   that matters: torch's fused kernels (flash attention on the CPU; flash or memory-efficient attention on CUDA) walk
#   the keys in blocks and never store the $n \times n$ scores, but they take only 4-D inputs. Given 3-D (heads, n, Dh),
#   torch falls back to its plain kernel, which stores them: a $4096^2$ image has 65,536 patches, and its scores
#   would take $65{,}536^2 \times 4$ bytes = 16 GiB per head in fp32.
# - **`VisionTower.forward`** embeds, adds the resampled positions, runs the blocks, merges. Its output is every
#   image's tokens one after another: $(\sum N / 4, d)$.
#
# Unlike Qwen3-VL, Qwen3.5 has no "deepstack": only the last block's output goes to the text model (the real configs
# list `deepstack_visual_indexes: []`).

# %% [markdown] lang="zh"
# - **`PatchProjection`** 保留存储的 Conv3d 卷积核，计算时乘以它展平后的矩阵（第 4 节）。
# - **`VisionAttention`** 把 `qkv` 拆成 `heads` 个头的 q、k、v，用二维角度旋转 q 和 k（在 fp32 下），softmax 只在每张
#   图自己的 patch 之间做：`lengths` 列表按图（视频则按帧）切分序列。每张图的 q、k、v 以 4 维张量 (1, heads, n, Dh) 传
#   给 `scaled_dot_product_attention`，这一点很关键：torch 的融合 kernel（CPU 上是 flash attention；CUDA 上是 flash 或
#   memory-efficient attention）把键分段遍历，从不存下 $n \times n$ 的分数矩阵，但它们只接受 4 维输入。传入 3 维的
#   (heads, n, Dh) 时，torch 会退回普通 kernel，而普通 kernel 要把分数存下来：一张 $4096^2$ 的图有 65,536 个 patch，它
#   的分数在 fp32 下每个头要占 $65{,}536^2 \times 4$ 字节 = 16 GiB。
# - **`VisionTower.forward`** 依次做嵌入、加上重新采样的位置、跑完所有视觉块、合并。输出是各张图的 token 依次排在一起
#   ：$(\sum N / 4, d)$。
#
# 与 Qwen3-VL 不同，Qwen3.5 没有“deepstack”：只有最后一个视觉块的输出送进文本模型（真实 config 里写的是
# `deepstack_visual_indexes: []`）。

# %% [markdown]
# ## 11. The token bill
# An image costs one token per 32 × 32 pixels after the resize: $(h/32) \cdot (w/32)$ tokens. The budget fixes the
# range; with Qwen3.5's published settings, 65,536 pixels ($256^2$) is at least 64 tokens, 16,777,216 ($4096^2$) at most
# 16,384.
# A 12-megapixel phone photo (4032 × 3024) costs 11,844; the context of the 0.8B is 262,144 tokens.

# %% [markdown] lang="zh"
# ## 11. 一张图的 token 开销
# 图片缩放之后，每 32 × 32 像素占一个 token：共 $(h/32) \cdot (w/32)$ 个 token。预算决定了范围：按 Qwen3.5 公布的设置
# ，65,536 像素（$256^2$）至少 64 个 token，16,777,216 像素（$4096^2$）至多 16,384 个。一张 1200 万像素的手机照片
# （4032 × 3024）要占 11,844 个；而 0.8B 的上下文是 262,144 个 token。

# %%
sizes = [(100, 80), (224, 224), (photo.width, photo.height), (640, 480), (1280, 720), (1920, 1080), (4032, 3024),
         (8000, 6000)]
headers = (tr("image", "原图"), tr("resized", "缩放后"), tr("patches", "patch 数"), tr("tokens", "token 数"))
wide = max(7, columns(headers[3]))  # the tokens column: as wide as its header, in terminal columns
# a size column is 13 wide ("1920 × 1080  "), its header set over the "×"; the counts' headers end with the numbers
print("  ".join([ljust(rjust(headers[0], 11), 13), ljust(rjust(headers[1], 11), 13),
                 rjust(headers[2], 9), rjust(headers[3], wide)]))
for width, height, rw, rh, patches, tokens in ch10.token_bill(sizes, s):
    print(f"{width:>5} × {height:<5}  {rw:>5} × {rh:<5}  {patches:9,}  {tokens:{wide},}")

# %%
book.show("ch10-bill", ch10.token_bill_figure, s, sizes)

# %% [markdown]
# ## 12. The decoder reads the picture
# Now the whole model: the text model of chapter 8 is loaded, handed the tower already read, and called with the
# prompt's ids, `pixel_values` and `image_grid_thw`, as transformers' `Qwen3_5ForConditionalGeneration` takes them
# (which also wants `mm_token_type_ids`, 1 at the pads, to find the image tokens for its positions).
# After the prefill the cache holds the image like any other tokens, and generation goes on from it as in
# chapter 9 (`generate(model, ids, n, images=(pixel_values, image_grid_thw))` does both in one call).

# %% [markdown] lang="zh"
# ## 12. 解码器读图
# 现在轮到整个模型：加载第 8 章的文本模型，把已经读好的视觉塔交给它，再用提示词的 ids、`pixel_values` 和
# `image_grid_thw` 调用它，参数与 transformers 的 `Qwen3_5ForConditionalGeneration` 相同（后者还要
# `mm_token_type_ids`：占位符处为 1，用来找出图片 token，计算它们的位置）。预填充之后，缓存像保存其他 token 一样保存着
# 这张图，之后的生成和第 9 章一样从这里接着进行（`generate(model, ids, n, images=(pixel_values, image_grid_thw))` 一次
# 调用就把两件事都做了）。

# %%
model = load_model(args.checkpoint, dtype=dtype, device=dev)
model.visual = tower  # attached in the open: a model without a tower refuses pixel_values, it reads no file
stop = args.checkpoint.stop
cache = model.new_cache()
logits = model(torch.tensor([ids], device=dev), cache=cache, pixel_values=pixel_values, image_grid_thw=grid,
               last_only=True)  # the prefill: the tower runs inside, once
top = logits[0, -1].float().softmax(-1).topk(5)
likely = tr(", ", "、").join(tr(f"{tok.decode([i])!r} {pr:.1%}", f"{pr:.1%} {tok.decode([i])!r}")
                             for pr, i in zip(top.values.tolist(), top.indices.tolist()))
print(tr(f"next token after the image and {question!r}{NOISE}: {likely}",
         f"图片和 {question!r} 之后的下一个 token{NOISE}：{likely}"))
delta = int(cache.delta[0, 0])  # the prompt's largest position + 1 − its token count
print(tr(f"the cache holds {cache.length} tokens; the next one's position is {cache.length} + cache.delta "
         f"({delta}) = {cache.length + delta}, one more than the prompt's largest",
         f"缓存里有 {cache.length} 个 token；下一个 token 的位置是 {cache.length} + cache.delta"
         f"（{delta}）= {cache.length + delta}，比提示词里最大的位置多一"))
first_token = int(top.indices[0])  # greedy: the most likely one
n = 8 if SYNTHETIC else 60
reply = [first_token] + ([] if first_token in stop else list(generate(model, [first_token], n - 1, stop=stop,
                                                                      cache=cache)))
said = tok.decode(reply)
print(tr(f"greedy reply{NOISE}: {said!r}", f"贪心生成的回复{NOISE}：{said!r}"))

# %% [markdown]
# With the synthetic checkpoint these tokens are noise: the weights are random. With a real checkpoint
# (`--model Qwen/Qwen3.5-0.8B`, or any Qwen3.5 folder with a vision tower) the same lines print a caption of the
# photo.
#
# ## Try this
#
# - Give the photo a smaller budget:
#   `preprocess(photo, settings=ImageSettings(min_pixels=32 * 32, max_pixels=256 * 256))` and count the tokens; then
#   put the new `pixel_values` through `tower` and the model (remember to expand the pads again).
# - Cut the photo in two with `photo.crop(...)` and put both halves in one prompt (two image parts in `chat`): print
#   `position_ids` and find where the second image starts.
# - Replace `s.image_std` by (1, 1, 1) in section 3's normalisation and compare the range of the values: why must
#   the mean and std be the checkpoint's own?
#
# ## Show the proof
# transformers on the same checkpoint: its image processor for Qwen3.5 on the photo, `Qwen3_5VisionModel` with the
# same weights on the same `pixel_values`, and `get_rope_index` on the same ids. transformers has two image
# processors for Qwen3.5 and picks the torchvision one, `Qwen2VLImageProcessor`, whenever torchvision is installed
# (the published `preprocessor_config.json` names it, as `Qwen2VLImageProcessorFast`); without torchvision it falls
# back to the PIL one, `Qwen2VLImageProcessorPil`, which is the one compared here: PyPI's torchvision does not work
# beside the CPU build of torch the tests run on. Both have the resize rule of section 2 and the patch order of
# section 3. The
# preprocessing and the positions are integer bookkeeping and float32 operations in the same order: exactly equal.
# The tower in fp32 differs by the order of the sums (a Conv3d against a matrix product, different attention
# kernels), a few millionths of the output's scale.

# %% [markdown] lang="zh"
# 用合成检查点时，这些 token 是噪声：权重是随机的。换成真实检查点（`--model Qwen/Qwen3.5-0.8B`，或任何带视觉塔的
# Qwen3.5 文件夹），同样几行会打印出对这张照片的一句描述。
#
# ## 动手试试
#
# - 给照片一个更小的预算：`preprocess(photo, settings=ImageSettings(min_pixels=32 * 32, max_pixels=256 * 256))`，数一
#   数 token；再把新的 `pixel_values` 送进 `tower` 和模型（记得重新展开占位符）。
# - 用 `photo.crop(...)` 把照片切成两半，把两半放进同一个提示词（`chat` 里放两个图片内容）：打印 `position_ids`，找出
#   第二张图从哪里开始。
# - 在第 3 节的归一化里把 `s.image_std` 换成 (1, 1, 1)，比较数值的范围：为什么均值和标准差必须用检查点自己的？
#
# ## 对照验证
# 在同一个检查点上与 transformers 对照：用它为 Qwen3.5 提供的图像处理器处理这张照片，用 `Qwen3_5VisionModel` 在同样的
# 权重上处理同样的 `pixel_values`，用 `get_rope_index` 处理同样的 ids。transformers 为 Qwen3.5 准备了两个图像处理器：
# 只要装了 torchvision，就选基于 torchvision 的 `Qwen2VLImageProcessor`（公布的 `preprocessor_config.json` 用
# `Qwen2VLImageProcessorFast` 这个名字指定它）；没有 torchvision 时，退回基于 PIL 的 `Qwen2VLImageProcessorPil`。这里
# 对照的是后者，因为 PyPI 上的 torchvision 无法和测试所用的 CPU 版 torch 一起工作。两者都用第 2 节的缩放规则和第 3 节
# 的 patch 顺序。预处理和位置只涉及整数运算和顺序相同的 float32 运算：结果逐位一致。fp32 下的视觉塔因求和顺序不同
# （Conv3d 对矩阵乘法，注意力 kernel 也不同）而略有差异，约为输出量级的百万分之几。

# %%
def compare(transformers, path, tower, image, pixel_values, grid, ids, pos):
    from transformers import AutoConfig, Qwen2VLImageProcessorPil  # the PIL class: torchvision is not needed
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Model, Qwen3_5VisionModel

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    config = AutoConfig.from_pretrained(path)
    if (Path(path) / "preprocessor_config.json").is_file():
        processor = Qwen2VLImageProcessorPil.from_pretrained(path)
    else:  # Qwen3.5's published budget, mean and std; the tower's sizes as transformers reads its vision config
        v = config.vision_config
        processor = Qwen2VLImageProcessorPil(size={"shortest_edge": 256 ** 2, "longest_edge": 4096 ** 2},
                                             patch_size=v.patch_size, temporal_patch_size=v.temporal_patch_size,
                                             merge_size=v.spatial_merge_size, image_mean=[0.5] * 3, image_std=[0.5] * 3)
        print(tr("(no preprocessor_config.json: the image processor is given Qwen3.5's published values and the "
                 "vision config's patch, merge and frames)",
                 "（没有 preprocessor_config.json：图像处理器用 Qwen3.5 公布的值，patch 大小、合并尺寸和帧数取自"
                 "视觉配置）"))
    ref = processor(images=[image], return_tensors="pt")
    same_values, same_grid = torch.equal(ref["pixel_values"], pixel_values), torch.equal(ref["image_grid_thw"], grid)
    print(tr(f"image processor (Qwen2VLImageProcessorPil): pixel_values equal {same_values}, "
             f"image_grid_thw equal {same_grid}",
             f"图像处理器（Qwen2VLImageProcessorPil）：pixel_values 逐位一致：{yes_no(same_values)}；"
             f"image_grid_thw 一致：{yes_no(same_grid)}"))
    theirs = Qwen3_5VisionModel(config.vision_config).eval()
    theirs.load_state_dict({k: v.float().cpu() for k, v in tower.state_dict().items()})
    ours = load_vision(path, dtype=torch.float32)
    want = theirs(pixel_values, grid_thw=grid).pooler_output
    book.oracle.difference(tr("vision tower, fp32", "视觉塔，fp32"), ours(pixel_values, grid), want)
    out_scale = float(want.abs().max())
    print(tr(f"(the output's scale: {out_scale:.2f})", f"（输出的量级：{out_scale:.2f}）"))
    with torch.device("meta"):
        text = Qwen3_5Model(config)  # for its get_rope_index: no weights are needed
    ids = torch.tensor([ids])
    rope, _ = text.get_rope_index(ids, mm_token_type_ids=(ids == config.image_token_id).int(), image_grid_thw=grid)
    same_pos = torch.equal(rope[:, 0], pos)
    print(tr(f"3-D positions equal get_rope_index: {same_pos}",
             f"3D 位置与 get_rope_index 一致：{yes_no(same_pos)}"))


book.proof(compare, args.checkpoint.folder, tower, photo, pixel_values, grid, ids, pos)

# %% [markdown]
# ## Summary
#
# - **Preprocessing**: resize so both sides are multiples of 32 (round half to even), shrink or enlarge into the
#   pixel budget ($256^2$ to $4096^2$); scale to $[0, 1]$, normalise with the checkpoint's mean and std; repeat a still
#   image to 2 frames; cut 16 × 16 patches listed 2 × 2 block by block → `pixel_values` (N, 1536), `image_grid_thw`.
# - **The tower**: a patch embedding that is a matrix product; a learned 48 × 48 position grid resampled bilinearly to
#   the image's grid; `depth` ViT blocks with a 2-D rotary embedding, attention within each image only; a merger that
#   norms each patch and maps each 2 × 2 block (4C) to one token of the text width $d$.
# - **In the prompt**: `<|vision_start|>`, one `<|image_pad|>` per merged token, `<|vision_end|>`; the pads'
#   embeddings are replaced by the merged tokens. M-RoPE gets three different rows on the image:
#   $(p, p + \mathrm{row}, p + \mathrm{column})$; the text after it continues from the largest position + 1.
# - **The bill**: one token per 32 × 32 pixels, 64 to 16,384 tokens per image.
#
# ### Shapes
#
# | step | shape | the photo, real Qwen3.5-0.8B |
# |---|---|---|
# | resized image | (3, h, w) | (3, 608, 512) |
# | `pixel_values` | $(N, 3 \cdot T_p \cdot P^2)$, $N = (h/P)(w/P)$ | (1216, 1536) |
# | `image_grid_thw` | (images, 3): $(1, h/P, w/P)$ | [[1, 38, 32]] |
# | patch embedding + positions | (N, C) | (1216, 768) |
# | after the blocks | (N, C) | (1216, 768) |
# | merger input | $(N/m^2, m^2 \cdot C)$ | (304, 3072) |
# | image tokens | $(N/m^2, d)$ | (304, 1024) |
# | positions of the prompt | (3, B, T) | (3, 1, T) |
#
# The vision notation, the real 0.8B's values beside this checkpoint's:

# %% [markdown] lang="zh"
# ## 小结
#
# - **预处理**：缩放到两条边都是 32 的倍数（恰好一半时取偶数），再缩小或放大到像素预算之内（$256^2$ 到 $4096^2$）；数
#   值缩放到 $[0, 1]$，用检查点的均值和标准差归一化；静态图复制成 2 帧；切成 16 × 16 的 patch，按 2 × 2 一组逐组排列 →
#   `pixel_values` (N, 1536)、`image_grid_thw`。
# - **视觉塔**：patch 嵌入就是一次矩阵乘法；学到的 48 × 48 位置网格用双线性插值重新采样到图片的网格；`depth` 个带二维
#   旋转位置编码的 ViT 块，注意力只在每张图之内；合并器对每个 patch 做归一化，再把每组 2 × 2（4C）映射成一个文本宽度
#   $d$ 的 token。
# - **在提示词里**：`<|vision_start|>`，每个合并后的 token 一个 `<|image_pad|>`，然后是 `<|vision_end|>`；占位符的嵌入
#   换成合并后的 token。M-RoPE 在图片上给出三行不同的位置：$(p, p + \mathrm{row}, p + \mathrm{column})$；图片之后的文
#   本从最大位置 + 1 接着数。
# - **token 开销**：每 32 × 32 像素一个 token，每张图 64 到 16,384 个 token。
#
# ### 形状
#
# | 步骤 | 形状 | 这张照片，真实 Qwen3.5-0.8B |
# |---|---|---|
# | 缩放后的图 | (3, h, w) | (3, 608, 512) |
# | `pixel_values` | $(N, 3 \cdot T_p \cdot P^2)$，$N = (h/P)(w/P)$ | (1216, 1536) |
# | `image_grid_thw` | (图片数, 3)：$(1, h/P, w/P)$ | [[1, 38, 32]] |
# | patch 嵌入 + 位置 | (N, C) | (1216, 768) |
# | 经过所有视觉块之后 | (N, C) | (1216, 768) |
# | 合并器的输入 | $(N/m^2, m^2 \cdot C)$ | (304, 3072) |
# | 图片 token | $(N/m^2, d)$ | (304, 1024) |
# | 提示词的位置 | (3, B, T) | (3, 1, T) |
#
# 视觉部分的符号表，真实 0.8B 的值与本检查点的值并列：

# %%
ch10.vision_notation(vcfg, tr("synthetic checkpoint", "合成检查点") if SYNTHETIC else tr("this checkpoint", "本检查点"))

# %% [markdown]
# ### Exercises
# 216 · Patchify: an image as rows of patches (reading order instead of 2 × 2 blocks, channels last, the temporal
# repeat missing); 217 · the 3-D M-RoPE positions of text and images (text after the image counted from the token
# count, h and w swapped); 218 · the patch merger: 2 × 2 patches, one text token (the wrong neighbours merged, the
# norm after the merge). `python practice/judge.py start 216` (217, 218), or their cells in sections 3, 9 and 10.

# %% [markdown] lang="zh"
# ### 练习
# 216 · 切 patch：把图像排成一行行的 patch（典型错误：按阅读顺序而不是按 2 × 2 一组排列、通道放在最后、漏掉时间上的重
# 复）；217 · 文本与图像的三维 M-RoPE 位置（图片之后的文本按 token 数接着数、h 和 w 弄反）；218 · patch 合并器：2 × 2
# 个 patch 变成一个文本 token（合并了错误的邻居、归一化放在合并之后）。运行
# `python practice/judge.py start 216`（217、218），或者用第 3、9、10 节里各自的单元格。

# %%
book.attempt(216)
book.attempt(217)
book.attempt(218)

# %% [markdown]
# ## How to explain it
#
# 1. **An image as tokens.** A ViT cuts the picture into 16 × 16 patches and treats each as a token; Qwen3.5's tower
#    then merges 2 × 2 neighbours, so the text model sees one token per 32 × 32 pixels, already of its own width.
#    To the decoder an image is a run of embeddings that did not come from the embedding table.
# 2. **Any size.** The resize keeps the aspect ratio and rounds to multiples of 32 inside a pixel budget; the learned
#    position grid is resampled to whatever patch grid results; the rotary embedding needs no table at all. So one
#    tower reads a thumbnail and a poster, at a cost proportional to their pixels.
# 3. **Where is it?** Inside the tower, position is 2-D twice over: the resampled grid and the row/column rotary
#    angles. In the prompt, M-RoPE gives image tokens a (time, row, column) triple, and the text after the image
#    continues from the largest of them, so an image moves text positions by its side, not by its area.
# 4. **Why merge 2 × 2.** Attention inside the tower costs $N^2$ in the patches; merging divides the tokens the decoder
#    must read (and cache) by 4, at the price of a wider merger input (4C).

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **图片怎么变成 token。** ViT 把图切成 16 × 16 的 patch，每个 patch 当作一个 token；Qwen3.5 的视觉塔再把 2 × 2 个
#    相邻 patch 合并，所以文本模型看到的是每 32 × 32 像素一个 token，宽度也已经和它自己的一样。对解码器来说，一张图就
#    是一串嵌入，只不过不是从嵌入表里查出来的。
# 2. **任意尺寸。** 缩放保持宽高比，在像素预算之内取整到 32 的倍数；学到的位置网格重新采样到缩放后得到的任意 patch 网
#    格；旋转位置编码根本不需要表。所以同一个视觉塔既能读缩略图，也能读海报，代价与像素数成正比。
# 3. **位置怎么表示。** 在视觉塔内部，位置有两套二维信息：重新采样的网格，以及按行、列旋转的角度。在提示词里，M-RoPE
#    给图片 token 一个（时间，行，列）三元组，图片之后的文本从其中的最大值接着数，所以一张图让文本位置前进的是它的边长
#    ，而不是面积。
# 4. **为什么合并 2 × 2。** 视觉塔内部的注意力代价是 patch 数的平方 $N^2$；合并后，解码器要读（和缓存）的 token 数除以
#    4，代价是合并器的输入变宽（4C）。
