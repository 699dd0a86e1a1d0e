"""Problem 216: cut normalised pixels into the patches Qwen3.5's vision tower reads, in its order.

Read the statement: python practice/judge.py show 216   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 216
"""
import torch


def patchify(pixels: torch.Tensor, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple:
    """pixels (3, H, W), H and W multiples of patch_size · merge_size -> (pixel_values, image_grid_thw).

    pixel_values (gh·gw, 3·Tp·P·P) in pixels' dtype: the four patches of each 2 × 2 merge block consecutive, each
    patch flattened as (channel, frame, row, column), the still image repeated to Tp frames; image_grid_thw (1, 3)
    int64 = [[1, gh, gw]], gh = H / P patch rows, gw = W / P patch columns.
    """
    raise NotImplementedError("patchify")
