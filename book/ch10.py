"""Chapter 10's figures and tables: the patch grid on the photo and which 2 × 2 patches merge into which token, the
learned position grid resampled to the image, the three rows of M-RoPE positions of a text + image + text prompt,
and the token bill of an image (how many tokens each size costs inside the pixel budget); the real Qwen3.5-0.8B's
vision config, printed beside the checkpoint's.

The patch grid, the positions and the token bill follow from the preprocessor settings and the config alone. The
position grid figure shows a real checkpoint's learned table; the synthetic checkpoint's is random noise, so for it
the chapter passes a smooth stand-in (smooth_standin), and the figure's titles say so. The real 0.8B's vision config
lives in qwen/sizes.py (REAL_VISION_CONFIG, from public copies of the published config.json). Each figure function
returns a matplotlib Figure.
"""
import math
from pathlib import Path

import torch

from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.config import VisionConfig
from qwen.hub import ModelNotFound
from qwen.image import smart_resize
from qwen.lang import columns, language, ljust, rjust, tr
from qwen.sizes import (
    REAL_VISION_CONFIG as REAL_VISION,  # config.json's vision_config, as public copies of the published file give it
    numel,
    vision_shapes,
)
from qwen.weights import Weights


def real_vision():
    """The real 0.8B's vision config (qwen/sizes.py's REAL_VISION_CONFIG) as the VisionConfig the tower takes; the
    placeholder token ids, which it leaves out, are VisionConfig's defaults."""
    return VisionConfig(**REAL_VISION)


def missing_tower(checkpoint: Checkpoint | str | Path) -> str | None:
    """Why `checkpoint` (opened, qwen/checkpoint.py, or its folder) has no vision tower, or None when it has one
    (the safetensors headers are read; no tensor). A download of the text files alone lacks the tower's files: the
    reason then says how to fetch them (qwen/hub.py)."""
    checkpoint = open_checkpoint(checkpoint)
    if checkpoint.vision is None:
        return tr(f"{checkpoint.folder} has no vision tower (no vision_config in config.json)",
                  f"{checkpoint.folder} 没有视觉塔（config.json 里没有 vision_config）")
    try:
        files = Weights(checkpoint, "vision").where
    except (ValueError, ModelNotFound) as e:
        return str(e)
    return None if files else tr(f"{checkpoint.folder} has no model.visual.* tensors",
                                 f"{checkpoint.folder} 里没有 model.visual.* 张量")


def tower_parameters(c):
    """Parameters of the tower a VisionConfig describes: its tensors' shapes (qwen/sizes.py) multiplied out."""
    return sum(numel(shape) for shape in vision_shapes(c).values())


