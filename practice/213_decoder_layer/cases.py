"""Problem 213: cases, oracle and known mistakes.

Oracle: qwen/model.py's DecoderLayer (the one tests/test_model.py proves equal to transformers' whole model), with
its mixers replaced by the problem's toy mixers, and qwen/norm.py's RMSNorm as the final norm. The toy mixers,
rms_norm and mlp are the given parts of practice/assembly.py, which the learner's file imports too.
"""
import torch
import torch.nn as nn

from practice import assembly as given
from practice.grading import Case, Mistake, Tol
from qwen.config import Config
from qwen.model import DecoderLayer
from qwen.norm import RMSNorm

TOL = Tol(steps=2, rtol=1e-5, atol=1e-6)


class _Given(nn.Module):
    """A toy mixer or the given MLP behind the interface DecoderLayer calls: (h, ...) -> (B, T, d)."""

    def __init__(self, fn, p):
        super().__init__()
        self.fn, self.p = fn, p

    def forward(self, h, *rest):
        return self.fn(h, self.p)


@torch.no_grad()
def oracle_layer(x, p, kind, eps):
    d = x.shape[-1]
    layer = DecoderLayer(Config(hidden_size=d, intermediate_size=4, num_attention_heads=1, num_key_value_heads=1,
                                head_dim=4, linear_num_key_heads=1, linear_num_value_heads=1, linear_key_head_dim=4,
                                linear_value_head_dim=4, rms_norm_eps=eps), kind)
    layer.input_layernorm.weight = nn.Parameter(p["input_layernorm"], requires_grad=False)
    layer.post_attention_layernorm.weight = nn.Parameter(p["post_attention_layernorm"], requires_grad=False)
    setattr(layer, "linear_attn" if kind == "linear_attention" else "self_attn", _Given(given.MIXERS[kind], p["mixer"]))
    layer.mlp = _Given(given.mlp, p["mlp"])
    return layer(x, None, None)


@torch.no_grad()
def oracle_stack(x, layers, layer_types, final_norm, eps):
    for p, kind in zip(layers, layer_types):
        x = oracle_layer(x, p, kind, eps)
    norm = RMSNorm(x.shape[-1], eps)
    norm.weight = nn.Parameter(final_norm, requires_grad=False)
    return norm(x)


def _params(g, d, dtype, n=6, i=8):
    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype)
    return {"input_layernorm": r(d, scale=0.3), "post_attention_layernorm": r(d, scale=0.3),
            "mixer": {"in_proj": r(n, d, scale=d ** -0.5), "out_proj": r(d, n, scale=n ** -0.5)},
            "mlp": {"gate_proj": r(i, d, scale=d ** -0.5), "up_proj": r(i, d, scale=d ** -0.5),
                    "down_proj": r(d, i, scale=i ** -0.5)}}


# (dtype, B, T, d, layer types, eps, note)
STACKS = [(torch.float32, 1, 5, 8, "LLLF", 1e-6, "fp32, [L, L, L, F]"),
          (torch.float32, 2, 7, 16, "LLLFLLLF", 1e-6, "fp32, [L, L, L, F] x 2"),
          (torch.float32, 2, 6, 8, "LLFLLF", 1e-5, "fp32, a full layer every 3rd, eps 1e-5"),
          (torch.float32, 1, 4, 8, "FLLL", 1e-6, "fp32, full attention first"),
          (torch.bfloat16, 2, 5, 16, "LLLF", 1e-6, "bf16, [L, L, L, F]")]
KINDS = {"L": "linear_attention", "F": "full_attention"}


