"""Token embedding and the tied output head.

A token id picks one row of the embedding table E (vocab, D). At the other end of the model the same table turns a
hidden vector h back into one score per token: logits = h · Eᵀ. Qwen3.5-0.8B ties the two (the file stores E once);
the larger sizes keep a separate lm_head with the same shape. Qwen3.5 does not scale the embedding (Gemma does).
"""
import torch
import torch.nn as nn


class Embedding(nn.Module):
    """ids (B, T) -> vectors (B, T, D): a row lookup, nothing more."""

    def __init__(self, vocab_size, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))  # E: (V, D), loaded from embed_tokens.weight

    def forward(self, ids):
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.weight.shape[0]):
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]}), got {ids.min()}..{ids.max()}")
        return self.weight[ids]  # (B, T) -> (B, T, D)


def tied_logits(h, E):
    """h (..., D) · Eᵀ (D, V) -> logits (..., V): the score of token v is the dot product of h with row v of E."""
    return h @ E.T