def symbols():
    """letter, meaning (in the language the course speaks), how it follows from the vision config"""
    return (
        ("P", tr("pixels per patch side", "patch 每边的像素数"), lambda c: c.patch_size),
        ("Tp", tr("frames per patch (a still image is repeated)", "每个 patch 的帧数（静态图直接重复）"),
         lambda c: c.temporal_patch_size),
        ("m", tr("patches per merged token, per side (m × m)", "一个合并 token 每边的 patch 数（m × m）"),
         lambda c: c.spatial_merge_size),
        ("3·Tp·P²", tr("numbers in one patch: a row of pixel_values", "一个 patch 里的数值个数：pixel_values 的一行"),
         lambda c: c.in_channels * c.temporal_patch_size * c.patch_size ** 2),
        ("C", tr("width of the tower", "视觉塔的宽度"), lambda c: c.hidden_size),
        ("depth", tr("vision blocks", "视觉块数"), lambda c: c.depth),
        ("heads", tr("attention heads of a block", "每个视觉块的注意力头数"), lambda c: c.num_heads),
        ("Dh", tr("size of one head, C / heads", "一个头的维数：C 除以头数"), lambda c: c.hidden_size // c.num_heads),
        ("Iv", tr("width inside a block's MLP", "视觉块内 MLP 的宽度"), lambda c: c.intermediate_size),
        ("side", tr("the learned position grid is side × side", "学到的位置网格每边的格数"),
         lambda c: math.isqrt(c.num_position_embeddings)),
        ("d", tr("text width: what the merger outputs", "文本宽度：合并器输出的宽度"), lambda c: c.out_hidden_size),
        ("params", tr("parameters of the tower", "视觉塔的参数量"), tower_parameters),
    )


def named(symbol):
    """A symbol as the notation table shows it: a name spelled as a word (depth, heads) is set in backticks in the
    Chinese table, as the Chinese prose sets it, so that it reads as a name, not as English left in a Chinese line."""
    return f"`{symbol}`" if language() == "zh" and symbol.isalpha() and symbol.islower() and len(symbol) > 1 else symbol


def vision_notation(cfg, label):
    """Print the vision notation with the real 0.8B's values and those of `cfg` (this checkpoint's VisionConfig,
    under `label`); returns the text."""
    real = real_vision()
    rows = [("", tr("meaning", "含义"), tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B"), label)]
    rows += [(named(name), meaning, f"{value(real):,}", f"{value(cfg):,}") for name, meaning, value in symbols()]
    widths = [max(columns(r[i]) for r in rows) for i in range(4)]
    text = "\n".join("  ".join(rjust(cell, w) if i >= 2 else ljust(cell, w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip() for row in rows)
    print(text)
    return text


def merge_row(r, c, gw, m=2):
    """The row of pixel_values that holds patch (r, c) of a grid gw patches wide: block by block (row-major over
    the blocks), and inside a block row-major, so block k is rows m²k … m²k + m² − 1."""
    block = (r // m) * (gw // m) + c // m
    return block * m * m + (r % m) * m + c % m


def token_bill(sizes, settings):
    """For each (width, height) of an original image: (width, height, resized width, resized height, patches,
    tokens), with the resized size from qwen.image.smart_resize under `settings` (nearest multiples of P · m, then
    the pixel budget), patches = (resized height / P) · (resized width / P), tokens = patches / m²."""
    rows = []
    for width, height in sizes:
        h, w = smart_resize(height, width, settings)
        patches = (h // settings.patch_size) * (w // settings.patch_size)
        rows.append((width, height, w, h, patches, patches // settings.merge_size ** 2))
    return rows


def patch_grid(pixels, patch_size=16, merge_size=2, zoom=(3, 4)):
    """Left: the resized photo (h, w, 3) uint8 with its patch grid (thin lines) and the merge blocks (thick), the
    first row of merged tokens numbered. Right: its top-left `zoom` = (rows, cols) blocks, each patch labelled with
    its row in pixel_values, each block with its token number: the patches of one token are consecutive rows."""
    import matplotlib.pyplot as plt

    h, w = pixels.shape[:2]
    P, m = patch_size, merge_size
    gh, gw = h // P, w // P
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(14, 7.2), layout="constrained",
                                   gridspec_kw=dict(width_ratios=[w / h, zoom[1] / zoom[0]]))
    ax0.imshow(pixels)
    for x in range(0, w + 1, P):  # patch edges thin, merge-block edges thick
        ax0.axvline(x - 0.5, color="white", lw=1.5 if x % (P * m) == 0 else 0.3, alpha=1 if x % (P * m) == 0 else 0.6)
    for y in range(0, h + 1, P):
        ax0.axhline(y - 0.5, color="white", lw=1.5 if y % (P * m) == 0 else 0.3, alpha=1 if y % (P * m) == 0 else 0.6)
    for j in range(gw // m):  # the first row of tokens: 0, 1, … from the left
        ax0.text(P * m * (j + 0.5), P * m * 0.5, str(j), ha="center", va="center", fontsize=6, color="yellow",
                 weight="bold")
    ax0.text(P * m * 0.5, P * m * 1.5, str(gw // m), ha="center", va="center", fontsize=6, color="yellow",
             weight="bold")  # and the first token of the second row, to show where the count goes next
    ax0.add_patch(plt.Rectangle((-0.5, -0.5), zoom[1] * P * m, zoom[0] * P * m, fill=False, edgecolor="red", lw=2.5,
                                zorder=3))
    n, tokens = gh * gw, gh * gw // m ** 2
    ax0.set(title=tr(f"{w} × {h} pixels: {gh} × {gw} = {n:,} patches of {P} × {P}\nmerged {m} × {m} (thick lines) "
                     f"into {tokens:,} tokens, numbered from the top left",
                     f"{w} × {h} 像素：{gh} × {gw} = {n:,} 个 {P} × {P} 的 patch\n按 {m} × {m} 合并（粗线）"
                     f"成 {tokens:,} 个 token，从左上角开始编号"), xticks=[], yticks=[])
    zh, zw = zoom[0] * m * P, zoom[1] * m * P
    ax1.imshow(pixels[:zh, :zw], alpha=0.45)
    for r in range(zoom[0] * m):
        for c in range(zoom[1] * m):
            ax1.text(P * (c + 0.5), P * (r + 0.5), str(merge_row(r, c, gw, m)), ha="center", va="center", fontsize=9)
    for bi in range(zoom[0]):
        for bj in range(zoom[1]):
            ax1.add_patch(plt.Rectangle((P * m * bj - 0.5, P * m * bi - 0.5), P * m, P * m, fill=False, lw=2,
                                        edgecolor=plt.cm.tab10((bi * zoom[1] + bj) % 10)))
            ax1.text(P * m * bj + 1, P * m * bi + 1, f"token {bi * (gw // m) + bj}", ha="left", va="top",
                     fontsize=8, weight="bold")
    for x in range(0, zw + 1, P):
        ax1.axvline(x - 0.5, color="gray", lw=0.4)
    for y in range(0, zh + 1, P):
        ax1.axhline(y - 0.5, color="gray", lw=0.4)
    ax1.set(title=tr(f"the red corner: each patch's row in pixel_values ({n:,}, 3·2·{P}·{P})\nthe {m * m} patches "
                     f"of a token are consecutive rows",
                     f"红框里的一角：每个 patch 在 pixel_values ({n:,}, 3·2·{P}·{P}) 中的行号\n"
                     f"一个 token 的 {m * m} 个 patch 是相邻的几行"), xticks=[], yticks=[])
    fig.suptitle(tr("Patches in the merge order: block by block, and inside a block row by row",
                    "按合并顺序排列的 patch：逐组排列，组内逐行排列"))
    return fig


def smooth_standin(side, width, waves=3, seed=0):
    """A (side², width) stand-in for a learned position table, for checkpoints whose table is random: each of its
    `width` channels is a random mix of the low-frequency waves cos(π a r / (side − 1)) · cos(π b c / (side − 1)),
    a, b < `waves`, over row r and column c, so neighbouring positions get nearby vectors, as a trained ViT's do. No
    checkpoint's weights: the figure that draws it says so."""
    g = torch.Generator().manual_seed(seed)
    basis = torch.cos(torch.arange(waves)[:, None] * torch.linspace(0, math.pi, side))  # (waves, side)
    k = torch.arange(waves)
    coef = torch.randn(waves, waves, width, generator=g) / (1 + k[:, None, None] + k[None, :, None])  # (a, b, width)
    return torch.einsum("ar,bc,abw->rcw", basis, basis, coef).reshape(side * side, width)


def position_grid(table, resampled, standin=False):
    """The position table (side², C) and the same table resampled to the image's grid (gh, gw, C), both projected
    on the table's first principal component (a linear map, so it commutes with the resampling). Dots on the left:
    where each of the gh × gw patches reads the table (corners aligned). standin: the table is smooth_standin's,
    not a checkpoint's learned one, and every title says so."""
    import matplotlib.pyplot as plt

    table, resampled = table.float(), resampled.float()
    side = math.isqrt(table.shape[0])
    mean = table.mean(0)
    direction = torch.linalg.svd(table - mean, full_matrices=False).Vh[0]  # (C,) the first principal component
    left = ((table - mean) @ direction).reshape(side, side)
    gh, gw = resampled.shape[:2]
    right = (resampled - mean) @ direction  # (gh, gw)
    lo, hi = float(left.min()), float(left.max())
    what = tr("a smooth stand-in, not learned", "平滑的替身，不是学到的") if standin else tr("the learned table",
                                                                                          "学到的表")
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 5.6), layout="constrained")
    ax0.imshow(left.numpy(), cmap="coolwarm", vmin=lo, vmax=hi)
    ys, xs = torch.meshgrid(torch.linspace(0, side - 1, gh), torch.linspace(0, side - 1, gw), indexing="ij")
    ax0.plot(xs.flatten().numpy(), ys.flatten().numpy(), ".", color="black", ms=1.2)
    rows = table.shape[0]
    ax0.set(title=tr(f"{what}: {side} × {side} positions ({rows:,} rows, like pos_embed)\n"
                     f"dots: where the {gh} × {gw} patches of the image sample it",
                     f"{what}：{side} × {side} 个位置（{rows:,} 行，同 pos_embed）\n"
                     f"点：图片 {gh} × {gw} 个 patch 的取值位置"),
            xlabel=tr("column", "列"), ylabel=tr("row", "行"))
    image = ax1.imshow(right.numpy(), cmap="coolwarm", vmin=lo, vmax=hi)
    ax1.set(title=tr(f"resampled bilinearly (corners aligned) to the image's {gh} × {gw} patches",
                     f"用双线性插值（角点对齐）重新采样到图片的 {gh} × {gw} 个 patch"),
            xlabel=tr("patch column", "patch 列"), ylabel=tr("patch row", "patch 行"))
    fig.colorbar(image, ax=ax1, shrink=0.8, label=tr("first principal component of the table", "表的第一主成分"))
    fig.suptitle(tr("The position embedding: one grid for every image size, resampled",
                    "位置嵌入：只学一张网格，重新采样后用于任意尺寸的图") +
                 (tr("\nA STAND-IN (random low-frequency waves), not a checkpoint's weights: the synthetic "
                     "checkpoint's table is random noise",
                     "\n这是替身（随机的低频波），不是检查点的权重：合成检查点的表是随机噪声") if standin else ""))
    return fig


def mrope_rows(positions, image, title=""):
    """The three rows (t, h, w) of M-RoPE positions (3, T) of one prompt, token by token; `image` = (first, last)
    token index of the image's pads, shaded. The first text token after the image is marked with its position and
    the one a plain token count would give."""
    import matplotlib.pyplot as plt

    first, last = image
    T = positions.shape[1]
    fig, axes = plt.subplots(3, 1, figsize=(13, 7), sharex=True, sharey=True, layout="constrained")
    names = (tr("t (time)", "t（时间）"), tr("h (row)", "h（行）"), tr("w (column)", "w（列）"))
    for ax, row, name in zip(axes, positions.tolist(), names):
        ax.step(range(T), row, where="mid", lw=1.2)
        ax.axvspan(first - 0.5, last + 0.5, color="#f4a261", alpha=0.25)
        ax.set_ylabel(name)
    after = last + 1
    if after < T:
        p = int(positions[0, after])
        axes[0].annotate(tr(f"text after the image: position {p} = largest image position + 1\n(a plain count would "
                            f"give {after})",
                            f"图片之后的文本：位置 {p} = 图片的最大位置 + 1\n（按 token 数往下数会是 {after}）"),
                         xy=(after, p), xytext=(max(0, after - T * 0.45), p * 0.25 + 1),
                         arrowprops=dict(arrowstyle="->"), fontsize=9)
    axes[1].text((first + last) / 2, float(positions[1, first]),
                 tr(f"image: tokens {first} … {last}", f"图片：token {first} … {last}"), ha="center", va="bottom",
                 fontsize=9)
    axes[-1].set_xlabel(tr("token index in the prompt", "token 在提示词中的序号"))
    fig.suptitle(title or tr("M-RoPE positions of a text + image + text prompt: the three rows differ only on the "
                             "image", "“文本 + 图片 + 文本”提示词的 M-RoPE 位置：三行只在图片处不同"))
    return fig


# where a mark's label may go, tried in turn until it overlaps no label placed before: (dx, dy) points, alignment
LABEL_SPOTS = ((6, -4, "left", "top"), (6, 4, "left", "bottom"), (-6, 4, "right", "bottom"),
               (-6, -4, "right", "top"), (6, -16, "left", "top"), (-6, -16, "right", "top"))


def token_bill_figure(settings, marks=()):
    """Tokens an image costs against its pixel count, for four aspect ratios, on log scales. Small images are
    enlarged to at least min_pixels (rounding up: a little above the least token count, 72 for 100 × 80), large ones
    shrunk to at most max_pixels (rounding down: a little under the most), and in between one token per P·m × P·m
    pixels after the rounding. marks: (width, height) sizes to label; two sizes with the same pixel count (512 × 600
    and 640 × 480) land on the same spot, so each label takes the first place in LABEL_SPOTS free of the others."""
    import matplotlib.pyplot as plt

    m2 = settings.merge_size ** 2
    per_token = settings.patch_size ** 2 * m2  # pixels per merged token: 32 × 32 = 1,024
    fig, ax = plt.subplots(figsize=(10, 5.6), layout="constrained")
    for (a, b), colour in zip(((1, 1), (4, 3), (16, 9), (3, 1)), ("C0", "C1", "C2", "C3")):
        longs = sorted({round(10 ** (1 + k * 0.025)) for k in range(141)})  # long side 10 … 31,623 pixels
        sizes = [(L, max(1, round(L * b / a))) for L in longs]
        rows = token_bill(sizes, settings)
        ax.plot([w * h for w, h, *_ in rows], [r[-1] for r in rows], color=colour, lw=1.3, label=f"{a}:{b}")
    lo, hi = settings.min_pixels // per_token, settings.max_pixels // per_token
    ax.axhline(lo, color="gray", ls="--", lw=1)
    ax.axhline(hi, color="gray", ls="--", lw=1)
    least, most, f = settings.min_pixels, settings.max_pixels, settings.factor
    ax.text(2e5, lo * 0.9, tr(f"min_pixels {least:,}: at least {lo:,} tokens",
                              f"min_pixels {least:,}：至少 {lo:,} 个 token"), fontsize=8, color="gray", va="top")
    ax.text(20, hi * 0.9, tr(f"max_pixels {most:,}: at most {hi:,} tokens",
                             f"max_pixels {most:,}：至多 {hi:,} 个 token"), fontsize=8, color="gray", va="top")
    ax.set(xscale="log", yscale="log",
           xlabel=tr("pixels of the original image (log scale)", "原图的像素数（对数坐标）"),
           ylabel=tr("merged tokens in the prompt (log scale)", "提示词里合并后的 token 数（对数坐标）"),
           title=tr(f"The token bill of an image: one token per {f} × {f} pixels after resizing into the budget",
                    f"一张图占多少 token：缩放到预算之内后，每 {f} × {f} 像素一个 token"))
    ax.legend(title=tr("aspect ratio", "宽高比"), loc="lower right")
    bill = token_bill(marks, settings)
    for w, h, *_, tokens in bill:
        ax.plot([w * h], [tokens], "o", color="black", ms=4)
    fig.canvas.draw()  # the layout and the axes' limits are final: the labels' extents can be measured
    renderer = fig.canvas.get_renderer()
    placed = [text.get_window_extent(renderer) for text in ax.texts]  # the budget's two notes
    for w, h, *_, tokens in bill:
        for dx, dy, ha, va in LABEL_SPOTS:
            label = ax.annotate(f"{w}×{h}: {tokens:,}", (w * h, tokens), textcoords="offset points", xytext=(dx, dy),
                                ha=ha, va=va, fontsize=8)
            label.set_in_layout(False)
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            label.remove()
        else:  # no spot free: the first one (a test holds the chapter's sizes to a free spot each)
            label = ax.annotate(f"{w}×{h}: {tokens:,}", (w * h, tokens), textcoords="offset points",
                                xytext=LABEL_SPOTS[0][:2], ha=LABEL_SPOTS[0][2], va=LABEL_SPOTS[0][3], fontsize=8)
            box = label.get_window_extent(renderer)
        placed.append(box)
    return fig
