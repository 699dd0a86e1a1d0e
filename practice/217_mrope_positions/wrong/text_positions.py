"""A wrong solution to problem 217. Plain RoPE positions: 0, 1, 2, … on all three rows, images or not."""
import torch


def position_ids(input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None, mask: torch.Tensor | None,
                 image_token_id: int) -> torch.Tensor:
    """input_ids (B, T) int64 with one <|image_pad|> per merged token; image_grid_thw (n, 3) of the images in reading
    order, or None; mask (B, T) (1 real, 0 left padding) or None -> positions (3, B, T) int64, 0 at padding."""
    B, T = input_ids.shape
    real = torch.ones(B, T, dtype=torch.long) if mask is None else mask.long()
    p = (real.cumsum(-1) - 1).clamp_min(0) * real  # 0, 1, 2, … over the real tokens, 0 at padding
    return p[None].expand(3, -1, -1).clone()
