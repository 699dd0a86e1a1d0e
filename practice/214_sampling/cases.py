"""Problem 214: cases, oracle and known mistakes.

Oracle: qwen/sampling.py (filter_logits, then softmax), which tests/test_generate.py proves equal to transformers'
TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper; the presence penalty by hand (logits - penalty at
every generated id, once), the rule of OpenAI's and vLLM's presence_penalty.
"""
import torch

from practice.grading import Case, Mistake, Tol
from qwen.sampling import filter_logits

PROBS = Tol(rtol=1e-5, atol=1e-6)  # fp32 probabilities: softmax orderings differ by ~1e-8
LOGITS = Tol(rtol=1e-6, atol=1e-6)


def oracle_probs(logits, temperature=1.0, top_k=None, top_p=None):
    return filter_logits(logits, temperature, top_k, top_p).softmax(-1)


def oracle_penalty(logits, generated, penalty):
    out = logits.float().clone()
    for b, ids in enumerate(generated):
        for i in set(ids):
            out[b, i] = out[b, i] - penalty
    return out


def _safe_top_p(logits, temperature, top_k, top_p):
    """Nudge top_p away from any cumulative mass (within 1e-4), so that no case hangs on a rounding of the sum."""
    while True:
        p = filter_logits(logits, temperature, top_k).softmax(-1).sort(-1, descending=True).values
        above = p.cumsum(-1) - p
        if (above - top_p).abs().min() > 1e-4:
            return top_p
        top_p = round(top_p + 0.0037, 4)


# (dtype, B, V, scale, temperature, top_k, top_p, note)
HIDDEN = [(torch.float32, 2, 1000, 3.0, 1.0, None, None, "softmax only"),
          (torch.float32, 3, 1000, 3.0, 0.6, None, None, "temperature 0.6 sharpens"),
          (torch.float32, 2, 1000, 2.0, 1.5, None, None, "temperature 1.5 flattens"),
          (torch.float32, 4, 1000, 3.0, 1.0, 20, None, "top-k 20 (the Qwen3.5 card's)"),
          (torch.float32, 2, 500, 3.0, 1.0, 1, None, "top-k 1 is greedy"),
          (torch.float32, 2, 100, 3.0, 1.0, 500, None, "top-k larger than V"),
          (torch.float32, 3, 1000, 2.0, 1.0, None, 0.8, "top-p 0.8"),
          (torch.float32, 2, 1000, 6.0, 1.0, None, 0.5, "top-p 0.5 on a peaked distribution"),
          (torch.float32, 2, 1000, 3.0, 1.0, None, 1.0, "top-p 1 keeps everything"),
          (torch.float32, 3, 1000, 3.0, 0.7, 20, 0.95, "the card's thinking settings with T = 0.7"),
          (torch.float32, 2, 1000, 1.0, 1.2, 50, 0.6, "top-k 50 then top-p 0.6 of what is left"),
          (torch.float32, 1, 248320, 4.0, 1.0, 20, 0.95, "the real vocabulary size"),
          (torch.bfloat16, 2, 1000, 3.0, 1.0, 20, 0.9, "bf16 logits: equal logits at the k-th are all kept"),
          (torch.bfloat16, 2, 1000, 3.0, 0.6, 20, 0.95, "bf16 logits, T = 0.6: divided after the cast to fp32")]
PENALTY = [(torch.float32, [[5, 9, 5, 5, 0], [7]], 1.5, "repeats count once"),
           (torch.float32, [[], [3, 2, 1]], 2.0, "a row that generated nothing"),
           (torch.bfloat16, [[10, 11, 10], [99, 0]], 1.5, "bf16 logits, fp32 out"),
           (torch.float32, [[4, 4, 4, 4]], -0.5, "a negative penalty rewards"),
           (torch.float32, [list(range(0, 100, 7)) * 3, [1]], 2.0, "many ids, out of order")]


