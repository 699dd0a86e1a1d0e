"""Problem 214: cases and oracle (the known mistakes: mistakes.toml).

Oracle: qwen/sampling.py (filter_logits, then softmax), which tests/test_generate.py proves equal to transformers'
TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper; the presence penalty by hand (logits - penalty at
every generated id, once), the rule of OpenAI's and vLLM's presence_penalty.
"""
import torch

from practice.grading import Case, Tol
from qwen.lang import tr
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


# (dtype, B, V, scale, temperature, top_k, top_p, a tie at the k-th largest logit, note)
HIDDEN = [(torch.float32, 2, 1000, 3.0, 1.0, None, None, False, tr("softmax only", "只做 softmax")),
          (torch.float32, 3, 1000, 3.0, 0.6, None, None, False, tr("temperature 0.6 sharpens", "温度 0.6 让分布更尖")),
          (torch.float32, 2, 1000, 2.0, 1.5, None, None, False, tr("temperature 1.5 flattens", "温度 1.5 让分布更平")),
          (torch.float32, 4, 1000, 3.0, 1.0, 20, None, False, tr("top-k 20 (the Qwen3.5 card's)",
                                                                 "top-k 20（Qwen3.5 模型卡的设置）")),
          (torch.float32, 2, 500, 3.0, 1.0, 1, None, False, tr("top-k 1 is greedy", "top-k 1 即贪心")),
          (torch.float32, 2, 100, 3.0, 1.0, 500, None, False, tr("top-k larger than V", "top-k 大于 V")),
          (torch.float32, 3, 1000, 2.0, 1.0, None, 0.8, False, "top-p 0.8"),
          (torch.float32, 2, 1000, 6.0, 1.0, None, 0.5, False, tr("top-p 0.5 on a peaked distribution",
                                                                  "尖峰分布上的 top-p 0.5")),
          (torch.float32, 2, 1000, 3.0, 1.0, None, 1.0, False, tr("top-p 1 keeps everything", "top-p 1 全部保留")),
          (torch.float32, 3, 1000, 3.0, 0.7, 20, 0.95, False, tr("the card's thinking settings with T = 0.7",
                                                                 "模型卡的思考模式设置，T = 0.7")),
          (torch.float32, 2, 1000, 1.0, 1.2, 50, 0.6, False, tr("top-k 50 then top-p 0.6 of what is left",
                                                                "先 top-k 50，再对剩下的做 top-p 0.6")),
          (torch.float32, 1, 248320, 4.0, 1.0, 20, 0.95, False, tr("the real vocabulary size", "真实词表大小")),
          (torch.bfloat16, 2, 1000, 3.0, 1.0, 20, 0.9, True, tr("bf16 logits: equal logits at the k-th are all kept",
                                                                "bf16 logits：与第 k 大并列的 logits 全部保留")),
          (torch.bfloat16, 2, 1000, 3.0, 0.6, 20, 0.95, False,
           tr("bf16 logits, T = 0.6: divided after the cast to fp32", "bf16 logits，T = 0.6：先转成 fp32 再除")),
          (torch.bfloat16, 3, 1000, 4.0, 1.3, None, None, False,
           tr("bf16 logits, T = 1.3, no cut: divided after the cast", "bf16 logits，T = 1.3，不截断：先转换再除"))]
PENALTY = [(torch.float32, [[5, 9, 5, 5, 0], [7]], 1.5, tr("repeats count once", "重复的 id 只算一次")),
           (torch.float32, [[], [3, 2, 1]], 2.0, tr("a row that generated nothing", "有一行什么也没生成")),
           (torch.bfloat16, [[10, 11, 10], [99, 0]], 1.5, tr("bf16 logits, fp32 out", "bf16 logits，输出 fp32")),
           (torch.float32, [[4, 4, 4, 4]], -0.5, tr("a negative penalty rewards", "负的惩罚即奖励")),
           (torch.float32, [list(range(0, 100, 7)) * 3, [1]], 2.0, tr("many ids, out of order", "很多 id，顺序打乱")),
           (torch.bfloat16, [list(range(0, 128, 2)), list(range(1, 128, 3))], 0.3,
            tr("bf16 logits, many ids: the penalty subtracted after the cast to fp32",
               "bf16 logits，很多 id：先转成 fp32 再减惩罚")),
           (torch.bfloat16, [list(range(64)) * 2, list(range(127, 0, -2))], 1.5,
            tr("bf16 logits, a penalty bf16 holds exactly: logits - penalty still needs more bits",
               "bf16 logits，惩罚本身 bf16 能精确表示：logits - penalty 仍需要更多比特"))]


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
    for k, (dtype, B, V, scale, T, top_k, top_p, tie, note) in enumerate(HIDDEN, 1):
        seed = 21400 + k
        g = torch.Generator().manual_seed(seed)
        logits = (torch.randn(B, V, generator=g) * scale).to(dtype)
        if tie:  # copy the k-th largest logit onto the smallest: a tie that must be kept
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
