"""A wrong solution to problem 219. Right tokens and counts, but the unused places hold 0 (a real token id), not -1
(no named hint)."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    n = (drafts == target[:, :k]).long().cumprod(1).sum(1)
    tokens = torch.zeros(B, k + 1, dtype=torch.long)
    for b in range(B):
        tokens[b, :n[b]] = drafts[b, :n[b]]
        tokens[b, n[b]] = target[b, n[b]]
    return tokens, n
