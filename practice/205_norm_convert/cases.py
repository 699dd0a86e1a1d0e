"""Problem 205: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: hand math, 1 + w and p - 1 in fp32 for the names qwen/sizes.py marks zero-centred. Both are a single
correctly rounded fp32 operation, so every right answer is bit-exact. tests/test_practice.py checks that the plain
weights give transformers' Qwen3_5RMSNorm output bit for bit ("the outputs stay equal") and that the names
marked zero-centred are exactly transformers' Qwen3_5RMSNorm modules.
"""
import random

import torch

from practice.grading import EXACT, Case
from qwen.lang import tr
from qwen.sizes import is_zero_centred, tensor_shapes


def oracle_to_plain(state):
    return {k: 1 + v.float() if is_zero_centred(k) else v.clone() for k, v in state.items()}


def oracle_to_centred(state):
    return {k: v.float() - 1 if is_zero_centred(k) else v.clone() for k, v in state.items()}


def small_config(rng):
    L = rng.randint(1, 6)
    return dict(vocab_size=rng.randint(20, 60), hidden_size=rng.choice([8, 16]), intermediate_size=24,
                num_attention_heads=2, num_key_value_heads=1, head_dim=rng.choice([4, 8]),
                linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=4,
                linear_value_head_dim=rng.choice([4, 6]), linear_conv_kernel_dim=4,
                layer_types=[rng.choice(["linear_attention", "full_attention"]) for _ in range(L)],
                tie_word_embeddings=rng.random() < 0.5)


def state_dict(g, cfg, dtype, plain):
    """Random weights with the checkpoint's names. Zero-centred norms hold small offsets, some of them tiny
    (bf16 cannot hold 1 + 1e-6, fp32 barely can); plain=True gives them as 1 + w already."""
    state = {}
    for name, shape in tensor_shapes(cfg).items():
        if is_zero_centred(name):
            w = torch.randn(shape, generator=g) * 0.5
            w[:3] = torch.tensor([1e-6, -3e-8, 0.0])[:len(w[:3])]
            state[name] = (1 + w if plain else w).to(dtype)
        elif name.endswith("linear_attn.norm.weight"):
            state[name] = (1 + 0.2 * torch.randn(shape, generator=g)).to(dtype)  # the gated norm: plain, always
        elif name.endswith(("A_log", "dt_bias")):
            state[name] = torch.randn(shape, generator=g)  # 1-D but not a norm; real checkpoints keep A_log in fp32
        else:
            state[name] = torch.randn(shape, generator=g).to(dtype)
    return state


def make_cases(tmp):
    bf = torch.bfloat16
    example = {"embed_tokens.weight": torch.tensor([[0.5, -0.5, 1.0], [1.0, 2.0, 0.0]], dtype=bf),
               "layers.0.input_layernorm.weight": torch.tensor([0.5, -0.25, 0.0], dtype=bf),
               "layers.0.linear_attn.norm.weight": torch.tensor([1.0, 0.875, 1.25], dtype=bf),
               "layers.0.linear_attn.A_log": torch.tensor([0.5, -1.0]),
               "layers.3.self_attn.q_norm.weight": torch.tensor([0.125, 0.0, -0.5], dtype=bf),
               "norm.weight": torch.tensor([3.0, 2.5, -0.75], dtype=bf)}
    cases = [Case("example 1", "centred_to_plain", [("state", example)], None),
             Case("example 2", "plain_to_centred", [("state", oracle_to_plain(example))], None)]
    k = 0
    for seed in range(20501, 20509):
        rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
        fn = "centred_to_plain" if seed % 2 else "plain_to_centred"
        dtype = torch.float32 if seed in (20503, 20506) else bf
        cfg = small_config(rng)
        k += 1
        L, name = len(cfg["layer_types"]), "fp32" if dtype != bf else "bf16"
        cases.append(Case(f"hidden {k}", fn, [("state", state_dict(g, cfg, dtype, plain=fn == "plain_to_centred"))],
                          None, EXACT, seed, tr(f"{L} layers, {name}", f"{L} 层，{name}")))
    for c in cases:
        c.expected = (oracle_to_plain if c.fn == "centred_to_plain" else oracle_to_centred)(*c.values())
    return cases
