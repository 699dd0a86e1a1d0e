# expect: WA grid_swapped
"""A wrong solution to problem 216. image_grid_thw written (1, width, height), as PIL's image.size is."""
import torch


def patchify(pixels: torch.Tensor, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple:
    """pixels (3, H, W) -> (pixel_values (gh·gw, 3·Tp·P·P), image_grid_thw (1, 3) int64 = [[1, gh, gw]])."""
    C, H, W = pixels.shape
    P, m, Tp = patch_size, merge_size, temporal_patch_size
    gh, gw = H // P, W // P  # the patch grid
    x = pixels.reshape(C, gh // m, m, P, gw // m, m, P)  # (C, block row, row in block, y, block col, col in block, x)
    x = x.permute(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, P, P)
    x = x.unsqueeze(5).expand(-1, -1, -1, -1, -1, Tp, -1, -1)  # (…, C, Tp, P, P)
    return x.reshape(gh * gw, C * Tp * P * P), torch.tensor([[1, gw, gh]])
