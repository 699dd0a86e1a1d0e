"""Problem 219: cases, oracle and known mistakes.

Oracle: a hand loop, row by row, over the rule as the statement writes it (walk the guesses while each equals the
main model's argmax at its position, then append the argmax where the walk stopped). tests/test_practice.py checks
it, row by row, against qwen/speculative.py's accept (the loop behind speculate(...), itself proven
token for token equal to plain greedy decoding in tests/test_speculative.py).
"""
import torch

from practice.grading import Case, Mistake


def oracle(drafts, logits):
    B, k = drafts.shape
    tokens = torch.full((B, k + 1), -1, dtype=torch.long)
    n = torch.zeros(B, dtype=torch.long)
    for b in range(B):
        i = 0
        while i < k and int(drafts[b, i]) == int(logits[b, i].float().argmax()):
            tokens[b, i] = drafts[b, i]  # guess i + 1 is what the main model would have picked: keep it
            i += 1
        tokens[b, i] = int(logits[b, i].float().argmax())  # the correction (i < k) or the bonus token (i = k)
        n[b] = i
    return tokens, n


def _planted(g, B, k, V, dtype, scale=2.0):
    """Random logits (B, k + 1, V) whose argmax at each position is a random token, a clear margin above the rest
    (so bf16 rounding cannot make a tie), and those argmaxes (B, k + 1)."""
    logits = torch.randn(B, k + 1, V, generator=g) * scale
    target = torch.randint(0, V, (B, k + 1), generator=g)
    logits.scatter_(-1, target[..., None], logits.amax(-1, keepdim=True) + 1.0)
    return logits.to(dtype), target


def _other(g, token, V):
    """A token that is certainly not `token`."""
    return (token + 1 + torch.randint(0, V - 1, token.shape, generator=g)) % V


def build(g, B, k, V, dtype, accepted, tail="random"):
    """drafts (B, k) and logits for rows that accept accepted[b] guesses. After the first wrong guess the rest are
    random ("random"), the main model's own picks again ("agree": only the first disagreement may stop the walk),
    or each equals the main model's pick one position later ("shifted": right only for logits[i] read as
    verifying guess i + 1)."""
    logits, target = _planted(g, B, k, V, dtype)
    drafts = torch.randint(0, V, (B, k), generator=g)
    for b, n in enumerate(accepted):
        if tail == "agree":
            drafts[b] = target[b, :k]
        elif tail == "shifted":
            drafts[b] = target[b, 1:]
        drafts[b, :n] = target[b, :n]
        if n < k and tail != "shifted":
            drafts[b, n] = _other(g, target[b, n], V)
        assert n == k or drafts[b, n] != target[b, n], "the seed planted a guess that happens to be right"
    return [("drafts", drafts), ("logits", logits)]


def _example_1():
    """V = 5, k = 3: the main model's picks after [x, d1, d2, d3] are 2, 4, 1, 3; the guesses are 2, 4, 0."""
    logits = torch.full((1, 4, 5), -1.0)
    for i, t in enumerate([2, 4, 1, 3]):
        logits[0, i, t] = 2.0
    return [("drafts", torch.tensor([[2, 4, 0]])), ("logits", logits)]


def _example_2():
    """Two rows, k = 2: row 0's guesses both agree (the bonus token follows), row 1's first one does not (its
    guesses are the main model's picks one position late)."""
    logits = torch.tensor([[[0.1, 3.0, 0.2, 0.0], [2.5, 0.0, 0.1, 0.3], [0.0, 0.0, 0.0, 1.0]],
                           [[0.1, 3.0, 0.2, 0.0], [2.5, 0.0, 0.1, 0.3], [0.0, 0.0, 0.0, 1.0]]])
    return [("drafts", torch.tensor([[1, 0], [0, 3]])), ("logits", logits)]


# (B, k, V, dtype, accepted per row, tail, note)
HIDDEN = [(1, 1, 100, torch.float32, [1], "random", "k = 1, the guess accepted: the bonus token follows"),
          (1, 1, 100, torch.float32, [0], "random", "k = 1, the guess rejected: the correction replaces it"),
          (1, 4, 1000, torch.float32, [2], "agree", "a wrong guess, then guesses that agree again: the walk stops "
                                                    "at the first wrong one"),
          (1, 4, 1000, torch.float32, [0], "shifted", "each guess is the main model's pick one position later: "
                                                      "logits[:, i] verifies guess i + 1 (drafts[:, i])"),
          (3, 4, 1000, torch.float32, [4, 1, 0], "random", "a batch: each row keeps its own number of guesses"),
          (4, 2, 500, torch.float32, [2, 2, 2, 2], "random", "every row accepts every guess: a bonus token each"),
          (2, 8, 2000, torch.bfloat16, [5, 8], "agree", "bf16 logits, k = 8"),
          (1, 4, 248320, torch.float32, [3], "random", "the real vocabulary (248,320 tokens)"),
          (2, 4, 1000, torch.float32, [0, 4], "shifted", "one row shifted by a position, one all accepted"),
          (5, 3, 300, torch.float32, [3, 0, 2, 1, 3], "agree", "five rows, every count from 0 to k")]


