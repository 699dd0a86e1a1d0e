"""Token embedding and the output head.

A token id picks one row of the embedding table E (V, d). At the other end of the model a table of the same shape
turns a hidden vector h back into one score per token: logits = h · Eᵀ. Qwen3.5-0.8B ties the two (the file stores
E once and the head reuses it); a size with an untied head stores a separate lm_head.weight (config.json's
tie_word_embeddings says which). Qwen3.5 does not scale the embedding (Gemma multiplies it by √d).
"""
import torch
import torch.nn as nn

from qwen.lang import tr


class Embedding(nn.Module):
    """ids (B, T) -> vectors (B, T, d): a row lookup, nothing more."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))  # E: (V, d), loaded from embed_tokens.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, self.weight.shape[0])
        return self.weight[ids]  # (B, T) -> (B, T, d)


def check_ids(ids: torch.Tensor, V: int) -> None:
    """weight[-1] would silently return the last row (negative indices wrap), so both ends are checked."""
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        low, high = ids.min(), ids.max()
        raise IndexError(tr(f"token ids must lie in [0, {V}), got {low}..{high}",
                            f"token id 必须在 [0, {V}) 之内，实际是 {low}..{high}"))


def head_logits(h: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
    """h (..., d) · headᵀ (d, V) -> logits (..., V): the score of token v is the dot product of h with row v of the
    head, which is the embedding table E when the weights are tied (0.8B) and lm_head.weight otherwise."""
    return h @ head.T
