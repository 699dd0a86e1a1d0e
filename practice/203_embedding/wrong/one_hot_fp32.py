# expect: WA wrong_dtype
"""A wrong solution to problem 203: one_hot matmul in fp32, not cast back."""
import torch


def embed(ids, E):
    return torch.nn.functional.one_hot(ids, E.shape[0]).float() @ E.float()


def tied_logits(h, E):
    return h @ E.T
