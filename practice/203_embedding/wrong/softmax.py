# expect: WA softmax
"""A wrong solution to problem 203: returns probabilities."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    return torch.softmax(h @ E.T, dim=-1)
