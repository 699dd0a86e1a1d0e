"""Problem 203: cases, oracle and known mistakes.

Oracle: qwen/embedding.py (Embedding, head_logits), which tests/test_practice.py proves equal to transformers'
Qwen3_5ForCausalLM with tied embeddings: embed_tokens bit-exact, lm_head bit-exact.
"""
import torch
import torch.nn as nn

from practice.grading import EXACT, Case, Mistake, Tol
from qwen.embedding import Embedding, head_logits

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
HIDDEN = [("embed", torch.float32, 1000, 16, (2, 7), "fp32, ids 0 and V - 1 included"),
          ("embed", torch.bfloat16, 248320, 8, (3, 5), "bf16, the real vocabulary size"),
          ("embed", torch.float32, 50, 4, (9,), "ids (T,)"),
          ("embed", torch.bfloat16, 300, 12, (2, 3, 4), "ids (B, T, S)"),
          ("embed", torch.float32, 20, 6, (), "one id, shape ()"),
          ("tied_logits", torch.float32, 500, 32, (2, 5), "fp32, h (B, T, d)"),
          ("tied_logits", torch.bfloat16, 1000, 64, (3, 7), "bf16, h (B, T, d)"),
          ("tied_logits", torch.bfloat16, 257, 24, (), "bf16, h (d,)"),
          ("tied_logits", torch.float32, 50, 16, (4, 8), "fp32, V smaller than T·B"),
          ("tied_logits", torch.float32, 16, 16, (16,), "fp32, V = d = T: a transposed result has the right shape")]


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


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("scaled", "embed", lambda ids, E: E[ids] * E.shape[1] ** 0.5,
            _hint("looks like the rows were multiplied by sqrt(d): Gemma scales its embedding, Qwen3.5 does not",
                  "看起来把嵌入乘了 sqrt(d)：Gemma 会缩放嵌入，Qwen3.5 不会")),
    Mistake("one_based", "embed", lambda ids, E: E[ids - 1],
            _hint("looks like E[ids - 1]: token ids start at 0, row v of E belongs to token v",
                  "看起来取了 E[ids - 1]：词元 id 从 0 开始，E 的第 v 行就是词元 v")),
    Mistake("shifted", "embed", lambda ids, E: E[ids + 1],
            _hint("looks like E[ids + 1]: token ids start at 0, row v of E belongs to token v",
                  "看起来取了 E[ids + 1]：词元 id 从 0 开始，E 的第 v 行就是词元 v")),
    Mistake("softmax", "tied_logits", lambda h, E: torch.softmax(h @ E.T, dim=-1),
            _hint("looks like probabilities (a softmax was applied): return the raw scores h · Eᵀ",
                  "看起来返回了概率（做了 softmax）：应返回原始分数 h · Eᵀ")),
    Mistake("transposed", "tied_logits", lambda h, E: torch.matmul(E, h.transpose(-1, -2)) if h.dim() > 1 else E @ h,
            _hint("looks like E · hᵀ, which puts the vocabulary before the positions: compute h @ E.T, (..., V)",
                  "看起来算的是 E · hᵀ，词表维跑到了位置维前面：应算 h @ E.T，得到 (..., V)")),
    Mistake("bf16_products", "tied_logits", lambda h, E: (h.unsqueeze(-2) * E).sum(-1),
            _hint("looks like elementwise products summed in bf16: each product is rounded before the sum. A matrix "
                  "product (h @ E.T) accumulates in fp32 and rounds once",
                  "看起来是逐元素相乘后在 bf16 里求和：每个乘积先被舍入。矩阵乘法 h @ E.T 在 fp32 里累加、只舍入一次")),
]

ERROR_HINTS = [
    (r"mat1 and mat2 shapes cannot be multiplied|size mismatch|shapes cannot be multiplied", "transpose",
     _hint("the shapes do not multiply: E is (V, d), so the product is h @ E.T, (..., d) @ (d, V)",
           "形状乘不起来：E 是 (V, d)，应算 h @ E.T，即 (..., d) @ (d, V)")),
    (r"index -?\d+ is out of bounds", "index",
     _hint("an id is outside the table: ids are 0 ... V - 1 and index rows directly (no shift)",
           "id 超出了表的范围：id 取值 0 … V - 1，直接当行号用（不要平移）")),
]
