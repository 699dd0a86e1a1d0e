"""Problem 217: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/mrope.py's position_ids, which tests/test_vision.py proves equal to transformers'
Qwen3_5Model.get_rope_index on text-only, image-first, image-in-the-middle, two-image and left-padded prompts, and
tests/test_practice.py on every case here. Positions are integers: every case is exact.
"""
import torch

from practice.grading import EXACT, Case
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
          ([(3, (10, 6), 4)], SMALL, False, "a small checkpoint's image_token_id, 500"),
          ([(7,), (7,)], REAL, False, "text only, two rows of equal length, no mask"),
          ([(4,), (9,)], REAL, True, "text only, left padding: the short row counts from 0 after its padding"),
          ([(8,), (3,), (6,)], REAL, True, "text only, three rows, left padding"),
          ([(2, (4, 6), 1, (2, 4), 2), (3, (6, 6), 2)], QWEN2VL, True,
           "Qwen2-VL's image_token_id, 151655: two rows, left padding, two images in the first")]


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
        input_ids, grids, mask = batch(g, rows, ids, VOCAB[ids], padded)
        if padded and "ones" in note:
            mask = torch.ones_like(input_ids)
        cases.append(Case(f"hidden {n}", "position_ids", [("input_ids", input_ids), ("image_grid_thw", grids),
                                                          ("mask", mask), ("image_token_id", ids[1])],
                          None, EXACT, seed, note))
    for c in cases:
        input_ids, grids, mask, image_id = c.values()
        c.expected = oracle(input_ids, grids, mask=mask, image_token_id=image_id)
    return cases
