"""Problem 219: cases and oracle (the known mistakes: mistakes.toml).

Oracle: a hand loop, row by row, over the rule as the statement writes it (walk the guesses while each equals the
main model's argmax at its position, then append the argmax where the walk stopped). tests/test_practice.py checks
it, row by row, against qwen/speculative.py's accept (the loop behind speculate(...), itself proven
token for token equal to plain greedy decoding in tests/test_speculative.py).
"""
import torch

from practice.grading import Case


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
