"""Problem 203: the embedding lookup and the tied output head.

Read the statement: python practice/judge.py show 203   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 203
"""
import torch


def embed(ids: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """ids: (...) int64 token ids in [0, V); E: (V, d). Returns (..., d): row ids[i] of E for each id, E's dtype."""
    raise NotImplementedError("embed")


def tied_logits(h: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """h: (..., d); E: (V, d), same dtype. Returns (..., V) in that dtype: logit v = h · E[v]."""
    raise NotImplementedError("tied_logits")
