"""Problem 224, reference solution: how far a model's next-token distributions are from a reference's."""
import torch


def next_token_kl(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) at every position, p = softmax(ref_logits) the reference's distribution, q = softmax(logits) the
    quantized model's, over the last dimension, in fp64. ref_logits, logits: (..., V). Returns (...) fp64."""
    log_p = torch.log_softmax(ref_logits.double(), dim=-1)  # x − logsumexp(x): finite wherever x is
    log_q = torch.log_softmax(logits.double(), dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)  # a term with p = 0 is 0 · (finite) = 0


def top1_agreement(ref_logits: torch.Tensor, logits: torch.Tensor) -> float:
    """The fraction of positions where both pick the same most likely token (argmax over the logits' last dimension,
    the first index on a tie). ref_logits, logits: (..., V). Returns a Python float in [0, 1]."""
    same = ref_logits.argmax(dim=-1) == logits.argmax(dim=-1)  # (...): one bool per position
    return same.double().mean().item()
