"""A wrong solution to problem 213. The residual taken from the normalised copy."""
import torch

from practice.assembly import MIXERS, mlp, rms_norm  # noqa: F401 (the given parts)


def decoder_layer(x, p, kind, eps):
    x = rms_norm(x, p["input_layernorm"], eps)
    h = x + MIXERS[kind](x, p["mixer"])
    n = rms_norm(h, p["post_attention_layernorm"], eps)
    return n + mlp(n, p["mlp"])


def hybrid_stack(x, layers, layer_types, final_norm, eps):
    for p, kind in zip(layers, layer_types):
        x = decoder_layer(x, p, kind, eps)
    return rms_norm(x, final_norm, eps)
