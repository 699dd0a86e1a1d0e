# expect: WA mask_ignored
"""A wrong solution to problem 217. The mask ignored: the left padding takes positions like text."""
import torch


def position_ids(input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None, mask: torch.Tensor | None,
                 image_token_id: int) -> torch.Tensor:
    """input_ids (B, T) int64 with one <|image_pad|> per merged token; image_grid_thw (n, 3) of the images in reading
    order, or None; mask (B, T) (1 real, 0 left padding) or None -> positions (3, B, T) int64, 0 at padding."""
    B, T = input_ids.shape
    grids = iter([] if image_grid_thw is None else image_grid_thw.tolist())
    out = torch.zeros(3, B, T, dtype=torch.long)
    for b in range(B):
        real = torch.ones(T, dtype=torch.bool)  # every slot
        ids = input_ids[b][real].tolist()
        rows, p, i = [], 0, 0  # rows: (t, h, w) of each real token; p: the next free position
        while i < len(ids):
            if ids[i] != image_token_id:  # text: the same position on all three axes
                rows.append((p, p, p))
                p, i = p + 1, i + 1
                continue
            t, h, w = next(grids)
            h, w = h // 2, w // 2  # merged tokens per column and per row: the merger joins 2 × 2 patches
            rows += [(p + k, p + r, p + c) for k in range(t) for r in range(h) for c in range(w)]
            p, i = p + max(h, w), i + t * h * w  # text resumes after the image's largest position
        out[:, b, real] = torch.tensor(rows, dtype=torch.long).T
    return out
