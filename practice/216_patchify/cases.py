"""Problem 216: cases, oracle and known mistakes.

Oracle: qwen/image.py's patchify, which tests/test_vision.py proves bit-exact against transformers'
Qwen2VLImageProcessorPil (the processor AutoImageProcessor picks for Qwen3.5) on whole images, and
tests/test_practice.py against that processor's own patchify on every case here. Patchifying only moves numbers,
so every case is exact.
"""
import torch

from practice.grading import EXACT, Case, Mistake
from qwen.image import ImageSettings, patchify as qwen_patchify


def oracle(pixels, patch_size, merge_size, temporal_patch_size):
    s = ImageSettings(patch_size=patch_size, merge_size=merge_size, temporal_patch_size=temporal_patch_size)
    patches, gh, gw = qwen_patchify(pixels, s)
    return patches, torch.tensor([[1, gh, gw]])


def numbered(H, W, base=100):
    """(3, H, W) pixels that say where they are: base²·channel + base·row + column (exact in fp32)."""
    c, y, x = torch.meshgrid(torch.arange(3), torch.arange(H), torch.arange(W), indexing="ij")
    return (base * base * c + base * y + x).float()


# (H, W, patch_size, merge_size, temporal_patch_size, note)
HIDDEN = [(224, 320, 16, 2, 2, "Qwen3.5: 224 × 320 pixels, 14 × 20 patches, 70 tokens"),
          (256, 256, 16, 2, 2, "256 × 256 pixels, the least Qwen3.5's published budget allows (min_pixels): 64 tokens"),
          (32, 32, 16, 2, 2, "one merge block: four patches, one token"),
          (32, 640, 16, 2, 2, "a wide strip: 2 × 40 patches"),
          (480, 64, 16, 2, 2, "a tall image: 30 × 4 patches"),
          (448, 672, 16, 2, 2, "448 × 672 pixels: 28 × 42 patches, 294 tokens"),
          (56, 84, 14, 2, 2, "patch 14, Qwen2-VL's: 4 × 6 patches"),
          (12, 24, 2, 2, 2, "tiny patches: 6 × 12 of them"),
          (24, 36, 4, 3, 2, "merge 3: blocks of 3 × 3 patches (no Qwen model uses it; the rule is the same)"),
          (32, 64, 8, 2, 1, "temporal_patch_size 1: nothing to repeat"),
          (64, 96, 16, 2, 2, "pixels numbered 10000·channel + 100·row + column")]


