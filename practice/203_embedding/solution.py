"""Problem 203, reference solution: the embedding lookup and the tied output head."""
import torch


def embed(ids: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """ids: (...) int64 token ids in [0, V); E: (V, d). Returns (..., d): row ids[i] of E for each id, E's dtype."""
    return E[ids]  # (...) -> (..., d); no scaling by sqrt(d) in Qwen3.5


def tied_logits(h: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """h: (..., d); E: (V, d), same dtype. Returns (..., V) in that dtype: logit v = h · E[v]."""
    return h @ E.T  # (..., d) @ (d, V) -> (..., V); a matmul accumulates in fp32 even for bf16
