"""A wrong solution to problem 203: E · hᵀ."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    if h.dim() == 1:
        return E @ h
    return torch.matmul(E, h.transpose(-1, -2))
