# expect: WA one_based
"""A wrong solution to problem 203: ids treated as 1-based."""
import torch


def embed(ids, E):
    return E[ids - 1]


def tied_logits(h, E):
    return h @ E.T
