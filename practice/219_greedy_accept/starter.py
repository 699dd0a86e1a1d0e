"""Problem 219: the greedy accept step of speculative decoding.

Read the statement: python practice/judge.py show 219   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 219
"""
import torch


def greedy_accept(drafts: torch.Tensor, logits: torch.Tensor) -> tuple:
    """Keep the guesses the main model agrees with, up to the first disagreement, then its own next token.

    drafts: (B, k) int64, the draft's guesses. logits: (B, k + 1, V), the main model's verify pass over
    [last token, guess 1, ..., guess k]: logits[:, i] is what it predicts after position i.
    Returns (tokens (B, k + 1) int64, n (B,) int64): row b's new tokens are tokens[b, :n[b] + 1], the n[b] accepted
    guesses then the main model's token; the rest of the row is -1.
    """
    raise NotImplementedError("greedy_accept")
