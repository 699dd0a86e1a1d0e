"""Problem 224: cases and oracle.

Oracle: the definition in fp64, log p = x − logsumexp(x), KL(p ‖ q) = Σ p (log p − log q), p the reference's
distribution and q the other model's (chapter 12's letters), with a term whose p is 0 counted as 0; top-1 agreement =
the mean of argmax(ref) == argmax(other) over the logits, the first index on a tie. Near ties are built on purpose:
two logits one step of their dtype apart whose probabilities round to one value, and exact ties where topk, an
unstable sort or a flipped argmax pick another index than the first. tests/test_practice.py checks
every case against torch.nn.functional.kl_div and torch.distributions.kl_divergence (in fp64), a hand-computed
example, and the KL's identities (0 for equal logits, ≥ 0, not symmetric).
"""
import math

import torch

from practice.grading import Case, Tol, compare
from qwen.lang import tr

# fp64 throughout: sums in another order, or cross-entropy minus entropy, stay within 1e-14 of it; a computation
# in fp32 is 1e-7 away (an fp32 log-probability near −10 is only good to about 1e-6), larger than the KL between
# two close models.
TOL = Tol(rtol=1e-9, atol=1e-12)
MASK = -1e4  # a finite mask, as some code masks logits: exp(−10⁴) is 0 even in fp64
AGREEMENT = 2.0 ** -23  # relative: an fp32 mean (.float().mean().item()) is the fraction rounded once, within 2⁻²⁴


def fraction(got, case):
    """The agreement cases' check: a Python float within AGREEMENT of the fraction, relative (else compare's
    verdict: exact to 1e-9, and the type)."""
    exp = case.expected
    if isinstance(got, float) and abs(got - exp) <= AGREEMENT * abs(exp):
        return None
    return compare(got, exp)


def log_probs(x):
    x = x.double()
    return x - torch.logsumexp(x, dim=-1, keepdim=True)


def kl(ref_logits, logits):
    a, b = log_probs(ref_logits), log_probs(logits)
    p = a.exp()
    return torch.where(p == 0, 0.0, p * (a - b)).sum(dim=-1)  # Σ p (log p − log q), a term with p = 0 is 0


def top1(ref_logits, logits):
    return (ref_logits.argmax(dim=-1) == logits.argmax(dim=-1)).double().mean().item()


def pair(gen, shape, noise, dtype=torch.float32, scale=3.0):
    """Reference logits and a perturbed copy, as a quantized model's logits are the reference's plus an error."""
    ref = torch.randn(*shape, generator=gen) * scale
    return ref.to(dtype), (ref + noise * torch.randn(*shape, generator=gen)).to(dtype)


def sharper(gen, shape):
    ref = torch.randn(*shape, generator=gen) * 2
    return ref, 1.5 * ref


def masked(gen, shape, where):
    """Some tokens masked with −10⁴: in both models, only in the reference, or only in the other."""
    ref, x = pair(gen, shape, 0.3)
    mask = torch.rand(*shape, generator=gen) < 0.3
    mask[..., 0] = False  # every position keeps some tokens
    if where in ("both", "ref"):
        ref = ref.masked_fill(mask, MASK)
    if where in ("both", "other"):
        x = x.masked_fill(mask, MASK)
    return ref, x


def _next_up(x):
    """The next number of x's dtype above x (x > 0): one step of its last bit."""
    bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16}[x.dtype]
    return (x.view(bits) + 1).view(x.dtype)


