"""Problem 217: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/mrope.py's position_ids, which tests/test_vision.py proves equal to transformers'
Qwen3_5Model.get_rope_index on text-only, image-first, image-in-the-middle, two-image and left-padded prompts, and
tests/test_practice.py on every case here. Positions are integers: every case is exact.
"""
import torch

from practice.grading import EXACT, Case
from qwen.lang import tr
from qwen.mrope import position_ids as oracle

REAL = (248053, 248056, 248054)  # <|vision_start|>, <|image_pad|>, <|vision_end|> in Qwen3.5's config.json
SMALL = (501, 500, 502)  # a small test checkpoint's ids, read from its config as the real ones are
QWEN2VL = (151652, 151655, 151653)  # Qwen2-VL's: the same prompt layout under other ids
VOCAB = {REAL: 240000, SMALL: 500, QWEN2VL: 151643}  # random text ids stay below the special tokens
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


# (rows of parts, ids, padded: False, True (left padding and its mask) or "ones" (a mask of ones), note)
HIDDEN = [([(9,)], REAL, False, tr("text only: three equal rows, 0 … 8", "只有文本：三行相同，0 … 8")),
          ([((6, 10), 5)], REAL, False, tr("the image first", "图像在开头")),
          ([(3, (8, 6), 4)], REAL, False, tr("an image in the middle, taller than wide", "图像在中间，高大于宽")),
          ([(2, (4, 10), 3, (6, 2), 2)], REAL, False, tr("two images, wide then tall", "两幅图像，先宽后高")),
          ([(5, (6, 6))], REAL, False, tr("the prompt ends with the image", "提示以图像结尾")),
          ([(4, (14, 20), 6)], REAL, False, tr("a 224 × 320 image: 7 × 10 merged tokens",
                                               "一幅 224 × 320 的图像：合并后 7 × 10 个 token")),
          ([(1, (2, 2), 2, (4, 12), 1, (2, 8), 3)], REAL, False, tr("three images, one of a single token",
                                                                    "三幅图像，其中一幅只有一个 token")),
          ([(2, (2, 40), 2)], REAL, False, tr("a strip one token high: 1 × 20", "只有一个 token 高的长条：1 × 20")),
          ([(2, (8, 8), 3)], REAL, False, tr("a square image: 16 tokens, positions up to p + 3",
                                             "方形图像：16 个 token，位置最大到 p + 3")),
          ([(2, (4, 6), 3), (5, (2, 8), 1, (4, 4), 2)], REAL, True, tr("two rows, left padding", "两行，左填充")),
          ([(6,), (1, (6, 4), 2), (3, (4, 4), 2, (2, 6), 1)], REAL, True, tr("three rows, one text only, left padding",
                                                                             "三行，其中一行只有文本，左填充")),
          ([(2, (6, 8), 3), (3, (8, 6), 2)], REAL, "ones", tr("a mask of ones: rows of equal length",
                                                              "全为 1 的掩码：各行等长")),
          ([(3, (10, 6), 4)], SMALL, False, tr("a small checkpoint's image_token_id, 500",
                                               "小检查点的 image_token_id：500")),
          ([(7,), (7,)], REAL, False, tr("text only, two rows of equal length, no mask",
                                         "只有文本，两行等长，没有掩码")),
          ([(4,), (9,)], REAL, True, tr("text only, left padding: the short row counts from 0 after its padding",
                                        "只有文本，左填充：短的那行在填充之后从 0 开始数")),
          ([(8,), (3,), (6,)], REAL, True, tr("text only, three rows, left padding", "只有文本，三行，左填充")),
          ([(2, (4, 6), 1, (2, 4), 2), (3, (6, 6), 2)], QWEN2VL, True,
           tr("Qwen2-VL's image_token_id, 151655: two rows, left padding, two images in the first",
              "Qwen2-VL 的 image_token_id：151655；两行，左填充，第一行有两幅图像"))]


def make_cases(tmp):
    g = torch.Generator().manual_seed(21700)
    cases = []
    for label, rows, note in [("example 1", [(2, (6, 8), 3)],
                               tr("text, a 6 × 8-patch image (3 × 4 tokens), text",
                                  "文本，一幅 6 × 8 个 patch 的图像（3 × 4 个 token），文本")),
                              ("example 2", [(6,)], tr("text only", "只有文本"))]:
        input_ids, grids, _ = batch(g, rows, padded=False)
        cases.append(Case(label, "position_ids", [("input_ids", input_ids), ("image_grid_thw", grids),
                                                  ("mask", None), ("image_token_id", REAL[1])], None, EXACT, 21700,
                          note))
    for n, (rows, ids, padded, note) in enumerate(HIDDEN, 1):
        seed = 21700 + n
        g = torch.Generator().manual_seed(seed)
        input_ids, grids, mask = batch(g, rows, ids, VOCAB[ids], padded)
        if padded == "ones":
            mask = torch.ones_like(input_ids)
        cases.append(Case(f"hidden {n}", "position_ids", [("input_ids", input_ids), ("image_grid_thw", grids),
                                                          ("mask", mask), ("image_token_id", ids[1])],
                          None, EXACT, seed, note))
    for c in cases:
        input_ids, grids, mask, image_id = c.values()
        c.expected = oracle(input_ids, grids, mask=mask, image_token_id=image_id)
    return cases
