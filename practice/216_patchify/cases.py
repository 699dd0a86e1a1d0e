"""Problem 216: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/image.py's patchify, which tests/test_vision.py proves bit-exact against transformers'
Qwen2VLImageProcessorPil (the PIL class AutoImageProcessor falls back to for Qwen3.5 without torchvision; the
torchvision class writes the same patch order) on whole images, and
tests/test_practice.py against that processor's own patchify on every case here. Patchifying only moves numbers,
so every case is exact.
"""
import torch

from practice.grading import EXACT, Case
from qwen.image import ImageSettings, patchify as qwen_patchify
from qwen.lang import tr


def oracle(pixels, patch_size, merge_size, temporal_patch_size):
    s = ImageSettings(patch_size=patch_size, merge_size=merge_size, temporal_patch_size=temporal_patch_size)
    patches, gh, gw = qwen_patchify(pixels, s)
    return patches, torch.tensor([[1, gh, gw]])


def numbered(H, W, base=100):
    """(3, H, W) pixels that say where they are: base²·channel + base·row + column (exact in fp32)."""
    c, y, x = torch.meshgrid(torch.arange(3), torch.arange(H), torch.arange(W), indexing="ij")
    return (base * base * c + base * y + x).float()


# (H, W, patch_size, merge_size, temporal_patch_size, pixels numbered by where they are, note)
HIDDEN = [(224, 320, 16, 2, 2, False, tr("Qwen3.5: 224 × 320 pixels, 14 × 20 patches, 70 tokens",
                                         "Qwen3.5：224 × 320 像素，14 × 20 个 patch，70 个 token")),
          (256, 256, 16, 2, 2, False,
           tr("256 × 256 pixels, the least Qwen3.5's published budget allows (min_pixels): 64 tokens",
              "256 × 256 像素，Qwen3.5 发布的像素预算允许的最小值（min_pixels）：64 个 token")),
          (32, 32, 16, 2, 2, False, tr("one merge block: four patches, one token",
                                       "一个合并组：四个 patch，一个 token")),
          (32, 640, 16, 2, 2, False, tr("a wide strip: 2 × 40 patches", "宽条：2 × 40 个 patch")),
          (480, 64, 16, 2, 2, False, tr("a tall image: 30 × 4 patches", "高图：30 × 4 个 patch")),
          (448, 672, 16, 2, 2, False, tr("448 × 672 pixels: 28 × 42 patches, 294 tokens",
                                         "448 × 672 像素：28 × 42 个 patch，294 个 token")),
          (56, 84, 14, 2, 2, False, tr("patch 14, Qwen2-VL's: 4 × 6 patches",
                                       "patch 大小 14（Qwen2-VL 用的）：4 × 6 个 patch")),
          (12, 24, 2, 2, 2, False, tr("tiny patches: 6 × 12 of them", "很小的 patch：共 6 × 12 个")),
          (24, 48, 4, 3, 2, False, tr("merge 3: blocks of 3 × 3 patches (no Qwen model uses it; the rule is the same)",
                                      "合并大小 3：每组 3 × 3 个 patch（没有哪个 Qwen 模型这样用；规则相同）")),
          (32, 64, 8, 2, 1, False, tr("temporal_patch_size 1: nothing to repeat", "temporal_patch_size 1：无需重复")),
          (64, 96, 16, 2, 2, True, tr("pixels numbered 10000·channel + 100·row + column",
                                      "像素编号为 10000·通道 + 100·行 + 列")),
          (48, 64, 4, 4, 2, False, tr("merge 4: blocks of 4 × 4 patches", "合并大小 4：每组 4 × 4 个 patch")),
          (32, 48, 8, 2, 3, False, tr("temporal_patch_size 3: three copies of each patch",
                                      "temporal_patch_size 3：每个 patch 复制三份")),
          (36, 72, 6, 3, 1, False, tr("merge 3 and one temporal frame", "合并大小 3，只有一帧"))]


def make_cases(tmp):
    cases = [Case("example 1", "patchify", [("pixels", numbered(4, 8, 10)), ("patch_size", 2), ("merge_size", 2),
                                            ("temporal_patch_size", 2)], None, EXACT, None,
                  tr("4 × 8 pixels numbered 100·channel + 10·row + column: 2 × 4 patches of 2 × 2 pixels",
                     "4 × 8 像素，编号为 100·通道 + 10·行 + 列：2 × 4 个 patch，每个 2 × 2 像素")),
             Case("example 2", "patchify", [("pixels", torch.rand(3, 64, 64, generator=torch.Generator()
                                                                   .manual_seed(21600)) * 2 - 1),
                                            ("patch_size", 16), ("merge_size", 2), ("temporal_patch_size", 2)],
                  None, EXACT, 21600, tr("Qwen3.5's sizes: 64 × 64 pixels, 4 × 4 patches, 4 tokens",
                                         "Qwen3.5 的尺寸：64 × 64 像素，4 × 4 个 patch，4 个 token"))]
    for n, (H, W, P, m, Tp, numbered_pixels, note) in enumerate(HIDDEN, 1):
        seed = 21600 + n
        g = torch.Generator().manual_seed(seed)
        pixels = numbered(H, W) if numbered_pixels else torch.rand(3, H, W, generator=g) * 2 - 1  # normalised
        cases.append(Case(f"hidden {n}", "patchify", [("pixels", pixels), ("patch_size", P), ("merge_size", m),
                                                     ("temporal_patch_size", Tp)], None, EXACT, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
