"""Problem 220: cases and oracle (the known mistakes: mistakes.toml).

Oracle: a hand loop in Python floats (float64), row by row, over the rule as the statement writes it. Two kinds of
case: exact ones, whose uniforms are moved at least 1e-4 away from every p/q they are compared with and from the
ends of the interval the last draw lands in (so the order of a learner's sums cannot change a decision), and two
distribution cases of 20,000 rows that share one p and one q over a tiny vocabulary, with the guesses drawn from q
as a real draft draws them. Those are graded by a statistic, not by the draws: the total-variation distance between
the frequencies of each row's first new token and p[:, 0] must stay within 0.025. That is the property the rule
exists for (the first token is distributed exactly as p, whatever q); a right answer exceeds the bound with
probability below 1e-8 (Hoeffding on each of the 2^(V+1) sets of outcomes, an out-of-range token counting as one:
2^7·exp(−2·20,000·0.025²) < 2e-9), and every known mistake (mistakes.toml) that changes the first token's
distribution moves it by more than 0.1 there. tests/test_practice.py checks the oracle's first tokens against p (the
bound), its accepted guesses against qwen/speculative.py's accept (the same rule) given the same uniforms, that
accept's own draws pass the same bound, and the mistakes' distances.
"""
import torch

from practice.grading import Case, Mismatch, compare
from qwen.lang import tr

MARGIN = 1e-4  # how far every uniform of an exact case stays from the values it is compared with
TV_BOUND = 0.025
DRAWS = 20_000


def _draw(r, w):
    """The smallest j with w < r_0 + ... + r_j (r: a list of floats summing to 1)."""
    c, last = 0.0, 0
    for j, x in enumerate(r):
        c += x
        if x > 0:
            last = j
        if w < c:
            return j
    return last  # w at or past a total rounded below 1: the last token with mass


def _last_distribution(P, Q, i, k):
    """The distribution the last token is drawn from after i accepted guesses (P: k + 1 lists, Q: k lists): the
    residual max(p_i − q_i, 0) normalised, or p_k when every guess was accepted."""
    if i == k:
        return P[k]
    r = [max(a - c, 0.0) for a, c in zip(P[i], Q[i])]
    total = sum(r)
    return [x / total for x in r]


def oracle(p, q, drafts, u, u_last):
    B, k = drafts.shape
    P, Q, D = p.double().tolist(), q.double().tolist(), drafts.tolist()
    U, W = u.double().tolist(), u_last.double().tolist()
    tokens = [[-1] * (k + 1) for _ in range(B)]
    n = [0] * B
    for b in range(B):
        i = 0
        while i < k and U[b][i] < P[b][i][D[b][i]] / Q[b][i][D[b][i]]:  # accept with probability min(1, p/q)
            tokens[b][i] = D[b][i]
            i += 1
        tokens[b][i] = _draw(_last_distribution(P[b], Q[b], i, k), W[b])
        n[b] = i
    return torch.tensor(tokens, dtype=torch.long), torch.tensor(n, dtype=torch.long)


# ---------------------------------------------------------------- the inputs

def _away(w, points):
    """w moved (in steps of 0.0037, wrapping) until it is at least MARGIN from every point and from 0 and 1."""
    for _ in range(10_000):
        if MARGIN <= w < 1 - MARGIN and all(abs(w - x) >= MARGIN for x in points):
            return w
        w = (w + 0.0037) % 1.0
    raise AssertionError("no uniform keeps its distance")  # a bug in the case table


def nudge(p, q, drafts, u, u_last):
    """The uniforms of an exact case, moved away from every p/q they meet and from the ends of the interval the
    last draw lands in."""
    B, k = drafts.shape
    P, Q, D = p.double().tolist(), q.double().tolist(), drafts.tolist()
    u, u_last = u.clone(), u_last.clone()
    for b in range(B):
        ratios = [P[b][j][D[b][j]] / Q[b][j][D[b][j]] for j in range(k)]
        for j in range(k):
            u[b, j] = _away(float(u[b, j]), [ratios[j]])
        i = 0
        while i < k and float(u[b, i]) < ratios[i]:
            i += 1
        r = _last_distribution(P[b], Q[b], i, k)
        ends, c = [], 0.0
        for x in r:
            c += x
            ends.append(c)
        w = float(u_last[b])
        for _ in range(10_000):  # inside an interval of width > 2·MARGIN, at least MARGIN from both its ends
            j = _draw(r, w)
            lo, hi = (ends[j - 1] if j else 0.0), ends[j]
            if lo + MARGIN <= w <= hi - MARGIN:
                break
            w = (w + 0.0037) % 1.0
        else:
            raise AssertionError("no last uniform keeps its distance")  # a bug in the case table
        u_last[b] = w
    return u.float(), u_last.float()