def one_step_apart(gen, dtype, top, B=12, V=50):
    """Near ties: at each position the reference's two largest logits are `top` and the next number of the dtype
    above it, the larger one later, every other logit below −1. Their probabilities round to one value (in the
    logits' dtype, and in fp32 too where the step is below 6e-8), so argmax over probabilities takes the earlier.
    The other model's largest logit is the later one at 9 positions and the earlier one at 3: over the logits they
    agree at 9 of 12."""
    ref = (-(torch.rand(B, V, generator=gen) * 3 + 1)).to(dtype)
    first = torch.randint(0, V // 2, (B,), generator=gen)
    later = first + 1 + torch.randint(0, V // 2, (B,), generator=gen)
    rows = torch.arange(B)
    low = torch.tensor(top, dtype=dtype)
    ref[rows, first], ref[rows, later] = low, _next_up(low)
    other = ref.clone()
    other[rows, torch.where(rows < 9, later, first)] = 1.0
    return ref, other


def exact_ties(gen, dtype, B=12, V=50):
    """Exact ties: at each position the reference's largest logit appears twice; the other model's largest logit is
    the first of the two at 9 positions and the second at 3. By the first index on a tie they agree at 9 of 12; an
    index chosen otherwise among the two moves that count."""
    ref = torch.randn(B, V, generator=gen)
    first = torch.randint(0, V // 2, (B,), generator=gen)
    second = first + 1 + torch.randint(0, V // 2, (B,), generator=gen)
    rows = torch.arange(B)
    top = ref.amax(dim=-1) + 1
    ref[rows, first], ref[rows, second] = top, top
    other = ref.clone()
    other[rows, torch.where(rows < 9, first, second)] = top + 1
    return ref.to(dtype), other.to(dtype)


def hand_kl():
    """Position 0: uniform against (½, ¼, ¼); position 1: the same logits."""
    return torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]), torch.tensor([[math.log(2), 0.0, 0.0], [1.0, 2.0, 3.0]])


def hand_top1():
    """4 positions; the two models' most likely tokens agree at 3 of them."""
    ref = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [0.5, 0.4, 0.0]])
    other = torch.tensor([[1.5, 1.0, 0.0], [0.0, 2.0, 2.5], [1.0, 0.0, 4.0], [0.6, 0.4, 0.0]])
    return ref, other


V_REAL = 248_320  # the real Qwen3.5 vocabulary (the rows of its tied head)

