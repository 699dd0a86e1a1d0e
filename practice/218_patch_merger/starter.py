"""Problem 218: Qwen3.5's patch merger, 2 × 2 neighbouring patches -> one token of the text width.

Read the statement: python practice/judge.py show 218   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 218
"""
import torch
import torch.nn.functional as F


def patch_merger(x: torch.Tensor, image_grid_thw: torch.Tensor, weights: dict) -> torch.Tensor:
    """x (N, C): the tower's last hidden states of the images of image_grid_thw (n, 3), in merge order (the four
    patches of each 2 × 2 block consecutive, problem 216); weights: "norm.weight", "norm.bias" (C,),
    "linear_fc1.weight" (4C, 4C), "linear_fc1.bias" (4C,), "linear_fc2.weight" (d, 4C), "linear_fc2.bias" (d,).

    LayerNorm each patch (eps 1e-6), join each block's four rows into one 4C vector, Linear, exact GELU, Linear:
    (N/4, d) in x's dtype.
    """
    raise NotImplementedError("patch_merger")
