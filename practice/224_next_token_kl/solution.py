"""Problem 224, reference solution: how far a model's next-token distributions are from a reference's."""
import torch


def next_token_kl(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p_ref ‖ p) at every position, p_ref = softmax(ref_logits), p = softmax(logits) over the last dimension, in
    fp64. ref_logits, logits: (..., V). Returns (...) fp64."""
    log_p_ref = torch.log_softmax(ref_logits.double(), dim=-1)  # x − logsumexp(x): finite wherever x is
    log_p = torch.log_softmax(logits.double(), dim=-1)
    return (log_p_ref.exp() * (log_p_ref - log_p)).sum(dim=-1)  # a term with p_ref = 0 is 0 · (finite) = 0


def top1_agreement(ref_logits: torch.Tensor, logits: torch.Tensor) -> float:
    """The fraction of positions where both pick the same most likely token (argmax over the last dimension).
    ref_logits, logits: (..., V). Returns a Python float in [0, 1]."""
    same = ref_logits.argmax(dim=-1) == logits.argmax(dim=-1)  # (...): one bool per position
    return same.double().mean().item()
