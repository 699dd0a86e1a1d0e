"""Problem 203: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: qwen/embedding.py (Embedding, head_logits), which tests/test_practice.py proves equal to transformers'
Qwen3_5ForCausalLM with tied embeddings: embed_tokens bit-exact, lm_head bit-exact.
"""
import torch
import torch.nn as nn

from practice.grading import EXACT, Case, Tol
from qwen.embedding import Embedding, head_logits
from qwen.lang import tr

# fp32: 1e-5 * max(1, max|logit|) + 1e-5 * |logit| (sums of d products in another order round differently);
# bf16: one grid step (any matrix product accumulates in fp32 and rounds once, so at most one step apart).
LOGITS = Tol(steps=1, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def oracle_embed(ids, E):
    emb = Embedding(*E.shape)
    emb.weight = nn.Parameter(E.clone(), requires_grad=False)
    return emb(ids)


@torch.no_grad()
def oracle_logits(h, E):
    return head_logits(h, E)


def _ids(g, shape, V):
    ids = torch.randint(0, V, shape, generator=g)
    if ids.numel() >= 2:
        ids.view(-1)[0], ids.view(-1)[-1] = 0, V - 1  # both ends of the vocabulary
    return ids


# (function, dtype, V, d, shape of ids or of h without d, note)
HIDDEN = [("embed", torch.float32, 1000, 16, (2, 7), tr("fp32, ids 0 and V - 1 included", "fp32，包含 id 0 和 V - 1")),
          ("embed", torch.bfloat16, 248320, 8, (3, 5), tr("bf16, the real vocabulary size", "bf16，真实词表大小")),
          ("embed", torch.float32, 50, 4, (9,), tr("ids (T,)", "id 形状 (T,)")),
          ("embed", torch.bfloat16, 300, 12, (2, 3, 4), tr("ids (B, T, S)", "id 形状 (B, T, S)")),
          ("embed", torch.float32, 20, 6, (), tr("one id, shape ()", "单个 id，形状 ()")),
          ("tied_logits", torch.float32, 500, 32, (2, 5), tr("fp32, h (B, T, d)", "fp32，h 形状 (B, T, d)")),
          ("tied_logits", torch.bfloat16, 1000, 64, (3, 7), tr("bf16, h (B, T, d)", "bf16，h 形状 (B, T, d)")),
          ("tied_logits", torch.bfloat16, 257, 24, (), tr("bf16, h (d,)", "bf16，h 形状 (d,)")),
          ("tied_logits", torch.float32, 50, 16, (4, 8), tr("fp32, V smaller than T·B", "fp32，V 小于 T·B")),
          ("tied_logits", torch.float32, 16, 16, (16,), tr("fp32, V = d = T: a transposed result has the right shape",
                                                           "fp32，V = d = T：转置了的结果形状也对得上"))]


def make_cases(tmp):
    E = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [-1.0, 0.5, 0.0], [2.0, -2.0, 1.0]])
    cases = [Case("example 1", "embed", [("ids", torch.tensor([[2, 0, 2]])), ("E", E)], None, EXACT),
             Case("example 2", "tied_logits", [("h", torch.tensor([[1.0, 0.0, -1.0]])), ("E", E)], None, LOGITS)]
    for k, (fn, dtype, V, d, shape, note) in enumerate(HIDDEN, 1):
        seed = 20300 + k
        g = torch.Generator().manual_seed(seed)
        E = (torch.randn(V, d, generator=g) * 0.05).to(dtype)  # real embedding rows are small numbers
        if fn == "embed":
            args, tol = [("ids", _ids(g, shape, V)), ("E", E)], EXACT
        else:
            args, tol = [("h", (torch.randn(*shape, d, generator=g) * 3).to(dtype)), ("E", E)], LOGITS
        cases.append(Case(f"hidden {k}", fn, args, None, tol, seed, note))
    oracle = {"embed": oracle_embed, "tied_logits": oracle_logits}
    for c in cases:
        c.expected = oracle[c.fn](*c.values())
    return cases
