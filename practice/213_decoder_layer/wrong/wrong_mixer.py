"""A wrong solution to problem 213. Attention on linear_attention layers and the other way round."""
import torch

from practice.assembly import MIXERS, full_mixer, linear_mixer, mlp, rms_norm  # noqa: F401


def decoder_layer(x, p, kind, eps):
    mixer = full_mixer if kind == "linear_attention" else linear_mixer
    h = x + mixer(rms_norm(x, p["input_layernorm"], eps), p["mixer"])
    return h + mlp(rms_norm(h, p["post_attention_layernorm"], eps), p["mlp"])


def hybrid_stack(x, layers, layer_types, final_norm, eps):
    for p, kind in zip(layers, layer_types):
        x = decoder_layer(x, p, kind, eps)
    return rms_norm(x, final_norm, eps)
