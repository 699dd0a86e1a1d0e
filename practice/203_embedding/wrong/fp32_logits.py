# expect: WA wrong_dtype
"""A wrong solution to problem 203: logits in fp32 for bf16 inputs."""
import torch


def embed(ids, E):
    return E[ids]


def tied_logits(h, E):
    return h.float() @ E.float().T
