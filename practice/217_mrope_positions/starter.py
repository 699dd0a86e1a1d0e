"""Problem 217: the 3-D (time, row, column) M-RoPE positions of a prompt with images, as get_rope_index.

Read the statement: python practice/judge.py show 217   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 217
"""
import torch


def position_ids(input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None, mask: torch.Tensor | None,
                 image_token_id: int) -> torch.Tensor:
    """input_ids (B, T) int64 with one <|image_pad|> per merged token; image_grid_thw (n, 3) of the images in reading
    order, or None; mask (B, T) (1 real, 0 left padding) or None -> positions (3, B, T) int64, 0 at padding.

    Text: the same position p on all three rows, p counting on. An image of gh × gw patches starting at p: token
    (i, j) of its (gh/2) × (gw/2) merged grid, row by row, gets (p, p + i, p + j); the text after it continues
    from the image's largest position + 1.
    """
    raise NotImplementedError("position_ids")
