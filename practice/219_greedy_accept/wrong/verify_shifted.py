"""A wrong solution to problem 219. Reads logits[:, i + 1] as the check of drafts[:, i] (one position late)."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    B, k = drafts.shape
    target = logits.argmax(-1)
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    n = torch.zeros(B, dtype=torch.long)
    for b in range(B):
        i = 0
        while i < k and drafts[b, i] == target[b, i + 1]:
            tokens[b, i] = drafts[b, i]
            i += 1
        tokens[b, i] = target[b, min(i + 1, k)]
        n[b] = i
    return tokens, n
