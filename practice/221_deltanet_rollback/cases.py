"""Problem 221: cases, oracle and known mistakes.

Oracle: a plain pass over each row's kept tokens from the snapshot, with qwen/deltanet.py's own pieces: causal_conv
(its new state is the conv window) and recurrent_delta_rule (its final state), both proven equal to transformers in
tests/test_deltanet.py. The inputs are made as a verify pass makes them: x (the conv inputs) at random, k and v split
off the causal conv of x after the snapshot's window (k l2-normalised), g ≤ 0 and β in (0, 1). tests/test_practice.py
checks, on a GatedDeltaNet layer, that the rule of the statement gives the cache a plain pass of the layer over the
kept tokens leaves, and that the oracle agrees with qwen/speculative.py's Rollback.
"""
import torch

from practice.grading import Case, Mistake, Tol, compare
from qwen.deltanet import causal_conv, recurrent_delta_rule
from qwen.norm import l2norm

# The state: fp32, 1e-6·max(1, max|y|) + 1e-6·|y| (at most T = 9 steps of the rule; sums over dk in another order
# move the last bits). The window is a copy of inputs: exact in bf16 (steps = 0), and the fp32 rule lets nothing
# but a copy through.
TOL = Tol(rtol=1e-6, atol=1e-6)


def oracle(conv, state, x, k, v, g, beta, n_accepted):
    """Row by row: the conv's new state and the delta rule's final state over the first n_accepted[b] + 1
    tokens, from the snapshot."""
    windows, states = [], []
    ones = torch.ones(x.shape[-1], 1, conv.shape[-1] + 1)  # any weight: only the conv's new state is used
    for b, n in enumerate(n_accepted.tolist()):
        m = n + 1
        windows.append(causal_conv(x[b:b + 1, :m], ones, conv[b:b + 1])[1])
        kept = [t[b:b + 1, :m] for t in (k, k, v, g, beta)]  # q only reads the memory: k stands in for it
        states.append(recurrent_delta_rule(*kept, state[b:b + 1])[1])
    return torch.cat(windows), torch.cat(states)


def inputs(g, B, T, Hk, Hv, dk, dv, K, n_accepted, dtype, decay=2.0):
    """A snapshot and what a verify pass of T tokens computed from it."""
    C = 2 * Hk * dk + Hv * dv  # conv channels [q | k | v], as in the layer
    conv = torch.randn(B, C, K - 1, generator=g).to(dtype)
    state = torch.randn(B, Hv, dk, dv, generator=g) * 0.5
    x = torch.randn(B, T, C, generator=g).to(dtype)
    weight = (torch.randn(C, 1, K, generator=g) * 0.5).to(dtype)
    u, _ = causal_conv(x, weight, conv)  # (B, T, C): what the layer splits into q, k, v
    k = l2norm(u[..., Hk * dk:2 * Hk * dk].reshape(B, T, Hk, dk).float())
    v = u[..., 2 * Hk * dk:].reshape(B, T, Hv, dv)
    gate = -decay * torch.rand(B, T, Hv, generator=g)
    beta = torch.rand(B, T, Hv, generator=g).to(dtype)
    return [("conv", conv), ("state", state), ("x", x), ("k", k), ("v", v), ("g", gate), ("beta", beta),
            ("n_accepted", torch.tensor(n_accepted, dtype=torch.long))]


# (B, T, Hk, Hv, dk, dv, K, n_accepted, dtype, g's range, note). T = the verified tokens: the token fed first and
# T − 1 guesses.
EXAMPLES = [(1, 4, 1, 1, 2, 2, 4, [1], torch.float32, 2.0, "three guesses, the first accepted: 2 of the 4 "
                                                           "verified tokens stay"),
            (2, 3, 1, 2, 2, 2, 4, [0, 2], torch.float32, 2.0, "two rows: no guess accepted, and both")]
HIDDEN = [(1, 2, 2, 2, 8, 8, 4, [0], torch.float32, 2.0, "one guess, rejected: only the token fed first stays"),
          (1, 2, 2, 2, 8, 8, 4, [1], torch.float32, 2.0, "one guess, accepted: nothing to undo"),
          (1, 5, 2, 2, 16, 16, 4, [2], torch.float32, 2.0, "four guesses, two accepted"),
          (3, 5, 2, 4, 8, 8, 4, [4, 0, 2], torch.float32, 2.0, "a batch, each row its own count; value heads = "
                                                               "2 × key heads"),
          (2, 3, 2, 2, 8, 8, 4, [0, 1], torch.float32, 2.0, "fewer kept tokens than K − 1 = 3: the window keeps "
                                                            "inputs from the snapshot"),
          (2, 9, 1, 3, 8, 12, 4, [7, 3], torch.float32, 2.0, "eight guesses; dk ≠ dv, 3 value heads per key head"),
          (2, 5, 2, 2, 16, 16, 4, [1, 3], torch.bfloat16, 2.0, "bf16 conv inputs, window, v and β; the state fp32"),
          (1, 3, 16, 16, 128, 128, 4, [1], torch.bfloat16, 2.0, "the real 0.8B's layer sizes (C = 6,144; 16 heads "
                                                                "of 128 × 128)"),
          (2, 4, 2, 2, 16, 16, 4, [2, 1], torch.float32, 20.0, "strong decays: g down to −20"),
          (4, 4, 1, 2, 8, 8, 2, [3, 0, 1, 2], torch.float32, 2.0, "K = 2: a window of one input"),
          (2, 6, 2, 2, 8, 8, 3, [5, 4], torch.float32, 2.0, "K = 3, most guesses accepted")]


