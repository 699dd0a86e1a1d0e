"""Problem 216, reference solution: cut normalised pixels into patches in the order Qwen3.5's vision tower reads."""
import torch


def patchify(pixels: torch.Tensor, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple:
    """pixels (3, H, W) -> (pixel_values (gh·gw, 3·Tp·P·P), image_grid_thw (1, 3) int64 = [[1, gh, gw]])."""
    C, H, W = pixels.shape
    P, m, Tp = patch_size, merge_size, temporal_patch_size
    gh, gw = H // P, W // P  # the patch grid
    x = pixels.reshape(C, gh // m, m, P, gw // m, m, P)  # (C, block row, row in block, y, block col, col in block, x)
    x = x.permute(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, P, P): blocks, then the m·m patches inside a block
    x = x.unsqueeze(5).expand(-1, -1, -1, -1, -1, Tp, -1, -1)  # (…, C, Tp, P, P): a still image, Tp frames
    return x.reshape(gh * gw, C * Tp * P * P), torch.tensor([[1, gh, gw]])
