# expect: RE index
"""A wrong solution to problem 203: counts rows from the end of the table, E[V - ids], which runs off the table."""
import torch


def embed(ids, E):
    return E[E.shape[0] - ids]


def tied_logits(h, E):
    return h @ E.T