def make_cases(tmp):
    g = torch.Generator().manual_seed(21300)
    x = torch.randn(1, 4, 8, generator=g)
    cases = [Case("example 1", "decoder_layer", [("x", x), ("p", _params(g, 8, torch.float32)),
                                                  ("kind", "linear_attention"), ("eps", 1e-6)], None, TOL),
             Case("example 2", "decoder_layer", [("x", x), ("p", _params(g, 8, torch.float32)),
                                                  ("kind", "full_attention"), ("eps", 1e-6)], None, TOL)]
    for k, (dtype, B, T, d, pattern, eps, note) in enumerate(STACKS, 1):
        g = torch.Generator().manual_seed(21300 + k)
        x = torch.randn(B, T, d, generator=g).to(dtype)
        layers = [_params(g, d, dtype) for _ in pattern]
        args = [("x", x), ("layers", layers), ("layer_types", [KINDS[c] for c in pattern]),
                ("final_norm", (torch.randn(d, generator=g) * 0.3).to(dtype)), ("eps", eps)]
        label = "example 3" if k == 1 else f"hidden {k}"
        cases.append(Case(label, "hybrid_stack", args, None, TOL, 21300 + k, note))
        cases.append(Case(f"hidden layer {k}", "decoder_layer", [("x", x), ("p", layers[-1]),
                                                                ("kind", KINDS[pattern[-1]]), ("eps", eps)],
                          None, TOL, 21300 + k, note))
    oracle = {"decoder_layer": oracle_layer, "hybrid_stack": oracle_stack}
    for c in cases:
        c.expected = oracle[c.fn](*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _hint(en, zh):
    return {"en": en, "zh": zh}


def _post_norm(x, p, kind, eps):
    h = given.rms_norm(x + given.MIXERS[kind](x, p["mixer"]), p["input_layernorm"], eps)
    return given.rms_norm(h + given.mlp(h, p["mlp"]), p["post_attention_layernorm"], eps)


def _residual_from_norm(x, p, kind, eps):
    h = given.rms_norm(x, p["input_layernorm"], eps)
    h = h + given.MIXERS[kind](h, p["mixer"])
    n = given.rms_norm(h, p["post_attention_layernorm"], eps)
    return n + given.mlp(n, p["mlp"])


def _stack_with(layer, swap=False, final=True):
    def run(x, layers, layer_types, final_norm, eps):
        for p, kind in zip(layers, layer_types):
            if swap:
                kind = "full_attention" if kind == "linear_attention" else "linear_attention"
            x = layer(x, p, kind, eps)
        return given.rms_norm(x, final_norm, eps) if final else x
    return run


def _swapped(x, p, kind, eps):
    return oracle_layer(x, p, "full_attention" if kind == "linear_attention" else "linear_attention", eps)


POST_NORM = _hint("looks like post-norm, norm(x + mixer(x)): Qwen3.5 is pre-norm, x + mixer(norm(x)); the residual "
                  "stream itself is never normalised inside a layer",
                  "看起来是后归一化 norm(x + mixer(x))：Qwen3.5 是前归一化 x + mixer(norm(x))，"
                  "残差流本身在层内从不归一化")
FROM_NORM = _hint("looks like the residual was taken after the norm, norm(x) + mixer(norm(x)): add the mixer's output "
                  "to x itself, not to its normalised copy",
                  "看起来残差取自归一化之后 norm(x) + mixer(norm(x))：应把 mixer 的输出加到 x 本身上，"
                  "而不是归一化后的副本")
SWAPPED = _hint("looks like the wrong mixer for the layer type: \"linear_attention\" layers use the linear "
                "(DeltaNet) mixer, \"full_attention\" layers the attention mixer",
                "看起来层类型对应的 mixer 用反了：\"linear_attention\" 层用线性（DeltaNet）mixer，"
                "\"full_attention\" 层用注意力")
NO_FINAL = _hint("looks like the final norm is missing: after the last layer apply rms_norm(x, final_norm, eps)",
                 "看起来漏了最后的归一化：最后一层之后还要 rms_norm(x, final_norm, eps)")

MISTAKES = [
    Mistake("post_norm", "decoder_layer", _post_norm, POST_NORM),
    Mistake("residual_from_norm", "decoder_layer", _residual_from_norm, FROM_NORM),
    Mistake("wrong_mixer", "decoder_layer", _swapped, SWAPPED),
    Mistake("post_norm", "hybrid_stack", _stack_with(_post_norm), POST_NORM),
    Mistake("residual_from_norm", "hybrid_stack", _stack_with(_residual_from_norm), FROM_NORM),
    Mistake("wrong_mixer", "hybrid_stack", _stack_with(oracle_layer, swap=True), SWAPPED),
    Mistake("no_final_norm", "hybrid_stack", _stack_with(oracle_layer, final=False), NO_FINAL),
]
