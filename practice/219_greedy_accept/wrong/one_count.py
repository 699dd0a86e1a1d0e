"""A wrong solution to problem 219. Keeps the fewest accepted guesses in every row, as qwen's batched loop does."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    m = int((drafts == target[:, :k]).long().cumprod(1).sum(1).min())
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    tokens[:, :m] = drafts[:, :m]
    tokens[:, m] = target[:, m]
    return tokens, torch.full((B,), m, dtype=torch.long)
