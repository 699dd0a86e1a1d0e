"""Problem 205: cases, oracle and known mistakes.

Oracle: hand math, 1 + w and p - 1 in fp32 for the names qwen/sizes.py marks zero-centred. Both are a single
correctly rounded fp32 operation, so every right answer is bit-exact. tests/test_practice.py checks that the plain
weights give transformers' Qwen3_5RMSNorm output bit for bit ("the outputs stay equal") and that the names
marked zero-centred are exactly transformers' Qwen3_5RMSNorm modules.
"""
import random

import torch

from practice.grading import EXACT, Case, Mistake
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
        cases.append(Case(f"hidden {k}", fn, [("state", state_dict(g, cfg, dtype, plain=fn == "plain_to_centred"))],
                          None, EXACT, seed, f"{len(cfg['layer_types'])} layers, {'fp32' if dtype != bf else 'bf16'}"))
    for c in cases:
        c.expected = (oracle_to_plain if c.fn == "centred_to_plain" else oracle_to_centred)(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes

def _convert(state, pick, op, fp32=True):
    return {k: op(v.float() if fp32 else v) if pick(k, v) else v for k, v in state.items()}


def _to_plain(pick, fp32=True):
    return lambda s: _convert(s, pick, lambda v: 1 + v, fp32)


def _to_centred(pick, fp32=True):
    return lambda s: _convert(s, pick, lambda v: v - 1, fp32)


def _right(k, v):
    return is_zero_centred(k)


def _hint(en, zh):
    return {"en": en, "zh": zh}


HINTS = {
    "shifted_gated_norm": _hint(
        "looks like linear_attn.norm.weight was converted too: the gated norm's weight is already plain (init 1); "
        "a test such as name.endswith('norm.weight') catches it by mistake",
        "看起来 linear_attn.norm.weight 也被转换了：带门的 RMSNorm 权重本来就是普通的（初始为 1）；"
        "name.endswith('norm.weight') 这样的判断会误伤它"),
    "wrong_direction": _hint("looks like the conversion went the wrong way: plain = 1 + centred, centred = plain - 1",
                             "看起来转换方向反了：普通 = 1 + 零中心，零中心 = 普通 - 1"),
    "kept_dtype": _hint("looks like the sum was computed in bf16: 1 + w in bf16 rounds small offsets away (the spacing "
                        "near 1 is 2^-7). Compute and return fp32, as the model does inside its RMSNorm",
                        "看起来是在 bf16 里算的：bf16 中 1 + w 会把小的偏移舍掉（1 附近间隔是 2^-7）。"
                        "应在 fp32 里计算并返回 fp32，和模型内部的 RMSNorm 一样"),
    "missed_qk_norm": _hint("looks like q_norm / k_norm were left out: they are zero-centred RMSNorms too",
                            "看起来漏了 q_norm / k_norm：它们也是零中心的 RMSNorm"),
    "missed_final_norm": _hint("looks like the final norm (norm.weight) was left out: it is zero-centred too",
                               "看起来漏了最后的归一化 norm.weight：它也是零中心的"),
    "all_vectors": _hint("looks like every 1-D tensor was converted: A_log, dt_bias and the gated norm are 1-D "
                         "too; pick the norms by name", "看起来所有一维张量都被转换了：A_log、dt_bias 和带门的 "
                         "RMSNorm 也是一维的；应按名字挑出归一化权重"),
    "only_norms": _hint("looks like only the converted tensors were returned: return every tensor of the state dict",
                        "看起来只返回了转换过的张量：应返回状态字典里的所有张量"),
}

_PICKS = {
    "shifted_gated_norm": lambda k, v: k.endswith("norm.weight"),
    "missed_qk_norm": lambda k, v: is_zero_centred(k) and not k.endswith(("q_norm.weight", "k_norm.weight")),
    "missed_final_norm": lambda k, v: is_zero_centred(k) and k != "norm.weight",
    "all_vectors": lambda k, v: v.dim() == 1,
}


def _only_norms(got, case):
    return isinstance(got, dict) and 0 < len(got) < len(case.expected) and all(
        is_zero_centred(k) for k in got)


MISTAKES = []
for _fn, _make, _back in (("centred_to_plain", _to_plain, _to_centred), ("plain_to_centred", _to_centred, _to_plain)):
    MISTAKES += [Mistake(key, _fn, _make(pick), HINTS[key]) for key, pick in _PICKS.items()]
    MISTAKES += [Mistake("wrong_direction", _fn, _back(_right), HINTS["wrong_direction"]),
                 Mistake("kept_dtype", _fn, _make(_right, fp32=False), HINTS["kept_dtype"]),
                 Mistake("only_norms", _fn, None, HINTS["only_norms"], check=_only_norms)]
