"""Problem 219, reference solution: the greedy accept step of speculative decoding."""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    """Keep the guesses the main model agrees with, up to the first disagreement, then its own next token."""
    B, k = drafts.shape
    target = logits.argmax(-1)  # (B, k + 1): the main model's pick after each fed position
    agree = (drafts == target[:, :k]).long().cumprod(1)  # (B, k): 1 while every guess so far agreed
    n = agree.sum(1)  # (B,): the accepted guesses, row by row
    pos = torch.arange(k + 1, device=drafts.device)[None, :]  # (1, k + 1)
    guesses = torch.cat([drafts, drafts.new_full((B, 1), -1)], 1)  # (B, k + 1), a last column that is never kept
    tokens = torch.where(pos < n[:, None], guesses, torch.where(pos == n[:, None], target, -1))
    return tokens, n
