# expect: WA raster_neighbours
"""A wrong solution to problem 218. Each image's rows regrouped as if they were a raster grid."""
import torch
import torch.nn.functional as F


def patch_merger(x: torch.Tensor, image_grid_thw: torch.Tensor, weights: dict) -> torch.Tensor:
    """x (N, C): the tower's last hidden states of the images of image_grid_thw (n, 3), in merge order; weights: the
    checkpoint's model.visual.merger.* without the prefix -> (N/4, d), in x's dtype."""
    N, C = x.shape
    if N != int(image_grid_thw.prod(-1).sum()):
        raise ValueError(f"x has {N} rows but image_grid_thw holds {int(image_grid_thw.prod(-1).sum())} patches")
    x = F.layer_norm(x, (C,), weights["norm.weight"], weights["norm.bias"], eps=1e-6)  # each patch, before the merge
    blocks = []
    for (t, h, w), rows in zip(image_grid_thw.tolist(), x.split(image_grid_thw.prod(-1).tolist())):
        rows = rows.reshape(t, h // 2, 2, w // 2, 2, C).permute(0, 1, 3, 2, 4, 5)  # (t, h/2, w/2, 2, 2, C)
        blocks.append(rows.reshape(-1, 4 * C))  # the 2 × 2 neighbours of a row-by-row grid
    x = torch.cat(blocks)
    x = F.gelu(F.linear(x, weights["linear_fc1.weight"], weights["linear_fc1.bias"]))  # exact (erf) GELU
    return F.linear(x, weights["linear_fc2.weight"], weights["linear_fc2.bias"])  # (N/4, d)
