"""Problem 224: the next-token KL divergence and top-1 agreement of a model against a reference.

Read the statement: python practice/judge.py show 224   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 224
"""
import torch


def next_token_kl(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) at every position, p = softmax(ref_logits) the reference's distribution, q = softmax(logits) the
    quantized model's, over the last dimension, in fp64. ref_logits, logits: (..., V). Returns (...) fp64."""
    raise NotImplementedError("next_token_kl")


def top1_agreement(ref_logits: torch.Tensor, logits: torch.Tensor) -> float:
    """The fraction of positions where both pick the same most likely token (argmax over the logits' last dimension,
    the first index on a tie). ref_logits, logits: (..., V). Returns a Python float in [0, 1]."""
    raise NotImplementedError("top1_agreement")
