"""Problem 218: cases, oracle and known mistakes.

Oracle: qwen/vision.py's PatchMerger, the merger of the vision tower that tests/test_vision.py proves equal to
transformers' Qwen3_5VisionModel; tests/test_practice.py holds it against transformers' Qwen3_5VisionPatchMerger
(use_postshuffle_norm=False, as Qwen3_5VisionModel builds it) on every case here.
"""
import math

import torch
import torch.nn.functional as F

from practice.grading import Case, Mistake, Tol
from qwen.config import VisionConfig
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
HIDDEN = [([[1, 14, 20]], 32, 64, 3.0, torch.float32, "the synthetic checkpoint's widths, a 224 × 320 image"),
          ([[1, 8, 8]], 768, 1024, 3.0, torch.float32, "Qwen3.5-0.8B's widths: C = 768, d = 1024"),
          ([[1, 4, 6], [1, 6, 4]], 48, 40, 3.0, torch.float32, "two images, wide then tall"),
          ([[1, 2, 2], [1, 4, 10], [1, 6, 2]], 64, 24, 3.0, torch.float32, "three images, one of a single block"),
          ([[1, 2, 40]], 32, 64, 3.0, torch.float32, "a strip two patches high"),
          ([[1, 4, 6]], 32, 64, 0.01, torch.float32, "quiet hidden states: a variance near the LayerNorm's eps"),
          ([[1, 6, 6]], 16, 128, 0.1, torch.float32, "the text wider than the merged vector: d = 128 > 4C = 64"),
          ([[1, 4, 4]], 32, 64, 30.0, torch.float32, "large hidden states, scale 30"),
          ([[1, 6, 8]], 32, 64, 3.0, torch.float64, "float64"),
          ([[1, 4, 4], [1, 2, 6]], 16, 16, 1.0, torch.float64, "float64, two images")]


