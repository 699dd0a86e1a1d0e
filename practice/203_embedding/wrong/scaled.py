# expect: WA scaled
"""A wrong solution to problem 203: Gemma's embedding scale."""
import torch


def embed(ids, E):
    return E[ids] * E.shape[1] ** 0.5


def tied_logits(h, E):
    return h @ E.T
