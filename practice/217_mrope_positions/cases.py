"""Problem 217: cases, oracle and known mistakes.

Oracle: qwen/mrope.py's position_ids, which tests/test_vision.py proves equal to transformers'
Qwen3_5Model.get_rope_index on text-only, image-first, image-in-the-middle, two-image and left-padded prompts, and
tests/test_practice.py on every case here. Positions are integers: every case is exact.
"""
import torch

from practice.grading import EXACT, Case, Mistake
from qwen.mrope import position_ids as oracle

REAL = (248053, 248056, 248054)  # <|vision_start|>, <|image_pad|>, <|vision_end|> in Qwen3.5's config.json
SMALL = (501, 500, 502)  # a small test checkpoint's ids, read from its config as the real ones are
PAD = 248044  # <|endoftext|>, Qwen3.5's pad token (any id: the mask says which slots are padding)


def prompt(g, parts, ids=REAL, vocab=240000):
    """Text runs (ints: that many random text ids) and images ((gh, gw) patch grids) -> ids, grids."""
    start, pad, end = ids
    out, grids = [], []
    for part in parts:
        if isinstance(part, int):
            out += torch.randint(0, vocab, (part,), generator=g).tolist()
        else:
            gh, gw = part
            out += [start] + [pad] * (gh * gw // 4) + [end]
            grids.append([1, gh, gw])
    return out, grids


def batch(g, rows, ids=REAL, vocab=240000, padded=True):
    """Several prompts, left-padded to one length -> (input_ids, image_grid_thw or None, mask or None)."""
    made = [prompt(g, parts, ids, vocab) for parts in rows]
    T = max(len(p) for p, _ in made)
    input_ids = torch.tensor([[PAD] * (T - len(p)) + p for p, _ in made])
    mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p, _ in made]) if padded else None
    grids = [gr for _, gs in made for gr in gs]
    return input_ids, (torch.tensor(grids) if grids else None), mask


# (rows of parts, ids, padded, note)
HIDDEN = [([(9,)], REAL, False, "text only: three equal rows, 0 … 8"),
          ([((6, 10), 5)], REAL, False, "the image first"),
          ([(3, (8, 6), 4)], REAL, False, "an image in the middle, taller than wide"),
          ([(2, (4, 10), 3, (6, 2), 2)], REAL, False, "two images, wide then tall"),
          ([(5, (6, 6))], REAL, False, "the prompt ends with the image"),
          ([(4, (14, 20), 6)], REAL, False, "a 224 × 320 image: 7 × 10 merged tokens"),
          ([(1, (2, 2), 2, (4, 12), 1, (2, 8), 3)], REAL, False, "three images, one of a single token"),
          ([(2, (2, 40), 2)], REAL, False, "a strip one token high: 1 × 20"),
          ([(2, (8, 8), 3)], REAL, False, "a square image: 16 tokens, positions up to p + 3"),
          ([(2, (4, 6), 3), (5, (2, 8), 1, (4, 4), 2)], REAL, True, "two rows, left padding"),
          ([(6,), (1, (6, 4), 2), (3, (4, 4), 2, (2, 6), 1)], REAL, True, "three rows, one text only, left padding"),
          ([(2, (6, 8), 3), (3, (8, 6), 2)], REAL, True, "a mask of ones: rows of equal length"),
          ([(3, (10, 6), 4)], SMALL, False, "a small checkpoint's image_token_id, 500")]


