"""What reading one image costs the vision tower: its floating-point operations counted by hand, and a time.

The tower's work grows with the patches n (4 per image token): every linear layer costs 2 × its weights per patch,
and attention over an image's n patches costs 4·n²·C per block (q kᵀ and the weighted sum of v, each 2·n²·C over all
heads: H·Dh = C). At the 0.8B's widths a 1920 × 1080 photo (2,040 tokens, 8,160 patches) takes 1.46 TFLOP in its
linear layers and 2.45 in attention, which grows as n²: the budget of pixels is what bounds it.
A time needs the device's speed. `rates` measures it once, on the tower's own shapes in its dtype: one matrix
product of its MLP (rows × C by C × I) and one fused attention over 1,024 patches. The tower also runs norms, GELUs
and copies that these leave out, so the seconds are a floor: on a 2-core CPU with one thread, 1.1× to 1.2× under
the time the synthetic tower took for a 1920 × 1080 photo (bf16 and fp32), 1.7× under a tower of the 0.8B's widths
(random weights) for a 640 × 480 one (fp32), both with the fused attention kernel.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from qwen.measure import best


@dataclass
class TowerCost:
    patches: int  # n, the patches of the image
    linear_flop: float  # the linear layers (patch projection, blocks, merger)
    attention_flop: float  # q kᵀ and the weighted sum of v, every block

    def seconds(self, rates: tuple[float, float]) -> float:
        """At rates (linear FLOP/s, attention FLOP/s), as `rates` measures them."""
        return self.linear_flop / rates[0] + self.attention_flop / rates[1]


def tower_cost(cfg, grid_thw) -> TowerCost:
    """The FLOP of one image of image_grid_thw `grid_thw` ([1, gh, gw]) through a tower of VisionConfig `cfg`."""
    t, gh, gw = (int(v) for v in torch.as_tensor(grid_thw).reshape(-1)[:3])
    n = gh * gw  # patches per frame: each frame attends on its own
    C, I, L, m2 = cfg.hidden_size, cfg.intermediate_size, cfg.depth, cfg.spatial_merge_size ** 2
    width = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size ** 2  # 3·2·16·16 = 1536 numbers per patch
    per_patch = (width * C  # the patch projection
                 + L * (C * 3 * C + C * C + 2 * C * I)  # each block: qkv, proj, the MLP's two layers
                 + (m2 * C) ** 2 // m2 + C * cfg.out_hidden_size)  # the merger's two layers, per token / m² patches
    return TowerCost(t * n, 2.0 * per_patch * t * n, 4.0 * n * n * C * L * t)


def rates(cfg, dtype: torch.dtype, device, rows: int = 1024) -> tuple[float, float]:
    """(linear FLOP/s, attention FLOP/s) measured now on `device` in `dtype`: the best of three runs of one product
    of the tower's MLP shapes and one fused attention over `rows` patches, after one run to warm up."""
    C, I, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_heads
    g = torch.Generator(device=device).manual_seed(0)
    x, w = (torch.randn(shape, generator=g, device=device).to(dtype) for shape in ((rows, C), (C, I)))
    q, k, v = (torch.randn(1, H, rows, C // H, generator=g, device=device).to(dtype) for _ in range(3))

    def fastest(fn):
        fn()  # warm-up
        return max(best(fn, device, repeats=3), 1e-9)  # synchronised on CUDA and MPS (qwen/measure.py)

    with torch.no_grad():
        linear = 2.0 * rows * C * I / fastest(lambda: x @ w)
        attention = 4.0 * rows * rows * C / fastest(lambda: F.scaled_dot_product_attention(q, k, v))
    return linear, attention
