"""Problem 210: cases, oracle and known mistakes.

Oracle: qwen/deltanet.py's causal_conv, which tests/test_deltanet.py proves equal to transformers' causal_conv1d_fn
(no state) and causal_conv1d_update (with a state): bit for bit in bf16, to fp32 rounding in fp32.
"""
import torch
import torch.nn.functional as F

from practice.grading import Case, Mistake, Tol
from qwen.deltanet import causal_conv as oracle

# bf16: one grid step (a sum in another order may round apart); fp32: 1e-6·max(1, max|y|) + 1e-5·|y|.
# The state is a copy of inputs: exact in any dtype, and the tolerance lets nothing else through.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-6)

# (B, T, C, K, with a state, dtype, note)
HIDDEN = [(1, 10, 8, 4, False, torch.float32, "fp32, from the start of a sequence"),
          (2, 7, 16, 4, True, torch.float32, "fp32, continuing from a state"),
          (2, 1, 24, 4, True, torch.float32, "one token with a state: a decode step"),
          (1, 2, 8, 4, True, torch.float32, "two tokens, fewer than K − 1: the new state mixes old and new"),
          (1, 2, 8, 4, False, torch.float32, "two tokens from the start"),
          (3, 33, 12, 3, True, torch.float32, "K = 3"),
          (2, 9, 6, 2, True, torch.float32, "K = 2"),
          (2, 40, 64, 4, False, torch.bfloat16, "bf16, from the start"),
          (2, 5, 64, 4, True, torch.bfloat16, "bf16, with a state"),
          (1, 1, 128, 4, True, torch.bfloat16, "bf16 decode step"),
          (4, 64, 96, 4, True, torch.float32, "a longer batch")]


def _rand(g, shape, dtype, scale=1.0):
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def make_cases(tmp):
    x = torch.tensor([[[1.0], [10.0], [100.0], [1000.0], [0.0]]]) / 1000  # (1, 5, 1)
    w = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])  # one channel, K = 4
    cases = [Case("example 1", "causal_conv", [("x", x), ("weight", w), ("state", None)], None, TOL),
             Case("example 2", "causal_conv", [("x", x[:, :2]), ("weight", w),
                                               ("state", torch.tensor([[[0.5, -0.25, 0.125]]]))], None, TOL)]
    for k, (B, T, C, K, with_state, dtype, note) in enumerate(HIDDEN, 1):
        seed = 21000 + k
        g = torch.Generator().manual_seed(seed)
        args = [("x", _rand(g, (B, T, C), dtype)), ("weight", _rand(g, (C, 1, K), dtype, 0.5)),
                ("state", _rand(g, (B, C, K - 1), dtype) if with_state else None)]
        cases.append(Case(f"hidden {k}", "causal_conv", args, None, TOL, seed, note))
    for c in cases:
        c.expected = oracle(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _past(x, weight, state):
    B, T, C = x.shape
    K = weight.shape[-1]
    xt = x.transpose(1, 2)
    return torch.cat([xt.new_zeros(B, C, K - 1) if state is None else state, xt], dim=-1), C, K


def _sees_future(x, weight, state):
    full, C, K = _past(x, weight, state)  # padded on both sides, then the last T outputs: t reads t..t+K−1
    u = F.conv1d(full, weight, padding=K - 1, groups=C)[:, :, -x.shape[1]:]
    return F.silu(u).transpose(1, 2), full[:, :, -(K - 1):]


def _state_ignored(x, weight, state):
    return oracle(x, weight, None)


def _new_state_without_old(x, weight, state):
    y, _ = oracle(x, weight, state)  # the output right; the new state from zeros and x, the old state left out
    return y, oracle(x, weight, None)[1]


def _state_not_updated(x, weight, state):
    B, _, C = x.shape
    return oracle(x, weight, state)[0], x.new_zeros(B, C, weight.shape[-1] - 1) if state is None else state


def _no_silu(x, weight, state):
    full, C, K = _past(x, weight, state)
    return F.conv1d(full, weight, groups=C).transpose(1, 2), full[:, :, -(K - 1):]


def _flipped(x, weight, state):
    return oracle(x, weight.flip(-1), state)


def _state_from_output(x, weight, state):
    y, new = oracle(x, weight, state)
    full, C, K = _past(x, weight, state)
    return y, torch.cat([full[:, :, :K - 1], y.transpose(1, 2)], dim=-1)[:, :, -(K - 1):]


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("sees_future", "causal_conv", _sees_future,
            _hint("looks like output t reads inputs t..t+K−1, the future: a causal conv reads t−K+1..t. Put the K−1 "
                  "past inputs (the state, or zeros) in front and convolve without padding, or pad K−1 on the left "
                  "only",
                  "看起来第 t 个输出读的是 t..t+K−1，也就是未来：因果卷积只读 t−K+1..t。把 K−1 个过去的输入（状态，"
                  "或 0）"
                  "放在前面、不加 padding 做卷积，或者只在左边补 K−1 个 0")),
    Mistake("state_not_carried", "causal_conv", _state_ignored,
            _hint("looks like the output ignored the state (zeros in front of x instead): the K−1 inputs before x "
                  "are the state's, so that a decode step sees the tokens before it",
                  "看起来输出忽略了 state（x 前面补的是 0）：x 之前的 K−1 个输入来自 state，"
                  "这样解码的每一步才能看到之前的词")),
    Mistake("new_state_without_old", "causal_conv", _new_state_without_old,
            _hint("the output is right, the new state is not: it looks like it was made from x alone, zeros before "
                  "it. When T < K−1 the last K−1 inputs reach back into the old state: take them from "
                  "[state | x], not from x",
                  "输出是对的，新状态不对：看起来它只由 x 构成，前面补 0。当 T < K−1 时，"
                  "最后 K−1 个输入有一部分来自旧的 "
                  "state：应从 [state | x] 里取，而不是只从 x 里取")),
    Mistake("state_not_updated", "causal_conv", _state_not_updated,
            _hint("the output is right, the new state is not: it is the state that came in (or zeros). Return the "
                  "last K−1 inputs of [state | x], so that the next call continues after x",
                  "输出是对的，新状态不对：它就是传进来的 state（或全 0）。应返回 [state | x] 的最后 K−1 个输入，"
                  "下一次调用才能接在 x 之后")),
    Mistake("no_silu", "causal_conv", _no_silu,
            _hint("looks like silu is missing: the conv's output goes through silu (hidden_act)",
                  "看起来漏了 silu：卷积的输出要再过 silu（hidden_act）")),
    Mistake("flipped_taps", "causal_conv", _flipped,
            _hint("looks like the taps are reversed: weight[c, 0, K−1] multiplies the newest input x_t, "
                  "weight[c, 0, 0] the oldest (conv1d is a correlation, not a flipped convolution)",
                  "看起来卷积核反了：weight[c, 0, K−1] 乘最新的输入 x_t，weight[c, 0, 0] 乘最旧的"
                  "（conv1d 是互相关，不翻转卷积核）")),
    Mistake("state_from_output", "causal_conv", _state_from_output,
            _hint("looks like the new state holds outputs: it must hold the last K−1 *inputs* (before the conv), "
                  "since the next call convolves inputs",
                  "看起来新状态存的是输出：它应存最后 K−1 个*输入*（卷积之前的值），因为下一次调用卷积的是输入")),
]