def make_cases(tmp):
    g = torch.Generator().manual_seed(21700)
    cases = []
    for label, rows, note in [("example 1", [(2, (6, 8), 3)], "text, a 6 × 8-patch image (3 × 4 tokens), text"),
                              ("example 2", [(6,)], "text only")]:
        input_ids, grids, _ = batch(g, rows, padded=False)
        cases.append(Case(label, "position_ids", [("input_ids", input_ids), ("image_grid_thw", grids),
                                                  ("mask", None), ("image_token_id", REAL[1])], None, EXACT, 21700,
                          note))
    for n, (rows, ids, padded, note) in enumerate(HIDDEN, 1):
        seed = 21700 + n
        g = torch.Generator().manual_seed(seed)
        input_ids, grids, mask = batch(g, rows, ids, 500 if ids == SMALL else 240000, padded)
        if padded and "ones" in note:
            mask = torch.ones_like(input_ids)
        cases.append(Case(f"hidden {n}", "position_ids", [("input_ids", input_ids), ("image_grid_thw", grids),
                                                          ("mask", mask), ("image_token_id", ids[1])],
                          None, EXACT, seed, note))
    for c in cases:
        input_ids, grids, mask, image_id = c.values()
        c.expected = oracle(input_ids, grids, mask=mask, image_token_id=image_id)
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _positions(input_ids, grids, mask, image_id, advance="largest", swap=False, time_offset=True, images=True):
    """The positions with one thing changed: where the text resumes, the h and w rows, the image's time row, or
    images not handled at all."""
    B, T = input_ids.shape
    todo = iter([] if grids is None else grids.tolist())
    out = torch.zeros(3, B, T, dtype=torch.long)
    for b in range(B):
        real = torch.ones(T, dtype=torch.bool) if mask is None else mask[b].bool()
        ids = input_ids[b][real].tolist()
        rows, p, i = [], 0, 0
        while i < len(ids):
            if ids[i] != image_id or not images:
                rows.append((p, p, p))
                p, i = p + 1, i + 1
                continue
            t, gh, gw = next(todo)
            h, w = gh // 2, gw // 2
            n = t * h * w
            rows += [(p + k if time_offset else k, p + (c if swap else r), p + (r if swap else c))
                     for k in range(t) for r in range(h) for c in range(w)]
            p += {"largest": max(h, w), "count": n, "patches": max(gh, gw), "largest_only": max(h, w) - 1}[advance]
            i += n
        out[:, b, real] = torch.tensor(rows, dtype=torch.long).T
    return out


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("token_count", "position_ids", lambda *a: _positions(*a, advance="count"),
            _hint("looks like the text after an image continues from its token count (p + h·w): it continues from "
                  "the image's largest position + 1, p + max(h, w) with h × w the merged grid, so an image of 70 "
                  "tokens (7 × 10) moves the text on by 10, not 70",
                  "看起来图像之后的文本从图像的 token 数继续（p + h·w）：应从图像的最大位置 + 1 继续，"
                  "即 p + max(h, w)，"
                  "h × w 是合并后的网格，所以 70 个 token（7 × 10）的图像只让文本前进 10，而不是 70")),
    Mistake("hw_swapped", "position_ids", lambda *a: _positions(*a, swap=True),
            _hint("looks like the height and width rows are swapped: row 1 holds p + the token's row i in the merged "
                  "grid, row 2 holds p + its column j, and the tokens go row by row (j fastest)",
                  "看起来高和宽两行颠倒了：第 1 行是 p + token 在合并网格中的行号 i，第 2 行是 p + 列号 j，"
                  "token 逐行排列"
                  "（j 变化最快）")),
    Mistake("unmerged_grid", "position_ids", lambda *a: _positions(*a, advance="patches"),
            _hint("looks like the text after an image continues from p + max(gh, gw) of the patch grid: "
                  "image_grid_thw counts 16 × 16 patches, and the merger joins 2 × 2 of them into one token, so the "
                  "image's grid in tokens is (gh/2, gw/2) and the text continues from p + max(gh, gw)/2",
                  "看起来图像之后的文本从块网格的 p + max(gh, gw) 继续：image_grid_thw 数的是 16 × 16 的块，合并器把 "
                  "2 × 2 个块合成一个 token，所以图像以 token 计的网格是 (gh/2, gw/2)，"
                  "文本应从 p + max(gh, gw)/2 继续")),
    Mistake("no_plus_one", "position_ids", lambda *a: _positions(*a, advance="largest_only"),
            _hint("looks like the text after an image starts at the image's largest position: it starts one after "
                  "it, at p + max(h, w) (the largest is p + max(h, w) − 1)",
                  "看起来图像之后的文本从图像的最大位置开始：应从它的下一个开始，即 p + max(h, w)（最大位置是 "
                  "p + max(h, w) − 1）")),
    Mistake("time_not_offset", "position_ids", lambda *a: _positions(*a, time_offset=False),
            _hint("looks like the image's time row starts at 0: all three rows of an image start where the text "
                  "stopped, so a still image's tokens all have time p",
                  "看起来图像的时间那一行从 0 开始：图像的三行都从文本停下的地方开始，"
                  "所以静止图像的所有 token 时间都是 p")),
    Mistake("text_positions", "position_ids", lambda *a: _positions(*a, images=False),
            _hint("looks like every token, image tokens too, got 0, 1, 2, … on all three rows, the positions of "
                  "text: an image's tokens get (p, p + i, p + j) for token (i, j) of its merged grid",
                  "看起来每个 token（包括图像 token）三行都是 0, 1, 2, …，那是文本的位置："
                  "图像合并网格中的 token (i, j) "
                  "应得到 (p, p + i, p + j)")),
    Mistake("mask_ignored", "position_ids", lambda ids, grids, mask, image_id: oracle(ids, grids, None, image_id),
            _hint("looks like the padding was counted: with a mask, only the real tokens (mask 1) get positions, "
                  "counted from 0 at the first real token; padded slots get 0",
                  "看起来把填充也算进去了：有 mask 时只有真实的 token（mask 为 1）有位置，"
                  "从第一个真实 token 的 0 开始数；"
                  "填充的位置填 0")),
]