def make_cases(tmp):
    one = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [3.0, 1.0], [0.0, 2.0]])  # one 2 × 2 block of C = 2 patches
    hand = {"norm.weight": torch.ones(2), "norm.bias": torch.zeros(2), "linear_fc1.weight": torch.eye(8),
            "linear_fc1.bias": torch.zeros(8), "linear_fc2.weight": torch.full((1, 8), 0.125),
            "linear_fc2.bias": torch.zeros(1)}
    g = torch.Generator().manual_seed(21800)
    cases = [Case("example 1", "patch_merger", [("x", one), ("image_grid_thw", torch.tensor([[1, 2, 2]])),
                                               ("weights", hand)], None, FP32, None,
                  "one block of four C = 2 patches, identity fc1, fc2 the mean"),
             Case("example 2", "patch_merger", [("x", hidden_states(g, 8, 8, 3.0, torch.float32)),
                                               ("image_grid_thw", torch.tensor([[1, 2, 4]])),
                                               ("weights", make_weights(g, 8, 6, torch.float32))], None, FP32,
                  21800, "2 × 4 patches (two blocks), C = 8, d = 6")]
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


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _raster_blocks(x, grids):
    """Each image's rows taken as a raster h × w grid and regrouped into 2 × 2 blocks: the merge order applied to
    rows that are in it already."""
    out = []
    for (t, h, w), rows in zip(grids.tolist(), x.split((grids.prod(-1)).tolist())):
        rows = rows.reshape(t, h // 2, 2, w // 2, 2, -1).permute(0, 1, 3, 2, 4, 5)  # (t, h/2, w/2, 2, 2, C)
        out.append(rows.reshape(-1, 4 * x.shape[-1]))
    return torch.cat(out)


def _merge(x, grids, W, group="blocks", norm="layer", after=False, act="erf", eps=1e-6, drop=None,
           unbiased=False, plus_one=False):
    """The merger with one thing changed, for recognising a learner's mistake."""
    N, C = x.shape
    W = {k: (torch.zeros_like(v) if k == drop else v) for k, v in W.items()}
    weight, bias = W["norm.weight"], W["norm.bias"]
    weight = 1 + weight if plus_one else weight

    def normed(v, weight, bias):
        if norm == "rms":
            return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight + bias
        mean, var = v.mean(-1, keepdim=True), v.var(-1, keepdim=True, unbiased=unbiased)
        return (v - mean) / torch.sqrt(var + eps) * weight + bias

    if not after:
        x = normed(x, weight, bias)
    if group == "blocks":
        x = x.reshape(N // 4, 4 * C)
    elif group == "raster":
        x = _raster_blocks(x, grids)
    else:  # the four patches interleaved channel by channel
        x = x.reshape(N // 4, 4, C).transpose(1, 2).reshape(N // 4, 4 * C)
    if after:
        x = normed(x, weight.repeat(4), bias.repeat(4))
    x = F.linear(x, W["linear_fc1.weight"], W["linear_fc1.bias"])
    x = F.gelu(x, approximate="tanh" if act == "tanh" else "none")
    return F.linear(x, W["linear_fc2.weight"], W["linear_fc2.bias"])


def _hint(en, zh):
    return {"en": en, "zh": zh}


AFTER = _hint("looks like the LayerNorm comes after the merge, over the 4C-wide vector (Qwen3-VL's deepstack mergers "
              "do that: use_postshuffle_norm=True): Qwen3.5's merger normalises each C-wide patch first, with the C "
              "weights of norm.weight, and then joins four of them",
              "看起来 LayerNorm 放在了合并之后，作用于 4C 宽的向量（Qwen3-VL 的 deepstack 合并器才这样做："
              "use_postshuffle_norm=True）：Qwen3.5 的合并器先用 norm.weight 的 C 个权重对每个 C 宽的块做归一化，"
              "再把四个块拼起来")
MISTAKES = [
    Mistake("raster_neighbours", "patch_merger", lambda x, g, W: _merge(x, g, W, group="raster"),
            _hint("looks like the rows were taken as a raster (row by row) grid of each image and regrouped into 2 × 2 "
                  "blocks: they already come in merge order (problem 216), the four patches of each block in rows "
                  "4k … 4k+3, so the merge is a reshape, (N, C) -> (N/4, 4C)",
                  "看起来把每幅图像的行当作逐行排列（光栅顺序）的网格，又重新分成了 2 × 2 的块组：这些行已经是合并顺序"
                  "（第 216 题），每个块组的四个块就是第 4k … 4k+3 行，所以合并只是一次 reshape：(N, C) -> (N/4, 4C)")),
    Mistake("channel_interleaved", "patch_merger", lambda x, g, W: _merge(x, g, W, group="interleaved"),
            _hint("looks like the four patches were interleaved channel by channel (stacked on a last axis, then "
                  "flattened): linear_fc1 reads [patch 4k | patch 4k+1 | patch 4k+2 | patch 4k+3], the C numbers of "
                  "each patch side by side, as x.reshape(N/4, 4C) gives",
                  "看起来四个块按通道交错排列了（在最后一维上 stack 再展平）："
                  "linear_fc1 读的是 [块 4k | 块 4k+1 | 块 4k+2 "
                  "| 块 4k+3]，每个块的 C 个数连在一起，就像 x.reshape(N/4, 4C) 给出的那样")),
    Mistake("norm_after_merge", "patch_merger", lambda x, g, W: _merge(x, g, W, after=True), AFTER),
    Mistake("tanh_gelu", "patch_merger", lambda x, g, W: _merge(x, g, W, act="tanh"),
            _hint("looks like the tanh approximation of GELU (gelu_pytorch_tanh, the activation of the vision "
                  "blocks' MLP): the merger uses the exact GELU, x·Φ(x) with the normal CDF (nn.GELU(), F.gelu(x))",
                  "看起来用了 GELU 的 tanh 近似（gelu_pytorch_tanh，视觉块 MLP 用的激活函数）："
                  "合并器用的是精确的 GELU，"
                  "x·Φ(x)，Φ 是正态分布函数（nn.GELU()、F.gelu(x)）")),
    Mistake("bias_dropped", "patch_merger", lambda x, g, W: _merge(x, g, W, drop="norm.bias"),
            _hint("looks like the LayerNorm's bias is missing: unlike the text model's RMSNorm, the vision LayerNorm "
                  "has a weight and a bias, y = (x − mean)/√(var + eps)·weight + bias",
                  "看起来漏了 LayerNorm 的偏置：与文本模型的 RMSNorm 不同，视觉部分的 LayerNorm 既有权重也有偏置，"
                  "y = (x − mean)/√(var + eps)·weight + bias")),
    Mistake("bias_dropped", "patch_merger", lambda x, g, W: _merge(x, g, W, drop="linear_fc1.bias"),
            _hint("looks like linear_fc1's bias is missing: both of the merger's linear layers have one (the text "
                  "model's projections have none)",
                  "看起来漏了 linear_fc1 的偏置：合并器的两个线性层都有偏置（文本模型的投影没有）")),
    Mistake("bias_dropped", "patch_merger", lambda x, g, W: _merge(x, g, W, drop="linear_fc2.bias"),
            _hint("looks like linear_fc2's bias is missing: both of the merger's linear layers have one (the text "
                  "model's projections have none)",
                  "看起来漏了 linear_fc2 的偏置：合并器的两个线性层都有偏置（文本模型的投影没有）")),
    Mistake("layernorm_eps", "patch_merger", lambda x, g, W: _merge(x, g, W, eps=1e-5),
            _hint("looks like eps = 1e-5, nn.LayerNorm's default: the merger's LayerNorm uses eps = 1e-6",
                  "看起来用了 eps = 1e-5（nn.LayerNorm 的默认值）：合并器的 LayerNorm 用 eps = 1e-6")),
    Mistake("unbiased_var", "patch_merger", lambda x, g, W: _merge(x, g, W, unbiased=True),
            _hint("looks like the variance divides by C − 1 (torch.var's default, unbiased=True): LayerNorm "
                  "divides by C, var = mean((x − mean)²); use x.var(-1, unbiased=False) or F.layer_norm",
                  "看起来方差除以了 C − 1（torch.var 的默认 unbiased=True）：LayerNorm 除以 C，"
                  "var = mean((x − mean)²)；"
                  "请用 x.var(-1, unbiased=False) 或 F.layer_norm")),
    Mistake("rms_norm", "patch_merger", lambda x, g, W: _merge(x, g, W, norm="rms"),
            _hint("looks like an RMSNorm (no mean subtracted), the text model's norm: the vision tower uses "
                  "LayerNorm, which subtracts each patch's mean first, (x − mean)/√(var + eps)",
                  "看起来用了 RMSNorm（没有减去均值），那是文本模型的归一化：视觉塔用 LayerNorm，先减去每个块的均值，"
                  "(x − mean)/√(var + eps)")),
    Mistake("one_plus_weight", "patch_merger", lambda x, g, W: _merge(x, g, W, plus_one=True),
            _hint("looks like the LayerNorm scaled by (1 + weight), the zero-centred convention of the text model's "
                  "RMSNorm (chapter 3): the vision LayerNorm stores its weight plainly (around 1) and multiplies by "
                  "weight",
                  "看起来 LayerNorm 乘的是 (1 + weight)，那是文本模型 RMSNorm 的零中心约定（第 3 章）：视觉部分的 "
                  "LayerNorm 直接存它的权重（在 1 附近），乘的就是 weight")),
]

ERROR_HINTS = [
    (r"Given normalized_shape=\[\d+\], expected input with shape \[\*, \d+\]|Expected weight to be of same shape as "
     r"normalized_shape", "norm_after_merge", AFTER),
]
