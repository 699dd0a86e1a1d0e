# expect: WA
"""A wrong solution to problem 202: returns millions as floats."""


def count_parameters(config: dict) -> dict[str, int]:
    """config: the text config as a dict (HF field names). Returns the parameter count of each part:
    {"embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total"} -> int.
    """
    c = config
    d, V, I = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    H, Hkv, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    n_linear = c["layer_types"].count("linear_attention")  # the list decides, not full_attention_interval
    n_full = c["layer_types"].count("full_attention")
    n_layers = len(c["layer_types"])

    conv = 2 * Hk * dk + Hv * dv  # channels of q, k, v
    linear = (conv * d  # in_proj_qkv
              + Hv * dv * d  # in_proj_z, the gate
              + 2 * Hv * d  # in_proj_b and in_proj_a: one number per value head
              + conv * K  # depthwise conv1d, no bias
              + 2 * Hv  # dt_bias and A_log
              + dv  # the gated norm's weight, shared by the value heads
              + d * Hv * dv)  # out_proj
    full = (2 * H * D * d  # q_proj: a query and an output gate per head
            + 2 * Hkv * D * d  # k_proj, v_proj
            + d * H * D  # o_proj
            + 2 * D)  # q_norm and k_norm, shared by the heads
    parts = {
        "embedding": V * d,
        "lm_head": 0 if c.get("tie_word_embeddings", False) else V * d,
        "linear_attention": n_linear * linear,
        "full_attention": n_full * full,
        "mlp": n_layers * 3 * d * I,
        "norms": (2 * n_layers + 1) * d,  # two per layer and the final one
    }
    parts["total"] = sum(parts.values())
    return {k: v / 1e6 for k, v in parts.items()}
