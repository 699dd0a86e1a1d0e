# expect: WA
"""A wrong solution to problem 205: writes the results back into the caller's dict."""
import torch

ZERO_CENTRED = ("input_layernorm", "post_attention_layernorm", "q_norm", "k_norm")


def _zero_centred(name):
    module = name.rsplit(".", 1)[0]  # "layers.3.self_attn.q_norm.weight" -> "layers.3.self_attn.q_norm"
    # the final norm is "norm.weight"; "layers.i.linear_attn.norm.weight" is the gated norm, already plain
    return name == "norm.weight" or module.rsplit(".", 1)[-1] in ZERO_CENTRED


def centred_to_plain(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A new dict: each zero-centred norm weight w becomes 1 + w (computed and returned in fp32); every other
    tensor is returned unchanged. The input dict and its tensors must not change."""
    # fp32, as the model itself computes 1 + w: in bf16 the sum would round small offsets away
    return {k: 1 + v.float() if _zero_centred(k) else v for k, v in state.items()}


def plain_to_centred(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The way back: each of those norm weights p becomes p - 1 (in fp32); every other tensor is unchanged."""
    for k in list(state):
        if _zero_centred(k):
            state[k] = state[k].float() - 1
    return state