# (function, kind, make(gen) -> (ref_logits, logits), note)
TABLE = [
    ("next_token_kl", "example", lambda g: hand_kl(), tr("uniform against (½, ¼, ¼), then equal logits",
                                                         "先是均匀分布对比 (½, ¼, ¼)，再是相同的 logits")),
    ("next_token_kl", "example", lambda g: pair(g, (5, 50), 0.3), tr("5 positions over 50 tokens",
                                                                     "5 个位置，50 个 token")),
    ("top1_agreement", "example", lambda g: hand_top1(), tr("4 positions, 3 agree: 0.75", "4 个位置，3 个一致：0.75")),
    ("next_token_kl", "hidden", lambda g: pair(g, (2, 7, 1000), 0.1), tr("a batch: (2, 7, 1000)",
                                                                         "批次：(2, 7, 1000)")),
    ("next_token_kl", "hidden", lambda g: pair(g, (4, 8, 2000), 0.05, torch.bfloat16), "bf16 logits"),
    ("next_token_kl", "hidden", lambda g: pair(g, (3, 500), 1e-4), tr("nearly equal models: the KL is about 1e-9",
                                                                      "几乎相同的两个模型：KL 约为 1e-9")),
    ("next_token_kl", "hidden", lambda g: sharper(g, (6, 300)), tr("the other model is sharper (1.5 × the logits)",
                                                                   "另一个模型更尖锐（logits 乘以 1.5）")),
    ("next_token_kl", "hidden", lambda g: (lambda r: (r, r.clone()))(torch.randn(4, 100, generator=g)),
     tr("equal logits: 0", "logits 完全相同：0")),
    ("next_token_kl", "hidden", lambda g: masked(g, (3, 500), "both"), tr("tokens masked with −10⁴ in both models",
                                                                          "两个模型都用 −10⁴ 掩掉了一些 token")),
    ("next_token_kl", "hidden", lambda g: masked(g, (3, 500), "ref"), tr("tokens masked in the reference only",
                                                                         "只有参考模型掩掉了 token")),
    ("next_token_kl", "hidden", lambda g: masked(g, (3, 500), "other"),
     tr("tokens masked in the other model only: a large KL", "只有另一个模型掩掉了 token：KL 很大")),
    ("next_token_kl", "hidden", lambda g: pair(g, (700,), 0.2), tr("one position, (V,): a 0-d result",
                                                                   "单个位置 (V,)：结果是 0 维的")),
    ("next_token_kl", "hidden", lambda g: pair(g, (2, V_REAL), 0.05, torch.bfloat16),
     tr("the real vocabulary, 248,320 tokens, bf16", "真实词表，248,320 个 token，bf16")),
    ("top1_agreement", "hidden", lambda g: pair(g, (2, 7, 1000), 1.0), tr("a batch: (2, 7, 1000)",
                                                                          "批次：(2, 7, 1000)")),
    ("top1_agreement", "hidden", lambda g: pair(g, (4, 8, 2000), 0.5, torch.bfloat16), "bf16 logits"),
    ("top1_agreement", "hidden", lambda g: pair(g, (3, 5, 100), 2.0), tr("far apart: many disagree",
                                                                         "两个模型相差很远：很多位置不一致")),
    ("top1_agreement", "hidden", lambda g: pair(g, (500,), 1.0), tr("one position, (V,)", "单个位置 (V,)")),
    ("top1_agreement", "hidden", lambda g: pair(g, (3, V_REAL), 0.5, torch.bfloat16),
     tr("the real vocabulary, 248,320 tokens, bf16", "真实词表，248,320 个 token，bf16")),
    ("top1_agreement", "hidden", lambda g: one_step_apart(g, torch.float32, 1e-3),
     tr("near ties: two fp32 logits one step apart, near 1e-3, their probabilities equal",
        "几乎并列：两个相差一个 fp32 步长的 logits，约为 1e-3，概率相等")),
    ("top1_agreement", "hidden", lambda g: one_step_apart(g, torch.bfloat16, 0.01),
     tr("near ties: two bf16 logits one step apart, near 0.01, their bf16 probabilities equal",
        "几乎并列：两个相差一个 bf16 步长的 logits，约为 0.01，bf16 概率相等")),
    ("top1_agreement", "hidden", lambda g: one_step_apart(g, torch.bfloat16, 1e-9),
     tr("near ties: two bf16 logits one step apart, near 1e-9, equal probabilities even in fp32",
        "几乎并列：两个相差一个 bf16 步长的 logits，约为 1e-9，连 fp32 概率都相等")),
    ("top1_agreement", "hidden", lambda g: exact_ties(g, torch.float32),
     tr("exact ties: the first index of the largest logit", "完全并列：取最大 logit 的第一个下标")),
    ("top1_agreement", "hidden", lambda g: exact_ties(g, torch.bfloat16),
     tr("exact ties in bf16: the first index of the largest logit", "bf16 下完全并列：取最大 logit 的第一个下标")),
    ("top1_agreement", "hidden", lambda g: exact_ties(g, torch.float32, V=8),
     tr("exact ties among 8 tokens: the first index", "8 个 token 中完全并列：取第一个下标")),
]


def make_cases(tmp):
    cases, count = [], {"example": 0, "hidden": 0}
    for i, (fn, kind, make, note) in enumerate(TABLE):
        seed = 22400 + i
        ref, other = make(torch.Generator().manual_seed(seed))
        count[kind] += 1
        args = [("ref_logits", ref), ("logits", other)]
        if fn == "next_token_kl":
            cases.append(Case(f"{kind} {count[kind]}", fn, args, kl(ref, other), TOL, seed, note))
        else:
            cases.append(Case(f"{kind} {count[kind]}", fn, args, top1(ref, other), seed=seed, note=note,
                              check=fraction))
    return cases
