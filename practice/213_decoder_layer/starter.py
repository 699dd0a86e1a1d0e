"""Problem 213: the decoder layer and the hybrid stack.

Read the statement: python practice/judge.py show 213   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 213
"""
import torch

from practice.assembly import MIXERS, mlp, rms_norm  # noqa: F401 (the given parts)


def decoder_layer(x: torch.Tensor, p: dict, kind: str, eps: float) -> torch.Tensor:
    """One pre-norm layer: x + mixer(norm(x)), then + mlp(norm(·)). p: {"input_layernorm", "post_attention_layernorm",
    "mixer": {...}, "mlp": {...}}; kind: "linear_attention" or "full_attention". x: (B, T, d) -> (B, T, d)."""
    raise NotImplementedError("decoder_layer")


def hybrid_stack(x: torch.Tensor, layers: list, layer_types: list, final_norm: torch.Tensor,
                 eps: float) -> torch.Tensor:
    """Every layer in order (layer i of kind layer_types[i]), then the final RMSNorm. x: (B, T, d) -> (B, T, d)."""
    raise NotImplementedError("hybrid_stack")