def make_cases(tmp):
    log = torch.tensor([[0.5, 0.25, 0.15, 0.1]]).log()
    cases = [
        Case("example 1", "sampling_probs", [("logits", torch.tensor([[2.0, 1.0, 0.0, -1.0]])), ("temperature", 1.0),
                                             ("top_k", None), ("top_p", None)], None, PROBS),
        Case("example 2", "sampling_probs", [("logits", torch.tensor([[2.0, 1.0, 0.0, -1.0]])), ("temperature", 0.5),
                                             ("top_k", 2), ("top_p", None)], None, PROBS),
        Case("example 3", "sampling_probs", [("logits", log), ("temperature", 1.0), ("top_k", None), ("top_p", 0.6)],
             None, PROBS),
        Case("example 4", "presence_penalty", [("logits", torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]])),
                                               ("generated", [[3, 3, 1], []]), ("penalty", 2.0)], None, LOGITS),
    ]
    for k, (dtype, B, V, scale, T, top_k, top_p, note) in enumerate(HIDDEN, 1):
        seed = 21400 + k
        g = torch.Generator().manual_seed(seed)
        logits = (torch.randn(B, V, generator=g) * scale).to(dtype)
        if "equal logits" in note:  # copy the k-th largest logit onto the smallest: a tie that must be kept
            kth = logits.topk(top_k).values[:, -1]
            logits[torch.arange(B), logits.argmin(-1)] = kth
        if top_p is not None and top_p < 1:
            top_p = _safe_top_p(logits, T, top_k, top_p)
        cases.append(Case(f"hidden {k}", "sampling_probs", [("logits", logits), ("temperature", T), ("top_k", top_k),
                                                            ("top_p", top_p)], None, PROBS, seed, note))
    for k, (dtype, generated, penalty, note) in enumerate(PENALTY, len(HIDDEN) + 1):
        seed = 21400 + k
        g = torch.Generator().manual_seed(seed)
        logits = (torch.randn(len(generated), 128, generator=g) * 3).to(dtype)
        cases.append(Case(f"hidden {k}", "presence_penalty", [("logits", logits), ("generated", generated),
                                                              ("penalty", penalty)], None, LOGITS, seed, note))
    oracle = {"sampling_probs": oracle_probs, "presence_penalty": oracle_penalty}
    for c in cases:
        c.expected = oracle[c.fn](*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _cut(logits, keep_logits):
    """Zero the probabilities of `logits`' softmax wherever keep_logits is -inf (no renormalisation)."""
    return logits.softmax(-1).masked_fill(torch.isinf(keep_logits), 0.0)


def _renormalised_before_cut(logits, T, top_k, top_p):
    scaled = logits.float() / T
    return _cut(scaled, filter_logits(logits, T, top_k, top_p))


def _temperature_after_softmax(logits, T, top_k, top_p):
    return oracle_probs(logits, 1.0, top_k, top_p)  # p / T renormalised is p again: T has no effect


def _temperature_multiplied(logits, T, top_k, top_p):
    return oracle_probs(logits, 1 / T, top_k, top_p)  # logits · T


def _top_p_one_too_few(logits, T, top_k, top_p):
    x = filter_logits(logits, T, top_k)
    if top_p is not None and top_p < 1:
        p, order = x.softmax(-1).sort(-1, descending=True)
        cut = p.cumsum(-1) >= top_p  # inclusive mass: the token that crosses top_p is dropped
        x = x.masked_fill(cut.scatter(-1, order, cut), float("-inf"))
    return x.softmax(-1)


def _top_p_before_top_k(logits, T, top_k, top_p):
    x = filter_logits(logits, T, None, top_p)  # top-p measured on the whole distribution
    return filter_logits(x, 1.0, top_k).softmax(-1)


def _temperature_in_bf16(logits, T, top_k, top_p):
    return oracle_probs(logits / T, 1.0, top_k, top_p)  # l / T rounded to bf16 (8 significant bits) before the cast


def _frequency(logits, generated, penalty):
    out = logits.float().clone()
    for b, ids in enumerate(generated):
        for i in ids:
            out[b, i] = out[b, i] - penalty
    return out


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("renormalised_before_cut", "sampling_probs", _renormalised_before_cut,
            _hint("looks like softmax came first and the cut tokens were then set to 0: the survivors no longer sum "
                  "to 1. Cut on the logits (set them to -inf), then take the softmax once, at the end",
                  "看起来先做了 softmax，再把被截掉的词置 0：剩下的概率之和不再是 1。应在 logits 上截断（设为 -inf），"
                  "最后只做一次 softmax")),
    Mistake("temperature_after_softmax", "sampling_probs", _temperature_after_softmax,
            _hint("looks like the temperature had no effect: dividing probabilities by T changes nothing once they are "
                  "renormalised. Divide the logits by T, before the softmax",
                  "看起来温度没有起作用：概率除以 T 再归一化等于没变。应在 softmax 之前用 logits 除以 T")),
    Mistake("temperature_multiplied", "sampling_probs", _temperature_multiplied,
            _hint("looks like logits · T: divide by the temperature, so that T < 1 sharpens and T > 1 flattens",
                  "看起来算的是 logits · T：应除以温度，T < 1 才会更尖锐，T > 1 更平坦")),
    Mistake("temperature_in_bf16", "sampling_probs", _temperature_in_bf16,
            _hint("looks like the bf16 logits were divided by T in bf16: l / T is then rounded to bf16's 8 "
                  "significant bits (errors up to 0.4 % of the value, 0.06 near 16), which moves the probabilities "
                  "by a few percent. Cast to fp32 first, then divide: logits.float() / temperature",
                  "看起来 bf16 的 logits 是在 bf16 里除以 T 的：l / T 会被舍入到 bf16 的 8 位有效位（误差可达数值的 "
                  "0.4 %，"
                  "在 16 附近为 0.06），概率因此偏差几个百分点。应先转成 fp32 再除：logits.float() / temperature")),
    Mistake("top_p_one_too_few", "sampling_probs", _top_p_one_too_few,
            _hint("looks like top-p kept one token too few: keep tokens while the mass ranked *above* them is below "
                  "top_p, so the token that brings the total to top_p stays (the kept set reaches top_p)",
                  "看起来 top-p 少留了一个词：只要排在它*前面*的概率和还小于 top_p 就保留它，"
                  "让总和越过 top_p 的那个词也要留下（保留的集合的概率和达到 top_p）")),
    Mistake("top_p_before_top_k", "sampling_probs", _top_p_before_top_k,
            _hint("looks like top-p was measured on the whole distribution: apply top-k first, then top-p on the "
                  "probabilities of the top-k survivors (transformers' order: temperature, top-k, top-p)",
                  "看起来 top-p 是在完整分布上算的：应先做 top-k，再在 top-k 剩下的词重新归一化后的概率上做 top-p"
                  "（transformers 的顺序：温度、top-k、top-p）")),
    Mistake("probs_not_fp32", "sampling_probs", None,
            _hint("the probabilities are not fp32: return fp32 whatever the logits' dtype (bf16 has 3 significant "
                  "digits, too few for probabilities that small tokens share)",
                  "概率不是 fp32：无论 logits 是什么 dtype 都返回 fp32（bf16 只有约 3 位有效数字，放不下小概率）"),
            check=lambda got, case: isinstance(got, torch.Tensor) and got.dtype != torch.float32),
    Mistake("frequency_not_presence", "presence_penalty", _frequency,
            _hint("looks like the penalty was subtracted once per occurrence (a frequency penalty): the presence "
                  "penalty is subtracted once for every token that appeared at all",
                  "看起来每出现一次就减一次（那是频率惩罚）：存在惩罚对出现过的每个词只减一次")),
    Mistake("penalty_added", "presence_penalty", lambda logits, generated, penalty: oracle_penalty(logits, generated,
                                                                                                   -penalty),
            _hint("looks like the penalty was added: subtract it, so repeated tokens become less likely",
                  "看起来惩罚被加上了：应减去它，让出现过的词变得更不可能")),
]
