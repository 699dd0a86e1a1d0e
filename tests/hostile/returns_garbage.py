# expect: WA case=1
"""Returns a generator, then a string, then a numpy array: not tensors."""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps=1e-6):
    return (v for v in x)


def gated_rms_norm(x, gate, weight, eps=1e-6):
    return "a tensor, honestly"


def l2norm(x, eps=1e-6):
    return x.numpy()
