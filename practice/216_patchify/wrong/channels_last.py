# expect: WA channels_last
"""A wrong solution to problem 216. Each patch flattened as (frame, row, column, channel), an HWC image's layout."""
import torch


def patchify(pixels: torch.Tensor, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple:
    """pixels (3, H, W) -> (pixel_values (gh·gw, 3·Tp·P·P), image_grid_thw (1, 3) int64 = [[1, gh, gw]])."""
    C, H, W = pixels.shape
    P, m, Tp = patch_size, merge_size, temporal_patch_size
    gh, gw = H // P, W // P  # the patch grid
    x = pixels.permute(1, 2, 0)  # (H, W, C): the usual image layout
    x = x.reshape(gh // m, m, P, gw // m, m, P, C)  # (block row, row in block, y, block col, col in block, x, C)
    x = x.permute(0, 3, 1, 4, 2, 5, 6)  # (gh/m, gw/m, m, m, P, P, C)
    x = x.unsqueeze(4).expand(-1, -1, -1, -1, Tp, -1, -1, -1)  # (…, Tp, P, P, C)
    return x.reshape(gh * gw, C * Tp * P * P), torch.tensor([[1, gh, gw]])
