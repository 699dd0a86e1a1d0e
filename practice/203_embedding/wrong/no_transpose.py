# expect: RE transpose
"""A wrong solution to problem 203: h @ E without the transpose."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    return h @ E
