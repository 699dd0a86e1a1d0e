"""Problem 218, reference solution: Qwen3.5's patch merger, 2 × 2 neighbouring patches -> one text-wide token."""
import torch
import torch.nn.functional as F


def patch_merger(x: torch.Tensor, image_grid_thw: torch.Tensor, weights: dict) -> torch.Tensor:
    """x (N, C): the tower's last hidden states of the images of image_grid_thw (n, 3), in merge order; weights: the
    checkpoint's model.visual.merger.* without the prefix -> (N/4, d), in x's dtype."""
    N, C = x.shape
    if N != int(image_grid_thw.prod(-1).sum()):
        raise ValueError(f"x has {N} rows but image_grid_thw holds {int(image_grid_thw.prod(-1).sum())} patches")
    x = F.layer_norm(x, (C,), weights["norm.weight"], weights["norm.bias"], eps=1e-6)  # each patch, before the merge
    x = x.reshape(N // 4, 4 * C)  # rows 4k … 4k+3, one 2 × 2 block, side by side: [patch 4k | … | patch 4k+3]
    x = F.gelu(F.linear(x, weights["linear_fc1.weight"], weights["linear_fc1.bias"]))  # exact (erf) GELU
    return F.linear(x, weights["linear_fc2.weight"], weights["linear_fc2.bias"])  # (N/4, d)
