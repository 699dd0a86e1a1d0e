"""Problem 218: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/vision.py's PatchMerger, the merger of the vision tower that tests/test_vision.py proves equal to
transformers' Qwen3_5VisionModel; tests/test_practice.py holds it against transformers' Qwen3_5VisionPatchMerger
(use_postshuffle_norm=False, as Qwen3_5VisionModel builds it) on every case here.
"""
import math

import torch

from practice.grading import Case, Tol
from qwen.config import VisionConfig
from qwen.lang import tr
from qwen.vision import PatchMerger

FP32 = Tol(rtol=1e-5, atol=1e-5)  # a LayerNorm and two products summed in another order: ~1e-6 of the scale
FP64 = Tol(rtol=1e-10, atol=1e-10)

NAMES = ("norm.weight", "norm.bias", "linear_fc1.weight", "linear_fc1.bias", "linear_fc2.weight", "linear_fc2.bias")


def oracle(x, image_grid_thw, weights):
    C, d = x.shape[-1], weights["linear_fc2.weight"].shape[0]
    merger = PatchMerger(VisionConfig(hidden_size=C, out_hidden_size=d, spatial_merge_size=2)).to(x.dtype)
    merger.load_state_dict(weights)
    with torch.no_grad():
        return merger(x)


def make_weights(g, C, d, dtype):
    """Random merger weights at the scales of a trained one: LayerNorm weights around 1, products near unit gain."""
    w = {"norm.weight": 1 + 0.3 * torch.randn(C, generator=g, dtype=torch.float64),
         "norm.bias": 0.3 * torch.randn(C, generator=g, dtype=torch.float64),
         "linear_fc1.weight": torch.randn(4 * C, 4 * C, generator=g, dtype=torch.float64) / math.sqrt(4 * C),
         "linear_fc1.bias": 0.3 * torch.randn(4 * C, generator=g, dtype=torch.float64),
         "linear_fc2.weight": torch.randn(d, 4 * C, generator=g, dtype=torch.float64) / math.sqrt(4 * C),
         "linear_fc2.bias": 0.3 * torch.randn(d, generator=g, dtype=torch.float64)}
    return {k: v.to(dtype) for k, v in w.items()}


def hidden_states(g, N, C, scale, dtype):
    """The tower's last hidden states: each channel with its own offset, so the LayerNorm's mean matters."""
    offset = scale * torch.randn(C, generator=g, dtype=torch.float64)
    return (scale * torch.randn(N, C, generator=g, dtype=torch.float64) + offset).to(dtype)


# (image_grid_thw, C, d, scale of x, dtype, note)
HIDDEN = [([[1, 14, 20]], 32, 64, 3.0, torch.float32, tr("the synthetic checkpoint's widths, a 224 × 320 image",
                                                         "合成检查点的宽度，一幅 224 × 320 的图像")),
          ([[1, 8, 8]], 768, 1024, 3.0, torch.float32, tr("Qwen3.5-0.8B's widths: C = 768, d = 1024",
                                                          "Qwen3.5-0.8B 的宽度：C = 768，d = 1024")),
          ([[1, 4, 6], [1, 6, 4]], 48, 40, 3.0, torch.float32, tr("two images, wide then tall", "两幅图像，先宽后高")),
          ([[1, 2, 2], [1, 4, 10], [1, 6, 2]], 64, 24, 3.0, torch.float32, tr("three images, one of a single block",
                                                                              "三幅图像，其中一幅只有一个组")),
          ([[1, 2, 40]], 32, 64, 3.0, torch.float32, tr("a strip two patches high", "两个 patch 高的长条")),
          ([[1, 4, 6]], 32, 64, 0.01, torch.float32, tr("quiet hidden states: a variance near the LayerNorm's eps",
                                                        "很小的隐藏状态：方差接近 LayerNorm 的 eps")),
          ([[1, 6, 6]], 16, 128, 0.1, torch.float32, tr("the text wider than the merged vector: d = 128 > 4C = 64",
                                                        "文本模型的宽度大于合并后的向量：d = 128 > 4C = 64")),
          ([[1, 4, 4]], 32, 64, 30.0, torch.float32, tr("large hidden states, scale 30", "很大的隐藏状态，量级 30")),
          ([[1, 6, 8]], 32, 64, 3.0, torch.float64, "float64"),
          ([[1, 4, 4], [1, 2, 6]], 16, 16, 1.0, torch.float64, tr("float64, two images", "float64，两幅图像"))]


def make_cases(tmp):
    one = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [3.0, 1.0], [0.0, 2.0]])  # one 2 × 2 block of C = 2 patches
    hand = {"norm.weight": torch.ones(2), "norm.bias": torch.zeros(2), "linear_fc1.weight": torch.eye(8),
            "linear_fc1.bias": torch.zeros(8), "linear_fc2.weight": torch.full((1, 8), 0.125),
            "linear_fc2.bias": torch.zeros(1)}
    g = torch.Generator().manual_seed(21800)
    cases = [Case("example 1", "patch_merger", [("x", one), ("image_grid_thw", torch.tensor([[1, 2, 2]])),
                                               ("weights", hand)], None, FP32, None,
                  tr("one block of four C = 2 patches, identity fc1, fc2 the mean",
                     "一个组，含四个 C = 2 的 patch；fc1 为单位矩阵，fc2 取平均")),
             Case("example 2", "patch_merger", [("x", hidden_states(g, 8, 8, 3.0, torch.float32)),
                                               ("image_grid_thw", torch.tensor([[1, 2, 4]])),
                                               ("weights", make_weights(g, 8, 6, torch.float32))], None, FP32,
                  21800, tr("2 × 4 patches (two blocks), C = 8, d = 6", "2 × 4 个 patch（两个组），C = 8，d = 6"))]
    for n, (grids, C, d, scale, dtype, note) in enumerate(HIDDEN, 1):
        seed = 21800 + n
        g = torch.Generator().manual_seed(seed)
        grid = torch.tensor(grids)
        x = hidden_states(g, int(grid.prod(-1).sum()), C, scale, dtype)
        cases.append(Case(f"hidden {n}", "patch_merger", [("x", x), ("image_grid_thw", grid),
                                                         ("weights", make_weights(g, C, d, dtype))],
                          None, FP64 if dtype == torch.float64 else FP32, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
