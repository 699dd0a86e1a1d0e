# expect: WA channel_interleaved
"""A wrong solution to problem 218. The four patches stacked on a last axis: their channels interleaved."""
import torch
import torch.nn.functional as F


def patch_merger(x: torch.Tensor, image_grid_thw: torch.Tensor, weights: dict) -> torch.Tensor:
    """x (N, C): the tower's last hidden states of the images of image_grid_thw (n, 3), in merge order; weights: the
    checkpoint's model.visual.merger.* without the prefix -> (N/4, d), in x's dtype."""
    N, C = x.shape
    if N != int(image_grid_thw.prod(-1).sum()):
        raise ValueError(f"x has {N} rows but image_grid_thw holds {int(image_grid_thw.prod(-1).sum())} patches")
    x = F.layer_norm(x, (C,), weights["norm.weight"], weights["norm.bias"], eps=1e-6)  # each patch, before the merge
    x = torch.stack([x[0::4], x[1::4], x[2::4], x[3::4]], dim=-1).flatten(1)  # (N/4, C, 4) -> (N/4, 4C)
    x = F.gelu(F.linear(x, weights["linear_fc1.weight"], weights["linear_fc1.bias"]))  # exact (erf) GELU
    return F.linear(x, weights["linear_fc2.weight"], weights["linear_fc2.bias"])  # (N/4, d)