def make_cases(tmp):
    cases = []
    for n, (*sizes, decay, note) in enumerate(EXAMPLES + HIDDEN):
        seed = 22100 + n
        args = inputs(torch.Generator().manual_seed(seed), *sizes, decay=decay)
        label = f"example {n + 1}" if n < len(EXAMPLES) else f"hidden {n + 1 - len(EXAMPLES)}"
        cases.append(Case(label, "rollback", args, None, TOL, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _variant(conv, state, x, k, v, g, beta, n_accepted, kept=lambda n, T: n + 1, window_from_zeros=False,
             state_from_zeros=False):
    """The plain pass with one thing changed: how many tokens a row keeps, the snapshot's window or state
    ignored."""
    T = x.shape[1]
    counts = torch.tensor([kept(n, T) - 1 for n in n_accepted.tolist()])
    return oracle(torch.zeros_like(conv) if window_from_zeros else conv,
                  torch.zeros_like(state) if state_from_zeros else state, x, k, v, g, beta, counts)


def _keep_all(n, T):
    return T


def _like(part, **kw):
    """A check: part 0 (the window) or 1 (the state) of the result is that of a variant, where the variant's is
    wrong; distinct=True: also where keeping every verified token would give something else (so that a mistake
    with a name of its own is not named twice)."""
    distinct = kw.pop("distinct", False)

    def check(got, case):
        if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[part], torch.Tensor)):
            return False
        wrong = _variant(*case.values(), **kw)[part]
        if compare(wrong, case.expected[part], case.tol) is None:
            return False
        if distinct and compare(wrong, _variant(*case.values(), kept=_keep_all)[part], case.tol) is None:
            return False
        return compare(got[part], wrong, case.tol.loose()) is None
    return check


def _either(*checks):
    return lambda got, case: any(c(got, case) for c in checks)


def _one_count(got, case):
    """Every row rolled back with one row's count (where that is not simply keeping every verified token)."""
    n = case.values()[-1]
    for c in sorted(set(n.tolist())):
        same = lambda m, T, c=c: c + 1  # noqa: E731
        if len(set(n.tolist())) > 1 and _either(_like(0, kept=same, distinct=True),
                                                _like(1, kept=same, distinct=True))(got, case):
            return True
    return False


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("state_after_rejected", "rollback", None,
            _hint("looks like the state went through every verified token, the rejected guesses too: a DeltaNet "
                  "state has no length to cut back, it has absorbed them. Start again from the snapshot and run the "
                  "delta rule over the kept tokens only",
                  "看起来状态经过了所有验证过的词元，包括被拒绝的猜测：DeltaNet 的状态没有可以截短的长度，"
                  "它已经吸收了它们。"
                  "应从快照重新开始，只对保留的词元运行 delta 规则"),
            check=_like(1, kept=_keep_all)),
    Mistake("window_not_cut", "rollback", None,
            _hint("looks like the conv window holds the last inputs of every verified token: it must end at the "
                  "last kept token, the last K − 1 inputs of [snapshot window, x[:, :m]]",
                  "看起来卷积窗口存的是所有验证过的词元的最后几个输入：它必须止于最后一个保留的词元，即 "
                  "[快照窗口, x[:, :m]] 的最后 K − 1 个输入"),
            check=_like(0, kept=_keep_all)),
    Mistake("kept_one_too_few", "rollback", None,
            _hint("looks like n_accepted tokens were kept: the verify pass fed the token picked last step first, "
                  "then the guesses, so a row keeps n_accepted + 1 of them (the correction token is not fed yet)",
                  "看起来只保留了 n_accepted 个词元：验证时先喂入的是上一步选出的词元，然后才是猜测，所以每行保留 "
                  "n_accepted + 1 个（纠正词元还没有喂入）"),
            check=_either(_like(0, kept=lambda n, T: n), _like(1, kept=lambda n, T: n))),
    Mistake("kept_one_too_many", "rollback", None,
            _hint("looks like n_accepted + 2 tokens were kept: the one after the accepted guesses is the first "
                  "rejected guess; a row keeps the token fed first and its n_accepted accepted guesses",
                  "看起来保留了 n_accepted + 2 个词元：接受的猜测之后那个是第一个被拒绝的猜测；"
                  "每行保留先喂入的词元和它被"
                  "接受的 n_accepted 个猜测"),
            check=_either(_like(0, kept=lambda n, T: min(n + 2, T), distinct=True),
                          _like(1, kept=lambda n, T: min(n + 2, T), distinct=True))),
    Mistake("window_ignores_snapshot", "rollback", None,
            _hint("looks like the window was made from x alone: when fewer than K − 1 tokens are kept, its oldest "
                  "inputs come from the snapshot's window (take the last K − 1 of the two concatenated)",
                  "看起来窗口只由 x 构成：保留的词元少于 K − 1 个时，窗口里最早的输入来自快照的窗口（把两者拼接后取最后"
                  " "
                  "K − 1 个）"),
            check=_like(0, window_from_zeros=True)),
    Mistake("state_from_zeros", "rollback", None,
            _hint("looks like the delta rule started from an empty memory: start from the snapshot's state, the "
                  "memory of every token before the verify pass",
                  "看起来 delta 规则是从空记忆开始的：应从快照的状态开始，它是验证之前所有词元的记忆"),
            check=_like(1, state_from_zeros=True)),
    Mistake("one_count_for_the_batch", "rollback", None,
            _hint("looks like every row was rolled back with the same count: each row keeps its own "
                  "n_accepted[b] + 1 tokens",
                  "看起来每一行都用同一个个数回滚：每一行保留它自己的 n_accepted[b] + 1 个词元"),
            check=_one_count),
]