def _sample(g, probs):
    """One token per row of probs (..., V), drawn with generator g."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=g).reshape(probs.shape[:-1])


def inputs(g, B, k, V, q_kind, top_k=None, u_kind="rand", scale=2.0):
    """p: softmax of random logits (B, k + 1, V), optionally cut to its top_k tokens; q (B, k, V) by kind: "same"
    (q = p, a draft as good as the main model), "near" (the main model's logits plus noise, not cut), "far"
    (unrelated), "onehot" (a deterministic draft); the guesses drawn from q; uniforms as u_kind says."""
    logits = torch.randn(B, k + 1, V, generator=g) * scale
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        p = logits.masked_fill(logits < kth, float("-inf")).softmax(-1)
    else:
        p = logits.softmax(-1)
    if q_kind == "same":
        q = p[:, :k].clone()
    elif q_kind == "near":
        q = (logits[:, :k] + 0.8 * torch.randn(B, k, V, generator=g)).softmax(-1)
    elif q_kind == "far":
        q = (torch.randn(B, k, V, generator=g) * scale).softmax(-1)
    if q_kind == "onehot":  # the guess: a token of p's support, the draft sure of it
        drafts = _sample(g, p[:, :k])
        q = torch.zeros(B, k, V).scatter_(-1, drafts[..., None], 1.0)
    else:
        drafts = _sample(g, q)
    u = torch.rand(B, k, generator=g)
    u = u * 0.05 if u_kind == "small" else 0.9 + 0.1 * u if u_kind == "large" else u
    u_last = torch.rand(B, generator=g)
    u, u_last = nudge(p, q, drafts, u, u_last)
    return [("p", p), ("q", q), ("drafts", drafts), ("u", u), ("u_last", u_last)]


def shared(g, p_rows, q_rows, B=DRAWS):
    """A distribution case: B rows with the same p (k + 1, V) and q (k, V), guesses drawn from q, uniforms as
    they come (graded by the distribution of the first token, so none is moved)."""
    p, q = torch.tensor(p_rows).expand(B, -1, -1).contiguous(), torch.tensor(q_rows).expand(B, -1, -1).contiguous()
    drafts = _sample(g, q)
    k = q.shape[1]
    return [("p", p), ("q", q), ("drafts", drafts), ("u", torch.rand(B, k, generator=g)),
            ("u_last", torch.rand(B, generator=g))]


def first_token_tv(tokens, p_first):
    """The total-variation distance between the frequencies of tokens (B,) and p_first (V,); a token outside
    0..V-1 counts as an outcome p never gives."""
    V = p_first.shape[0]
    inside = (tokens >= 0) & (tokens < V)
    freq = torch.bincount(tokens[inside], minlength=V).double() / tokens.numel()
    return 0.5 * (float((freq - p_first.double()).abs().sum()) + float((~inside).double().mean()))


def distribution_check(got, case):
    """The grading of a distribution case: the result shaped as expected, each row its accepted guesses then one
    token, and the first tokens' frequencies within TV_BOUND of p."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return compare(got, case.expected)
    for i, (g, e) in enumerate(zip(got, case.expected)):
        m = compare(g, e, where=f"output[{i}]")
        if m is not None and m.kind != "value":  # the wrong structure: not a tensor, shape, dtype
            return m
    tokens, n = got
    drafts = case.values()[2]
    pos = torch.arange(tokens.shape[1])[None, :]
    guesses = torch.cat([drafts, drafts.new_full((len(drafts), 1), -1)], 1)
    shaped = ((pos < n[:, None]) & (tokens != guesses)) | ((pos > n[:, None]) & (tokens != -1))
    bad = torch.nonzero(shaped.any(1) | (n < 0) | (n > drafts.shape[1]))
    if len(bad):  # draws are free here, the shape of a row is not
        b = int(bad[0, 0])
        return Mismatch(tr(f"output (row {b})", f"output（第 {b} 行）"), "scalar", {
            "expected": tr("0 <= n[b] <= k, tokens[b, :n[b]] = drafts[b, :n[b]], -1 after tokens[b, n[b]]",
                           "0 <= n[b] <= k，tokens[b, :n[b]] = drafts[b, :n[b]]，tokens[b, n[b]] 之后全是 -1"),
            "got": f"n[b] = {int(n[b])}, tokens[b] = {tokens[b].tolist()}, drafts[b] = {drafts[b].tolist()}"})
    p_first = case.values()[0][0, 0]
    tv = first_token_tv(tokens[:, 0], p_first)
    if tv <= TV_BOUND:
        return None
    rows = case.values()[0].shape[0]
    return Mismatch(tr("output[0][:, 0] (each row's first new token, over all rows, against p[0, 0])",
                       "output[0][:, 0]（每行的第一个新 token，统计所有行，与 p[0, 0] 对照）"), "scalar",
                    {"expected": tr(f"TV(frequencies, p[0, 0]) <= {TV_BOUND} over {rows:,} rows",
                                    f"频率与 p[0, 0] 的 TV 距离 <= {TV_BOUND}，共 {rows:,} 行"),
                     "got": tr(f"TV(frequencies, p[0, 0]) = {tv:.4f}", f"频率与 p[0, 0] 的 TV 距离 = {tv:.4f}")})


# the distribution cases' p and q: rows 0 are the first position, whose distribution the statistic tests
DIST_A = ([[0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]],
          [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
DIST_B = ([[0.1, 0.15, 0.4, 0.2, 0.1, 0.05], [0.3, 0.1, 0.1, 0.2, 0.2, 0.1]],
          [[0.0, 0.0, 1.0, 0.0, 0.0, 0.0]])

# (B, k, V, kind of q, top-k of p, kind of uniforms, note)
HIDDEN = [(3, 1, 10, "same", None, "rand",
           tr("the draft is the main model (q = p): every guess accepted, then the bonus token drawn from p[:, 1]",
              "草稿就是主模型（q = p）：猜测全被接受，再从 p[:, 1] 抽出额外 token")),
          (4, 3, 50, "far", None, "rand", tr("an unrelated draft: early rejections, the residual",
                                             "毫不相关的草稿：很早就被拒绝，从残差分布抽取")),
          (4, 3, 50, "near", None, "rand", tr("a draft close to the main model", "与主模型接近的草稿")),
          (3, 2, 100, "onehot", None, "rand",
           tr("a deterministic draft (q one-hot): accepted with probability p(d), else drawn from p without d, "
              "renormalised",
              "确定性的草稿（q 是 one-hot）：以概率 p(d) 接受，否则从去掉 d 并重新归一化的 p 中抽取")),
          (3, 4, 200, "near", 20, "rand", tr("p cut to 20 tokens (top-k 20): a guess outside them has p = 0",
                                             "p 只保留 20 个 token（top-k 20）：落在其外的猜测 p = 0")),
          (2, 3, 1000, "near", None, "small", tr("small uniforms: most guesses accepted, bonus tokens",
                                                 "均匀数偏小：大多数猜测被接受，有额外 token")),
          (2, 4, 1000, "far", None, "large", tr("large uniforms: most rows stop at the first guess",
                                                "均匀数偏大：大多数行在第一个猜测处停下")),
          (1, 2, 248320, "near", 20, "rand", tr("the real vocabulary (248,320 tokens), p cut to its top 20",
                                                "真实词表（248,320 个 token），p 只保留前 20 个")),
          (6, 3, 30, "near", None, "rand", tr("a batch, each row its own count", "一个批次，每行的个数各不相同"))]


def _examples():
    ex1 = [("p", torch.tensor([[[0.5, 0.2, 0.2, 0.1], [0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]])),
           ("q", torch.tensor([[[0.25, 0.25, 0.25, 0.25], [0.05, 0.25, 0.6, 0.1]]])),
           ("drafts", torch.tensor([[0, 2]])), ("u", torch.tensor([[0.7, 0.5]])), ("u_last", torch.tensor([0.8]))]
    ex2 = [("p", torch.tensor([[[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]]])), ("q", torch.tensor([[[0.3, 0.4, 0.3]]])),
           ("drafts", torch.tensor([[1]])), ("u", torch.tensor([[0.9]])), ("u_last", torch.tensor([0.75]))]
    ex3 = [("p", torch.tensor([[[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]]])), ("q", torch.tensor([[[0.0, 1.0, 0.0]]])),
           ("drafts", torch.tensor([[1]])), ("u", torch.tensor([[0.4]])), ("u_last", torch.tensor([0.8]))]
    return [Case("example 1", "speculative_sample", ex1, None, note=tr("a guess accepted, the next rejected",
                                                                       "一个猜测被接受，下一个被拒绝")),
            Case("example 2", "speculative_sample", ex2, None, note=tr("every guess accepted: the bonus token",
                                                                       "猜测全被接受：额外 token")),
            Case("example 3", "speculative_sample", ex3, None, note=tr("a deterministic draft, rejected",
                                                                       "确定性的草稿，被拒绝"))]


def make_cases(tmp):
    cases = _examples()
    for n, (B, k, V, q_kind, top_k, u_kind, note) in enumerate(HIDDEN, 1):
        seed = 22000 + n
        args = inputs(torch.Generator().manual_seed(seed), B, k, V, q_kind, top_k, u_kind)
        cases.append(Case(f"hidden {n}", "speculative_sample", args, None, seed=seed, note=note))
    distributions = [(DIST_A, tr("V = 4, k = 2, guesses drawn from q: the first token's frequencies against p",
                                 "V = 4，k = 2，猜测从 q 中抽出：第一个 token 的频率与 p 对照")),
                     (DIST_B, tr("V = 6, k = 1, a deterministic draft (always token 2): the first token's "
                                 "frequencies against p",
                                 "V = 6，k = 1，确定性的草稿（总是 token 2）：第一个 token 的频率与 p 对照"))]
    for n, (rows, note) in enumerate(distributions, len(HIDDEN) + 1):
        seed = 22000 + n
        args = shared(torch.Generator().manual_seed(seed), *rows)
        cases.append(Case(f"hidden {n}", "speculative_sample", args, None, seed=seed, note=note,
                          check=distribution_check))
    for c in cases:
        if c.check is None:
            c.expected = oracle(*c.values())
        else:  # 20,000 rows in Python: computed once per process (the inputs are fixed by the seed)
            if c.seed not in _SHARED:
                _SHARED[c.seed] = oracle(*c.values())
            c.expected = tuple(t.clone() for t in _SHARED[c.seed])
    return cases


_SHARED = {}  # seed -> the oracle's answer to a distribution case
