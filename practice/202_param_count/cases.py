"""Problem 202: cases, oracle and known mistakes.

Oracle: qwen/sizes.py lists every tensor's name and shape from the config; the counts are sums over it.
tests/test_practice.py proves that list equal to transformers' Qwen3_5ForCausalLM on the meta device (real 0.8B
config: 752,393,024 parameters, 254,279,680 in the embedding) and to the synthetic checkpoint's tensors.
"""
import random

from practice.grading import Case, Mistake
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
                  note="the synthetic checkpoint")]
    for k, seed in enumerate(HIDDEN_SEEDS, 1):
        cases.append(Case(f"hidden {k}", "count_parameters", [("config", random_config(seed))], None, seed=seed))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes

def _patched(cfg, suffix, shape_of):
    """The counts with every tensor whose name ends in `suffix` given the shape shape_of(cfg) instead."""
    shapes = {n: (shape_of(cfg) if n.endswith(suffix) else s) for n, s in tensor_shapes(cfg).items()}
    return count_by_part(shapes)


def _plus(cfg, part, extra):
    counts = oracle(cfg)
    counts[part] += extra
    counts["total"] += extra
    return counts


def _conv(c):
    return 2 * c["linear_num_key_heads"] * c["linear_key_head_dim"] + c["linear_num_value_heads"] * c[
        "linear_value_head_dim"]


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("q_without_gate", "count_parameters",
            lambda c: _patched(c, "q_proj.weight",
                               lambda c: (c["num_attention_heads"] * c["head_dim"], c["hidden_size"])),
            _hint("looks like q_proj has H·D outputs: in Qwen3.5 it has 2·H·D, a query and an output gate per head",
                  "看起来 q_proj 按 H·D 个输出算了：Qwen3.5 的 q_proj 有 2·H·D 个输出，每个头一份查询、一份输出门")),
    Mistake("tied_head_counted", "count_parameters",
            lambda c: dict(oracle(c), lm_head=c["vocab_size"] * c["hidden_size"],
                           total=oracle(c)["total"] + (c["vocab_size"] * c["hidden_size"]
                                                       if c.get("tie_word_embeddings") else 0)),
            _hint("looks like lm_head was counted although tie_word_embeddings is true: a tied head reuses the "
                  "embedding, so it adds 0 parameters",
                  "看起来 tie_word_embeddings 为 true 时仍算了 lm_head：共享的输出头复用嵌入表，不新增参数")),
    Mistake("conv_bias", "count_parameters",
            lambda c: _plus(c, "linear_attention", c["layer_types"].count("linear_attention") * _conv(c)),
            _hint("looks like the depthwise conv1d got a bias: it has none (bias=False), only K taps per channel",
                  "看起来给深度卷积 conv1d 算了偏置：它没有偏置，每个通道只有 K 个权重")),
    Mistake("kv_with_query_heads", "count_parameters",
            lambda c: count_by_part({n: ((c["num_attention_heads"] * c["head_dim"], c["hidden_size"])
                                         if n.endswith(("k_proj.weight", "v_proj.weight")) else s)
                                     for n, s in tensor_shapes(c).items()}),
            _hint("looks like k_proj and v_proj use num_attention_heads: they have num_key_value_heads heads (GQA)",
                  "看起来 k_proj、v_proj 用了 num_attention_heads：它们只有 num_key_value_heads 个头（GQA）")),
    Mistake("ab_with_key_heads", "count_parameters",
            lambda c: count_by_part({n: ((c["linear_num_key_heads"], c["hidden_size"])
                                         if n.endswith(("in_proj_a.weight", "in_proj_b.weight")) else s)
                                     for n, s in tensor_shapes(c).items()}),
            _hint("looks like in_proj_a / in_proj_b have one row per key head: they have one per value head "
                  "(linear_num_value_heads)",
                  "看起来 in_proj_a / in_proj_b 按键头数算了：它们每个值头一行（linear_num_value_heads）")),
    Mistake("v_with_key_heads", "count_parameters",
            lambda c: count_by_part({n: ((3 * c["linear_num_key_heads"] * c["linear_key_head_dim"],) + s[1:]
                                         if n.endswith(("in_proj_qkv.weight", "conv1d.weight")) else s)
                                     for n, s in tensor_shapes(c).items()}),
            _hint("looks like v was sized like q and k: in_proj_qkv has 2·Hk·dk + Hv·dv outputs (v has the value "
                  "heads and dv)", "看起来 v 按 q、k 的尺寸算了：in_proj_qkv 的输出是 2·Hk·dk + Hv·dv（v 用值头数和 "
                                   "dv）")),
    Mistake("gated_norm_per_head", "count_parameters",
            lambda c: _patched(c, "linear_attn.norm.weight",
                               lambda c: (c["linear_num_value_heads"] * c["linear_value_head_dim"],)),
            _hint("looks like the gated norm has a weight per head: it has dv numbers, shared by all value heads",
                  "看起来带门的 RMSNorm 每个头一份权重：它只有 dv 个数，所有值头共用")),
    Mistake("qk_norm_per_head", "count_parameters",
            lambda c: count_by_part({n: ((c["num_attention_heads"] * c["head_dim"],) if n.endswith("q_norm.weight")
                                         else (c["num_key_value_heads"] * c["head_dim"],)
                                         if n.endswith("k_norm.weight") else s)
                                     for n, s in tensor_shapes(c).items()}),
            _hint("looks like q_norm / k_norm have a weight per head: each has head_dim numbers, shared by the heads",
                  "看起来 q_norm / k_norm 每个头一份权重：它们各只有 head_dim 个数，所有头共用")),
    Mistake("head_dim_guessed", "count_parameters",
            lambda c: oracle(dict(c, head_dim=c["hidden_size"] // c["num_attention_heads"])),
            _hint("looks like head_dim = hidden_size / num_attention_heads: Qwen3.5 gives head_dim in the config "
                  "(256 for 0.8B, while 1024 / 8 = 128)",
                  "看起来用了 head_dim = hidden_size / num_attention_heads：Qwen3.5 的 head_dim 写在配置里"
                  "（0.8B 是 256，而 1024 / 8 = 128）")),
    Mistake("interval_not_list", "count_parameters",
            lambda c: oracle(dict(c, layer_types=["full_attention" if (i + 1) % c.get("full_attention_interval", 4)
                                                  == 0 else "linear_attention" for i in range(len(c["layer_types"]))])),
            _hint("looks like the layer kinds came from full_attention_interval: use the layer_types list, which "
                  "decides (the interval is only a fallback when the list is absent)",
                  "看起来层的种类是按 full_attention_interval 推的：应以 layer_types 列表为准（列表缺失时才用间隔）")),
    Mistake("no_final_norm", "count_parameters",
            lambda c: _plus(c, "norms", -c["hidden_size"]),
            _hint("looks like the final norm was left out: norms = 2 per layer + 1 after the last layer",
                  "看起来漏了最后的归一化：norms = 每层 2 个 + 最后一层之后 1 个")),
]

ERROR_HINTS = [
    (r"(?m)^KeyError", "config_key",
     _hint("the config has no such key: use the HF field names listed in the statement (linear_conv_kernel_dim, "
           "linear_num_value_heads, …)", "配置里没有这个键：请用题面列出的 HF 字段名（linear_conv_kernel_dim、"
           "linear_num_value_heads 等）")),
]
