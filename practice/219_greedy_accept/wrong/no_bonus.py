"""A wrong solution to problem 219. Appends the main model's token only after a wrong guess: no bonus token."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    n = torch.zeros(B, dtype=torch.long)
    for b in range(B):
        for i in range(k):
            if drafts[b, i] != target[b, i]:
                tokens[b, i] = target[b, i]  # the correction
                break
            tokens[b, i] = drafts[b, i]
            n[b] += 1
    return tokens, n
