"""Problem 205: convert RMSNorm weights between the zero-centred convention (1 + w) and the plain one (w).

Read the statement: python practice/judge.py show 205   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 205
"""
import torch


def centred_to_plain(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A new dict: each zero-centred norm weight w becomes 1 + w (computed and returned in fp32); every other
    tensor is returned unchanged. The input dict and its tensors must not change."""
    raise NotImplementedError("centred_to_plain")


def plain_to_centred(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The way back: each of those norm weights p becomes p - 1 (in fp32); every other tensor is unchanged."""
    raise NotImplementedError("plain_to_centred")
