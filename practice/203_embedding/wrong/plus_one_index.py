# expect: WA shifted
"""A wrong solution to problem 203: E[ids + 1]: runs off the end of the table."""
import torch


def embed(ids, E):
    return E[ids + 1]


def tied_logits(h, E):
    return h @ E.T
