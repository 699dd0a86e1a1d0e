"""Problem 219: cases and oracle (the known mistakes: mistakes.toml).

Oracle: a hand loop, row by row, over the rule as the statement writes it (walk the guesses while each equals the
main model's argmax at its position, then append the argmax where the walk stopped). tests/test_practice.py checks
it, row by row, against qwen/speculative.py's accept (the loop behind speculate(...), itself proven
token for token equal to plain greedy decoding in tests/test_speculative.py).
"""
import torch

from practice.grading import Case
from qwen.lang import tr


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
HIDDEN = [(1, 1, 100, torch.float32, [1], "random", tr("k = 1, the guess accepted: the bonus token follows",
                                                       "k = 1，猜测被接受：后面跟着额外 token")),
          (1, 1, 100, torch.float32, [0], "random", tr("k = 1, the guess rejected: the correction replaces it",
                                                       "k = 1，猜测被拒绝：由纠正 token 取代")),
          (1, 4, 1000, torch.float32, [2], "agree",
           tr("a wrong guess, then guesses that agree again: the walk stops at the first wrong one",
              "猜错一个之后，后面的猜测又对上了：遇到第一个猜错的就停")),
          (1, 4, 1000, torch.float32, [0], "shifted",
           tr("each guess is the main model's pick one position later: "
              "logits[:, i] verifies guess i + 1 (drafts[:, i])",
              "每个猜测都是主模型晚一个位置的选择：logits[:, i] 检验的是第 i + 1 个猜测（drafts[:, i]）")),
          (3, 4, 1000, torch.float32, [4, 1, 0], "random", tr("a batch: each row keeps its own number of guesses",
                                                              "一个批次：每行留下的猜测数各不相同")),
          (4, 2, 500, torch.float32, [2, 2, 2, 2], "random", tr("every row accepts every guess: a bonus token each",
                                                                "每行都接受全部猜测：各有一个额外 token")),
          (2, 8, 2000, torch.bfloat16, [5, 8], "agree", tr("bf16 logits, k = 8", "bf16 的 logits，k = 8")),
          (1, 4, 248320, torch.float32, [3], "random", tr("the real vocabulary (248,320 tokens)",
                                                          "真实词表（248,320 个 token）")),
          (2, 4, 1000, torch.float32, [0, 4], "shifted", tr("one row shifted by a position, one all accepted",
                                                            "一行错开一个位置，一行全部接受")),
          (5, 3, 300, torch.float32, [3, 0, 2, 1, 3], "agree", tr("five rows, every count from 0 to k",
                                                                  "五行，个数从 0 到 k 都有"))]


def make_cases(tmp):
    cases = [Case("example 1", "greedy_accept", _example_1(), None, note=tr("V = 5, k = 3: two guesses agree",
                                                                            "V = 5，k = 3：两个猜测对上了")),
             Case("example 2", "greedy_accept", _example_2(), None, note=tr("a bonus token and a correction",
                                                                            "一个额外 token 和一个纠正 token"))]
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
                      seed=seed, note=tr("unplanted logits: rows that accept 0 or 1 or every guess",
                                         "未预设 argmax 的 logits：各行接受 0 个、1 个或全部猜测")))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases
