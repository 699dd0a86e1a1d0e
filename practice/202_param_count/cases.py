"""Problem 202: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/sizes.py lists every tensor's name and shape from the config; the counts are sums over it.
tests/test_practice.py proves that list equal to transformers' Qwen3_5ForCausalLM on the meta device (real 0.8B
config: 752,393,024 parameters, 254,279,680 in the embedding) and to the synthetic checkpoint's tensors.
"""
import random

from practice.grading import Case
from qwen.lang import tr
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, tensor_shapes
from qwen.synthetic import TEXT as SYNTHETIC_TEXT

REAL_08B = dict(REAL_TEXT_CONFIG)  # the real Qwen3.5-0.8B text config, kept in one place: qwen/sizes.py


def oracle(config):
    return count_by_part(tensor_shapes(config))


def random_config(seed):
    """A small but complete text config. Head sizes are not hidden_size / heads, value heads often outnumber
    key heads, and the layer pattern often ignores full_attention_interval: each of these exposes a mistake."""
    g = random.Random(seed)
    H = g.choice([2, 4, 8])
    Hk = g.choice([1, 2, 4])
    L = g.randint(2, 10)
    pattern = g.choice(["every 4th", "random", "every 3rd", "all linear", "all full", "random"])
    if pattern == "every 4th":
        types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)]
    elif pattern == "every 3rd":
        types = ["full_attention" if (i + 1) % 3 == 0 else "linear_attention" for i in range(L)]
    elif pattern == "random":
        types = [g.choice(["linear_attention", "full_attention"]) for _ in range(L)]
    else:
        types = [pattern.replace("all ", "") + "_attention"] * L
    return dict(
        model_type="qwen3_5_text", vocab_size=g.randint(100, 5000), hidden_size=g.choice([32, 48, 64, 96]),
        intermediate_size=g.choice([64, 96, 160]), num_hidden_layers=L, num_attention_heads=H,
        num_key_value_heads=g.choice([h for h in (1, 2, 4) if H % h == 0]), head_dim=g.choice([16, 24, 64]),
        linear_num_key_heads=Hk, linear_num_value_heads=Hk * g.choice([1, 2, 3]),
        linear_key_head_dim=g.choice([8, 16, 32]), linear_value_head_dim=g.choice([8, 16, 24]),
        linear_conv_kernel_dim=g.choice([2, 3, 4]), hidden_act="silu", rms_norm_eps=1e-6,
        rope_parameters=dict(rope_type="default", rope_theta=10_000_000, partial_rotary_factor=0.25),
        layer_types=types, full_attention_interval=4, tie_word_embeddings=g.random() < 0.5,
    )


HIDDEN_SEEDS = range(20201, 20211)


def make_cases(tmp):
    cases = [Case("example 1", "count_parameters", [("config", dict(REAL_08B))], None, note="Qwen3.5-0.8B"),
             Case("example 2", "count_parameters", [("config", dict(SYNTHETIC_TEXT))], None,
                  note=tr("the synthetic checkpoint", "合成检查点"))]
    for k, seed in enumerate(HIDDEN_SEEDS, 1):
        cases.append(Case(f"hidden {k}", "count_parameters", [("config", random_config(seed))], None, seed=seed))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
