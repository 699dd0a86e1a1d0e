# expect: WA no_correction
"""A wrong solution to problem 219. Keeps the accepted guesses and nothing else."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    n = (drafts == target[:, :k]).long().cumprod(1).sum(1)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    for b in range(B):
        tokens[b, :n[b]] = drafts[b, :n[b]]
    return tokens, n
