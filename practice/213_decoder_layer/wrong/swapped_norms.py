"""A wrong solution to problem 213. The two norms' weights swapped: post_attention_layernorm before the mixer."""
import torch

from practice.assembly import MIXERS, mlp, rms_norm  # noqa: F401 (the given parts)


def decoder_layer(x, p, kind, eps):
    h = x + MIXERS[kind](rms_norm(x, p["post_attention_layernorm"], eps), p["mixer"])
    return h + mlp(rms_norm(h, p["input_layernorm"], eps), p["mlp"])


def hybrid_stack(x, layers, layer_types, final_norm, eps):
    for p, kind in zip(layers, layer_types):
        x = decoder_layer(x, p, kind, eps)
    return rms_norm(x, final_norm, eps)
