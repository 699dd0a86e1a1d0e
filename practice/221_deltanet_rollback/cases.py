"""Problem 221: cases and oracle.

Oracle: a plain pass over each row's kept tokens from the snapshot, with qwen/deltanet.py's own pieces: causal_conv
(its new state is the conv window) and recurrent_delta_rule (its final state), both proven equal to transformers in
tests/test_deltanet.py. The inputs are made as a verify pass makes them: x (the conv inputs) at random, k and v split
off the causal conv of x after the snapshot's window (k l2-normalised), g ≤ 0 and β in (0, 1). tests/test_practice.py
checks, on a GatedDeltaNet layer, that the rule of the statement gives the cache a plain pass of the layer over the
kept tokens leaves, and that the oracle agrees with qwen/speculative.py's Rollback.
"""
import torch

from practice.grading import Case, Tol
from qwen.deltanet import causal_conv, recurrent_delta_rule
from qwen.lang import tr
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
EXAMPLES = [(1, 4, 1, 1, 2, 2, 4, [1], torch.float32, 2.0,
             tr("three guesses, the first accepted: 2 of the 4 verified tokens stay",
                "三个猜测，第一个被接受：验证过的 4 个 token 留下 2 个")),
            (2, 3, 1, 2, 2, 2, 4, [0, 2], torch.float32, 2.0, tr("two rows: no guess accepted, and both",
                                                                 "两行：一行没有猜测被接受，另一行两个都被接受"))]
HIDDEN = [(1, 2, 2, 2, 8, 8, 4, [0], torch.float32, 2.0, tr("one guess, rejected: only the token fed first stays",
                                                            "一个猜测，被拒绝：只留下最先喂入的 token")),
          (1, 2, 2, 2, 8, 8, 4, [1], torch.float32, 2.0, tr("one guess, accepted: nothing to undo",
                                                            "一个猜测，被接受：无需撤销")),
          (1, 5, 2, 2, 16, 16, 4, [2], torch.float32, 2.0, tr("four guesses, two accepted", "四个猜测，两个被接受")),
          (3, 5, 2, 4, 8, 8, 4, [4, 0, 2], torch.float32, 2.0,
           tr("a batch, each row its own count; value heads = 2 × key heads",
              "一个批次，每行的个数各不相同；值头数 = 2 × 键头数")),
          (2, 3, 2, 2, 8, 8, 4, [0, 1], torch.float32, 2.0,
           tr("fewer kept tokens than K − 1 = 3: the window keeps inputs from the snapshot",
              "留下的 token 少于 K − 1 = 3 个：窗口里还留着快照中的输入")),
          (2, 9, 1, 3, 8, 12, 4, [7, 3], torch.float32, 2.0, tr("eight guesses; dk ≠ dv, 3 value heads per key head",
                                                                "八个猜测；dk ≠ dv，每个键头对应 3 个值头")),
          (2, 5, 2, 2, 16, 16, 4, [1, 3], torch.bfloat16, 2.0, tr("bf16 conv inputs, window, v and β; the state fp32",
                                                                  "卷积输入、窗口、v 和 β 为 bf16；状态为 fp32")),
          (1, 3, 16, 16, 128, 128, 4, [1], torch.bfloat16, 2.0,
           tr("the real 0.8B's layer sizes (C = 6,144; 16 heads of 128 × 128)",
              "真实 0.8B 的层尺寸（C = 6,144；16 个 128 × 128 的头）")),
          (2, 4, 2, 2, 16, 16, 4, [2, 1], torch.float32, 20.0, tr("strong decays: g down to −20",
                                                                  "强衰减：g 低至 −20")),
          (4, 4, 1, 2, 8, 8, 2, [3, 0, 1, 2], torch.float32, 2.0, tr("K = 2: a window of one input",
                                                                     "K = 2：窗口只有一个输入")),
          (2, 6, 2, 2, 8, 8, 3, [5, 4], torch.float32, 2.0, tr("K = 3, most guesses accepted",
                                                               "K = 3，大多数猜测被接受")),
          (2, 4, 2, 6, 8, 8, 4, [1, 3], torch.float32, 2.0,
           tr("two key heads, each read by 3 value heads (0,0,0,1,1,1)", "两个键头，各被 3 个值头读取（0,0,0,1,1,1）"))]


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
