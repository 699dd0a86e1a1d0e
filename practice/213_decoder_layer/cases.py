"""Problem 213: cases and oracle.

Oracle: qwen/model.py's DecoderLayer (the one tests/test_model.py proves equal to transformers' whole model), with
its mixers replaced by the problem's toy mixers, and qwen/norm.py's RMSNorm as the final norm. The toy mixers,
rms_norm and mlp are the given parts of practice/assembly.py, which the learner's file imports too.
"""
import torch
import torch.nn as nn

from practice import assembly as given
from practice.grading import Case, Tol
from qwen.config import Config
from qwen.lang import tr
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
STACKS = [(torch.float32, 1, 5, 8, "LLLF", 1e-6, tr("fp32, [L, L, L, F]", "fp32，[L, L, L, F]")),
          (torch.float32, 2, 7, 16, "LLLFLLLF", 1e-6, tr("fp32, [L, L, L, F] x 2", "fp32，[L, L, L, F] x 2")),
          (torch.float32, 2, 6, 8, "LLFLLF", 1e-5, tr("fp32, a full layer every 3rd, eps 1e-5",
                                                      "fp32，每 3 层一个全注意力层，eps 1e-5")),
          (torch.float32, 1, 4, 8, "FLLL", 1e-6, tr("fp32, full attention first", "fp32，全注意力层在最前")),
          (torch.bfloat16, 2, 5, 16, "LLLF", 1e-6, tr("bf16, [L, L, L, F]", "bf16，[L, L, L, F]"))]
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
