"""An image in the prompt: its placeholder tokens, where the tower's tokens go, and the 3-D M-RoPE positions.

In the prompt an image is `<|vision_start|>`, one `<|image_pad|>` per merged token, `<|vision_end|>`; the pads'
embeddings are replaced by the vision tower's outputs (qwen/vision.py). Their 3-D M-RoPE positions (time, row,
column) all start where the text stopped; the text after the image continues from the image's largest position + 1,
not from its token count. This is the text model's side of an image (qwen/model.py uses it): it needs the tower's
token ids and merge size, never the tower itself.
Source: transformers' Qwen3_5Model.get_rope_index and get_placeholder_mask.
"""
from collections.abc import Sequence

import torch


def tokens_per_image(image_grid_thw: torch.Tensor, merge_size: int = 2) -> list[int]:
    """Merged tokens of each image: t·h·w / m²."""
    return [t * h * w // merge_size ** 2 for t, h, w in image_grid_thw.tolist()]


def expand_image_tokens(ids: Sequence[int], image_grid_thw: torch.Tensor, image_token_id: int = 248056,
                        merge_size: int = 2) -> list[int]:
    """A rendered prompt's ids (a list, one `<|image_pad|>` per image) -> the same with each pad repeated as many
    times as its image has merged tokens. Ids: the checkpoint's (VisionConfig.image_token_id, spatial_merge_size)."""
    counts = tokens_per_image(image_grid_thw, merge_size)
    pads = [i for i, t in enumerate(ids) if t == image_token_id]
    if len(pads) != len(counts):
        raise ValueError(f"the prompt has {len(pads)} <|image_pad|> tokens for {len(counts)} images: render one pad "
                         f"per image (chat render writes <|vision_start|><|image_pad|><|vision_end|>)")
    out, start = [], 0
    for i, n in zip(pads, counts):
        out += list(ids[start:i]) + [image_token_id] * n
        start = i + 1
    return out + list(ids[start:])


def position_ids(input_ids: torch.Tensor, image_grid_thw: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                 image_token_id: int = 248056, merge_size: int = 2) -> torch.Tensor:
    """The (t, h, w) M-RoPE positions (3, B, T) of a prompt whose ids hold one <|image_pad|> per merged token.
    Text tokens: p on all three rows, p counting on from where the last text or image stopped. An image of gh × gw
    patches starting at p: rows p + (0, …), p + i, p + j for merged token (i, j), row-major; the text after it
    continues from p + max(gh, gw)/m, its largest position + 1. Images are taken from image_grid_thw in order,
    batch row by batch row. With a (B, T) mask (left padding), pads are skipped and get position 0."""
    B, T = input_ids.shape
    grids = iter([] if image_grid_thw is None else image_grid_thw.tolist())
    out = torch.zeros(3, B, T, dtype=torch.long, device=input_ids.device)
    for b in range(B):
        keep = torch.ones(T, dtype=torch.bool) if mask is None else mask[b].bool().cpu()
        ids = input_ids[b].cpu()[keep].tolist()
        rows, p, i = [], 0, 0
        while i < len(ids):
            if ids[i] != image_token_id:  # a run of text: the same position on the three axes
                j = i
                while j < len(ids) and ids[j] != image_token_id:
                    j += 1
                rows.append(torch.arange(p, p + j - i).expand(3, -1))  # (3, j − i)
                p, i = p + j - i, j
                continue
            t, h, w = next(grids, (0, 0, 0))
            h, w = h // merge_size, w // merge_size  # merged tokens per column and per row
            n = t * h * w
            if n == 0 or ids[i:i + n] != [image_token_id] * n:
                raise ValueError(f"batch row {b}: the <|image_pad|> tokens at {i} do not match image_grid_thw "
                                 f"(expand each image's pad with expand_image_tokens first)")
            tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
            rows.append(torch.stack((tt, hh, ww)).reshape(3, n) + p)  # (3, n): time, row, column
            p, i = p + max(h, w), i + n  # text resumes after the image's largest position
        if rows:
            out[:, b, keep.to(out.device)] = torch.cat(rows, 1).to(out.device)
    return out


def rope_delta(positions, mask=None):
    """(B, 1): how far each row's next position is ahead of its token count (max position + 1 − real tokens). The
    tokens generated after the prompt take position (count of real tokens so far) + delta on all three rows."""
    n = positions.shape[-1] if mask is None else mask.long().sum(-1)
    return (positions.amax(dim=(0, 2)) + 1 - torch.as_tensor(n, device=positions.device)).view(-1, 1)


def place_images(embeds, input_ids, image_embeds, image_token_id=248056):
    """embeds (B, T, d) with the rows at <|image_pad|> positions replaced by image_embeds (n, d), in reading order
    (batch row by batch row), as transformers' masked_scatter. The count must match exactly."""
    pads = input_ids == image_token_id  # (B, T)
    if int(pads.sum()) != image_embeds.shape[0]:
        raise ValueError(f"the prompt has {int(pads.sum())} <|image_pad|> tokens but the images give "
                         f"{image_embeds.shape[0]} merged tokens: expand the pads with expand_image_tokens")
    out = embeds.clone()
    out[pads] = image_embeds.to(embeds.dtype)
    return out
