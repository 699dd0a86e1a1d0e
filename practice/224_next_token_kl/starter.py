"""Problem 224: the next-token KL divergence and top-1 agreement of a model against a reference.

Read the statement: python practice/judge.py show 224   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 224
"""
import torch


def next_token_kl(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p_ref ‖ p) at every position, p_ref = softmax(ref_logits), p = softmax(logits) over the last dimension, in
    fp64. ref_logits, logits: (..., V). Returns (...) fp64."""
    raise NotImplementedError("next_token_kl")


def top1_agreement(ref_logits: torch.Tensor, logits: torch.Tensor) -> float:
    """The fraction of positions where both pick the same most likely token (argmax over the last dimension).
    ref_logits, logits: (..., V). Returns a Python float in [0, 1]."""
    raise NotImplementedError("top1_agreement")