def make_cases(tmp):
    cases = [Case("example 1", "greedy_accept", _example_1(), None, note="V = 5, k = 3: two guesses agree"),
             Case("example 2", "greedy_accept", _example_2(), None, note="a bonus token and a correction")]
    for n, (B, k, V, dtype, accepted, tail, note) in enumerate(HIDDEN, 1):
        seed = 21900 + n
        args = build(torch.Generator().manual_seed(seed), B, k, V, dtype, accepted, tail)
        cases.append(Case(f"hidden {n}", "greedy_accept", args, None, seed=seed, note=note))
    seed = 21900 + len(HIDDEN) + 1  # logits as they come, no planted argmax: random guesses, and some right ones
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 4, 50, generator=g) * 3
    drafts = torch.randint(0, 50, (3, 3), generator=g)
    drafts[1] = logits[1, :3].argmax(-1)
    drafts[2, :1] = logits[2, :1].argmax(-1)
    cases.append(Case(f"hidden {len(HIDDEN) + 1}", "greedy_accept", [("drafts", drafts), ("logits", logits)], None,
                      seed=seed, note="unplanted logits: rows that accept 0 or 1 or every guess"))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _counts(got):
    """The counts n of a result shaped like (tokens, n), or None."""
    if isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], torch.Tensor):
        return got[1].long().reshape(-1) if got[1].dtype in (torch.int64, torch.int32) else None
    return None


def _count_is(wrong_count):
    """A check: the result's counts are wrong_count(drafts, logits) where those differ from the right ones."""
    def check(got, case):
        n, (_, right) = _counts(got), case.expected
        wrong = wrong_count(*case.values())
        return n is not None and n.shape == right.shape and not torch.equal(wrong, right) and torch.equal(n, wrong)
    return check


def _all_matches(drafts, logits):
    return (drafts == logits.argmax(-1)[:, :drafts.shape[1]]).long().sum(1)


def _shifted(drafts, logits):
    return (drafts == logits.argmax(-1)[:, 1:]).long().cumprod(1).sum(1)


def _one_count(got, case):
    """The same count in every row, the fewest (or most) any row accepted: the batch rule of qwen's own loop."""
    n, (_, right) = _counts(got), case.expected
    return n is not None and n.shape == right.shape and len(set(right.tolist())) > 1 and \
        len(set(n.tolist())) == 1 and int(n[0]) in (int(right.min()), int(right.max()))


def _without_correction(drafts, logits):
    tokens, n = oracle(drafts, logits)
    tokens[torch.arange(len(n)), n] = -1
    return tokens, n


def _without_bonus(drafts, logits):
    tokens, n = oracle(drafts, logits)
    full = n == drafts.shape[1]
    tokens[full, -1] = -1
    return tokens, n


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("accept_past_mismatch", "greedy_accept", None,
            _hint("looks like every guess that agrees was counted, also after a wrong one: the walk stops at the "
                  "first guess the main model disagrees with. Its logits after that point were computed from a "
                  "wrong token, so they verify nothing (cumprod of the matches, not their sum)",
                  "看起来把所有相符的猜测都算上了，包括错的那个之后的：应在主模型第一次不同意时停下。那之后的 logits "
                  "是在错误词元之后算出的，什么也验证不了（对逐位相等取 cumprod，而不是求和）"),
            check=_count_is(_all_matches)),
    Mistake("verify_shifted", "greedy_accept", None,
            _hint("looks like guess i was compared with the prediction one position later: the verify pass fed "
                  "[x, d1, ..., dk], so logits[:, 0] (after x) verifies d1 = drafts[:, 0], and logits[:, i] "
                  "verifies drafts[:, i]; logits[:, k] gives the bonus token",
                  "看起来第 i 个猜测是和晚一个位置的预测比较的：验证时喂入的是 [x, d1, ..., dk]，所以 logits[:, 0]"
                  "（x 之后）验证 d1 = drafts[:, 0]，logits[:, i] 验证 drafts[:, i]；logits[:, k] 给出额外的词元"),
            check=_count_is(_shifted)),
    Mistake("no_correction", "greedy_accept", _without_correction,
            _hint("looks like the main model's own token is missing: after the accepted guesses always append its "
                  "argmax at the position where the walk stopped (the correction, or the bonus token when every "
                  "guess was accepted). A step always yields n + 1 tokens",
                  "看起来缺了主模型自己的词元：在接受的猜测之后，总要加上停下的那个位置上主模型的 argmax（纠正词元；"
                  "猜测全部被接受时是额外的词元）。每一步总是产出 n + 1 个词元")),
    Mistake("no_bonus", "greedy_accept", _without_bonus,
            _hint("looks like the bonus token is missing when every guess was accepted: logits[:, k], after the "
                  "last guess, is a prediction the verify pass made for free; its argmax is the (k + 1)-th token",
                  "看起来猜测全部被接受时缺了额外的词元：logits[:, k]（最后一个猜测之后）是验证时顺带算出的预测，"
                  "它的 argmax 就是第 k + 1 个词元")),
    Mistake("one_count_for_the_batch", "greedy_accept", None,
            _hint("looks like every row got the same count: each row accepts its own number of guesses here "
                  "(qwen's generate keeps the fewest for the whole batch so its caches stay rectangular; this step "
                  "reports each row's own)",
                  "看起来每一行得到的是同一个数：这里每一行接受自己的猜测数（qwen 的 generate 为了让缓存保持矩形，"
                  "整批取最少的那个；这一步报告每一行自己的）"),
            check=_one_count),
]
