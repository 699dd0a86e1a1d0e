"""A wrong solution to problem 219. Counts every guess that agrees, also those after the first wrong one."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    n = (drafts == target[:, :k]).long().sum(1)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    for b in range(B):
        tokens[b, :n[b]] = drafts[b, :n[b]]
        tokens[b, n[b]] = target[b, n[b]]
    return tokens, n
