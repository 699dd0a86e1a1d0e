# expect: WA raster_order
"""A wrong solution to problem 216. The patches listed row by row over the whole image, not block by block."""
import torch


def patchify(pixels: torch.Tensor, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple:
    """pixels (3, H, W) -> (pixel_values (gh·gw, 3·Tp·P·P), image_grid_thw (1, 3) int64 = [[1, gh, gw]])."""
    C, H, W = pixels.shape
    P, m, Tp = patch_size, merge_size, temporal_patch_size
    gh, gw = H // P, W // P  # the patch grid
    x = pixels.reshape(C, gh, P, gw, P)  # (C, patch row, y, patch col, x)
    x = x.permute(1, 3, 0, 2, 4)  # (gh, gw, C, P, P): every patch, row by row
    x = x.unsqueeze(3).expand(-1, -1, -1, Tp, -1, -1)  # (gh, gw, C, Tp, P, P)
    return x.reshape(gh * gw, C * Tp * P * P), torch.tensor([[1, gh, gw]])