def make_cases(tmp):
    cases = [Case("example 1", "patchify", [("pixels", numbered(4, 8, 10)), ("patch_size", 2), ("merge_size", 2),
                                            ("temporal_patch_size", 2)], None, EXACT, None,
                  "4 × 8 pixels numbered 100·channel + 10·row + column: 2 × 4 patches of 2 × 2 pixels"),
             Case("example 2", "patchify", [("pixels", torch.rand(3, 64, 64, generator=torch.Generator()
                                                                   .manual_seed(21600)) * 2 - 1),
                                            ("patch_size", 16), ("merge_size", 2), ("temporal_patch_size", 2)],
                  None, EXACT, 21600, "Qwen3.5's sizes: 64 × 64 pixels, 4 × 4 patches, 4 tokens")]
    for n, (H, W, P, m, Tp, note) in enumerate(HIDDEN, 1):
        seed = 21600 + n
        g = torch.Generator().manual_seed(seed)
        pixels = numbered(H, W) if "numbered" in note else torch.rand(3, H, W, generator=g) * 2 - 1  # normalised
        cases.append(Case(f"hidden {n}", "patchify", [("pixels", pixels), ("patch_size", P), ("merge_size", m),
                                                     ("temporal_patch_size", Tp)], None, EXACT, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

PATCH_AXES = {"blocks": (1, 4, 2, 5), "raster": (1, 2, 4, 5), "block_transposed": (1, 4, 5, 2)}
CONTENT_AXES = {"cthw": (0, 7, 3, 6), "thwc": (7, 3, 6, 0), "tchw": (7, 0, 3, 6), "chw": (0, 3, 6)}


def _patchify(pixels, P, m, Tp, patches="blocks", content="cthw", swap_grid=False):
    """patchify with one thing changed: the order of the patches, the order inside a patch, the grid."""
    C, H, W = pixels.shape
    gh, gw = H // P, W // P
    x = pixels.reshape(C, gh // m, m, P, gw // m, m, P)  # axes 0 C, 1 block row, 2 row in block, 3 y, 4 block col,
    x = x[..., None].expand(*x.shape, Tp)  # 5 col in block, 6 x, 7 frame
    axes = PATCH_AXES[patches] + CONTENT_AXES[content]
    x = x.permute(*axes) if content != "chw" else x[..., 0].permute(*axes)
    grid = [1, gw, gh] if swap_grid else [1, gh, gw]
    return x.reshape(gh * gw, -1), torch.tensor([grid])


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("raster_order", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, patches="raster"),
            _hint("looks like the patches are listed row by row across the whole image (raster order): the merger "
                  "joins each 2 × 2 block of neighbouring patches by taking 4 consecutive rows, so list the blocks "
                  "row by row and, inside each block, its m × m patches row by row: (block row, block column, row "
                  "in block, column in block)",
                  "看起来块是按整幅图逐行排列的（光栅顺序）：合并器取连续的 4 行来合并每个 2 × 2 的相邻块组，"
                  "所以要先逐行"
                  "列出块组，再在每个块组内逐行列出它的 m × m 个块：（块组行，块组列，组内行，组内列）")),
    Mistake("block_transposed", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, patches="block_transposed"),
            _hint("looks like the patches inside each merge block are listed column by column, (0,0) (1,0) (0,1) "
                  "(1,1): list them row by row, (0,0) (0,1) (1,0) (1,1), as the processor does",
                  "看起来每个合并块组内的块是逐列排列的：(0,0) (1,0) (0,1) (1,1)；应像处理器那样逐行排列："
                  "(0,0) (0,1) (1,0) (1,1)")),
    Mistake("channels_last", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, content="thwc"),
            _hint("looks like each patch is flattened with the channel last (frame, row, column, channel), the "
                  "layout of an H × W × 3 image: the patch embedding's Conv3d kernel is (width, 3, Tp, P, P), so "
                  "flatten each patch as (channel, frame, row, column)",
                  "看起来每个块展平时通道在最后（帧，行，列，通道），那是 H × W × 3 图像的布局："
                  "块嵌入的 Conv3d 卷积核是 "
                  "(宽度, 3, Tp, P, P)，所以每个块要按（通道，帧，行，列）展平")),
    Mistake("frame_outer", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, content="tchw"),
            _hint("looks like the frame axis is outside the channel (frame, channel, row, column), as when a "
                  "flattened patch is concatenated with itself: the repeat goes inside each channel, (channel, "
                  "frame, row, column), the order of the Conv3d kernel (width, 3, Tp, P, P)",
                  "看起来帧这一维放在了通道外面（帧，通道，行，列），比如把展平的块和它自己拼接：重复应在每个通道之内，"
                  "按（通道，帧，行，列），即 Conv3d 卷积核 (宽度, 3, Tp, P, P) 的顺序")),
    Mistake("no_temporal_repeat", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, content="chw"),
            _hint("each row has 3·P·P numbers, not 3·Tp·P·P: a still image is repeated to temporal_patch_size "
                  "frames (2 in Qwen3.5), because the patch embedding reads two frames at a time, as for a video",
                  "每行只有 3·P·P 个数，而不是 3·Tp·P·P：静止图像要重复到 temporal_patch_size 帧（Qwen3.5 是 2），"
                  "因为块嵌入一次读两帧，与视频一样")),
    Mistake("grid_swapped", "patchify", lambda x, P, m, Tp: _patchify(x, P, m, Tp, swap_grid=True),
            _hint("looks like image_grid_thw holds [1, gw, gh]: its order is (t, h, w), [1, patch rows, patch "
                  "columns], [1, H / P, W / P]",
                  "看起来 image_grid_thw 写成了 [1, gw, gh]：它的顺序是 (t, h, w)，即 [1, 块的行数, 块的列数]，"
                  "[1, H / P, W / P]")),
]
