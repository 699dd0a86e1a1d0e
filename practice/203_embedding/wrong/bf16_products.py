# expect: WA bf16_products
"""A wrong solution to problem 203: elementwise products summed in the input dtype."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    return (h.unsqueeze(-2) * E).sum(-1)
