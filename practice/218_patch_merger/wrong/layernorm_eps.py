# expect: WA layernorm_eps
"""A wrong solution to problem 218. nn.LayerNorm with its default eps, 1e-5."""
import torch
import torch.nn.functional as F


def patch_merger(x: torch.Tensor, image_grid_thw: torch.Tensor, weights: dict) -> torch.Tensor:
    """x (N, C): the tower's last hidden states of the images of image_grid_thw (n, 3), in merge order; weights: the
    checkpoint's model.visual.merger.* without the prefix -> (N/4, d), in x's dtype."""
    N, C = x.shape
    if N != int(image_grid_thw.prod(-1).sum()):
        raise ValueError(f"x has {N} rows but image_grid_thw holds {int(image_grid_thw.prod(-1).sum())} patches")
    norm = torch.nn.LayerNorm(C).to(x.dtype)  # each patch, before the merge
    with torch.no_grad():
        norm.weight.copy_(weights["norm.weight"])
        norm.bias.copy_(weights["norm.bias"])
        x = norm(x)
    x = x.reshape(N // 4, 4 * C)  # rows 4k … 4k+3, one 2 × 2 block, side by side: [patch 4k | … | patch 4k+3]
    x = F.gelu(F.linear(x, weights["linear_fc1.weight"], weights["linear_fc1.bias"]))  # exact (erf) GELU
    return F.linear(x, weights["linear_fc2.weight"], weights["linear_fc2.bias"])  # (N/4, d)
