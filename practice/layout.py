"""Every tensor of the Qwen3.5 text model, by name and shape, from the config alone.

The one parameter-count formula of the course: chapter 1 counts with it (its printed shape formulas,
book/ch01.py FORMULAS, are tested against it), it is the oracle of problem 202, and it generates problem 205's
state dicts. Names are the checkpoint's, with the
`model.language_model.` prefix stripped (as qwen.weights.load_weights gives them). tests/test_practice.py proves
this list equal, name by name and shape by shape, to transformers' Qwen3_5ForCausalLM built on the meta device,
and to the tensors of the synthetic checkpoint.
"""

PARTS = ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total")
ZERO_CENTRED = ("input_layernorm", "post_attention_layernorm", "q_norm", "k_norm")  # plus the final `norm`


def tensor_shapes(cfg):
    """{name: shape} for a text config given as a dict of the HF field names."""
    d, V, I = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    H, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    Hk, Hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, K = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], cfg["linear_conv_kernel_dim"]
    conv = 2 * Hk * dk + Hv * dv  # q, k and v channels all pass through the depthwise conv
    shapes = {"embed_tokens.weight": (V, d)}
    for i, kind in enumerate(cfg["layer_types"]):
        p = f"layers.{i}."
        if kind == "linear_attention":
            shapes.update({
                p + "linear_attn.in_proj_qkv.weight": (conv, d),
                p + "linear_attn.in_proj_z.weight": (Hv * dv, d),  # the output gate
                p + "linear_attn.in_proj_b.weight": (Hv, d),  # β, one per value head
                p + "linear_attn.in_proj_a.weight": (Hv, d),  # decay input, one per value head
                p + "linear_attn.conv1d.weight": (conv, 1, K),  # depthwise, no bias
                p + "linear_attn.dt_bias": (Hv,),
                p + "linear_attn.A_log": (Hv,),
                p + "linear_attn.norm.weight": (dv,),  # gated RMSNorm, shared by all value heads
                p + "linear_attn.out_proj.weight": (d, Hv * dv),
            })
        elif kind == "full_attention":
            shapes.update({
                p + "self_attn.q_proj.weight": (2 * H * D, d),  # query and output gate, interleaved per head
                p + "self_attn.k_proj.weight": (Hkv * D, d),
                p + "self_attn.v_proj.weight": (Hkv * D, d),
                p + "self_attn.o_proj.weight": (d, H * D),
                p + "self_attn.q_norm.weight": (D,),  # per head, shared by all heads
                p + "self_attn.k_norm.weight": (D,),
            })
        else:
            raise ValueError(f"layer {i}: unknown layer type {kind!r}")
        shapes.update({
            p + "mlp.gate_proj.weight": (I, d),
            p + "mlp.up_proj.weight": (I, d),
            p + "mlp.down_proj.weight": (d, I),
            p + "input_layernorm.weight": (d,),
            p + "post_attention_layernorm.weight": (d,),
        })
    shapes["norm.weight"] = (d,)
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (V, d)
    return shapes


def part_of(name):
    """Which of PARTS a tensor belongs to."""
    if name == "embed_tokens.weight":
        return "embedding"
    if name == "lm_head.weight":
        return "lm_head"
    if ".linear_attn." in name:
        return "linear_attention"
    if ".self_attn." in name:
        return "full_attention"
    if ".mlp." in name:
        return "mlp"
    return "norms"  # input_layernorm, post_attention_layernorm, the final norm


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def count_by_part(shapes):
    counts = dict.fromkeys(PARTS, 0)
    for name, shape in shapes.items():
        counts[part_of(name)] += numel(shape)
    counts["total"] = sum(v for k, v in counts.items() if k != "total")
    return counts


def is_zero_centred(name):
    """True for the RMSNorm weights stored as w - 1: the per-layer norms, q/k norms and the final norm."""
    module = name.rsplit(".", 1)[0]
    return name == "norm.weight" or module.rsplit(".", 1)[-1] in ZERO_CENTRED
