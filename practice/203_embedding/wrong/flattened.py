# expect: WA
"""A wrong solution to problem 203: flattens the batch dimensions (a shape error, no named hint)."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    return h.reshape(-1, h.shape[-1]) @ E.T
