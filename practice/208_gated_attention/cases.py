"""Problem 208: cases, oracle and known mistakes.

Oracle: qwen/attention.py (`attention` with `causal_mask`, and `GatedAttention`), which tests/test_attention.py
proves equal to transformers' Qwen3_5Attention (eager: fp32 to 1e-5, bf16 bit for bit) and tests/test_practice.py
checks against transformers on every case here.
"""
import torch
import torch.nn.functional as F

from practice.grading import Case, Mistake, Tol
from qwen.attention import GatedAttention, attention, causal_mask
from qwen.config import Config
from qwen.rope import RotaryEmbedding
from qwen.weights import fill

# fp32: 1e-5·max(1, max|y|) + 1e-5·|y|. bf16: 1 grid step; the order of the statement (transformers' eager order)
# gives the same bits, a fused kernel does not.
TOL = Tol(steps=1, rtol=1e-5, atol=1e-5)


def oracle_attend(q, k, v, mask):
    group = q.shape[1] // k.shape[1]
    allowed = causal_mask(q.shape[2], k.shape[2] - q.shape[2], mask, q.device)
    return attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), allowed)


def module(weights, eps):
    """GatedAttention with the given weights; its sizes read off the weights' shapes."""
    D = weights["q_norm.weight"].shape[0]
    cfg = Config(hidden_size=weights["q_proj.weight"].shape[1], num_attention_heads=weights["q_proj.weight"].shape[0]
                 // (2 * D), num_key_value_heads=weights["k_proj.weight"].shape[0] // D, head_dim=D, rms_norm_eps=eps)
    return fill(GatedAttention(cfg).to(weights["q_proj.weight"].dtype), weights)


@torch.no_grad()
def oracle_gated(x, weights, cos, sin, mask, eps):
    return module(weights, eps)(x, cos, sin, mask=mask)


def layer_weights(g, d, H, Hkv, D, dtype):
    """The six tensors of one attention layer, scaled like trained ones (unit-scale activations)."""
    w = {"q_proj.weight": torch.randn(2 * H * D, d, generator=g) / d ** 0.5,
         "k_proj.weight": torch.randn(Hkv * D, d, generator=g) / d ** 0.5,
         "v_proj.weight": torch.randn(Hkv * D, d, generator=g) / d ** 0.5,
         "o_proj.weight": torch.randn(d, H * D, generator=g) / (H * D) ** 0.5,
         "q_norm.weight": torch.randn(D, generator=g) * 0.3 + 0.3,  # zero-centred: scale 1 + w
         "k_norm.weight": torch.randn(D, generator=g) * 0.3 + 0.1}
    return {k: t.to(dtype) for k, t in w.items()}


def padding(B, T, pads):
    """(B, T) bool with pads[b] padding tokens on the left, and the positions generate() gives such a batch."""
    mask = torch.ones(B, T, dtype=torch.bool)
    for b, n in enumerate(pads):
        mask[b, :n] = False
    return mask, (mask.long().cumsum(-1) - 1).clamp_min(0)


# attend: (B, H, Hkv, T, S, D, dtype, left pads or None, scale of q and k, note)
ATTEND = [(1, 8, 2, 7, 7, 16, torch.float32, None, 1.0, "fp32, 8 query heads share 2 K/V heads"),
          (1, 6, 2, 5, 9, 48, torch.float32, None, 1.0, "fp32, 3 query heads per K/V head, 4 keys from a cache"),
          (1, 4, 4, 1, 12, 32, torch.float32, None, 1.0, "fp32, one new token after 11 cached ones, no sharing"),
          (2, 4, 2, 6, 6, 64, torch.float32, [2, 0], 1.0, "fp32, left padding: 2 queries see no key"),
          (2, 8, 2, 4, 10, 256, torch.float32, [3, 0], 2.0, "fp32, D = 256 as in Qwen3.5, padded cache"),
          (1, 2, 1, 64, 64, 16, torch.float32, None, 2.0, "fp32, 64 tokens"),
          (2, 8, 2, 9, 9, 64, torch.bfloat16, [0, 4], 1.0, "bf16, left padding"),
          (1, 8, 2, 5, 21, 256, torch.bfloat16, None, 2.0, "bf16, the 0.8B's heads: H 8, Hkv 2, D 256"),
          (2, 4, 1, 16, 16, 16, torch.bfloat16, None, 3.0, "bf16, 4 query heads per K/V head, sharp scores"),
          (3, 4, 2, 1, 10, 32, torch.float32, [4, 0, 9], 1.0, "fp32, one new token (T = 1) after left padding"),
          (2, 8, 2, 1, 21, 256, torch.bfloat16, [6, 0], 2.0, "bf16, a decode step (T = 1) after left padding")]
# gated_attention: (B, d, H, Hkv, D, T, partial_rotary_factor, rope_theta, eps, dtype, left pads, scale of x, note)
GATED = [(1, 64, 4, 2, 16, 6, 0.5, 1e4, 1e-6, torch.float32, None, 1.0, "fp32, d = H·D"),
         (1, 48, 6, 2, 16, 5, 0.25, 1e7, 1e-5, torch.float32, None, 1.0, "fp32, 3 query heads per K/V head, eps 1e-5"),
         (2, 64, 4, 2, 64, 7, 0.25, 1e7, 1e-6, torch.float32, [0, 3], 1.0, "fp32, the synthetic checkpoint's sizes, "
                                                                            "padded"),
         (1, 40, 4, 4, 8, 5, 1.0, 500.0, 1e-6, torch.float32, None, 1.0, "fp32, no sharing, every dim rotates"),
         (1, 128, 8, 2, 32, 3, 0.25, 1e7, 1e-6, torch.float32, None, 1.0, "fp32, 4 query heads per K/V head"),
         (2, 64, 4, 2, 64, 9, 0.25, 1e7, 1e-6, torch.bfloat16, [2, 0], 1.0, "bf16, the synthetic checkpoint's sizes, "
                                                                             "pads"),
         (1, 1024, 8, 2, 256, 4, 0.25, 1e7, 1e-6, torch.bfloat16, None, 1.0, "bf16, the real 0.8B's sizes"),
         (1, 96, 6, 2, 16, 6, 0.25, 1e4, 1e-6, torch.bfloat16, None, 1.0, "bf16, rope_theta 10000 (the default)"),
         (1, 64, 4, 2, 16, 5, 0.25, 1e7, 1e-5, torch.float32, None, 0.01, "fp32, small activations (x ~ 0.01): "
                                                                           "eps 1e-5 is a tenth of q's mean square")]


def make_cases(tmp):
    e = torch.e
    cases = [
        Case("example 1", "attend", [("q", torch.tensor([[[[1.0, 0, 0, 0], [0, 2.0, 0, 0]]]])),
                                     ("k", torch.tensor([[[[2.0, 0, 0, 0], [0, 2.0, 0, 0]]]])),
                                     ("v", torch.tensor([[[[1.0, 2, 3, 4], [5.0, 6, 7, 8]]]])), ("mask", None)],
             torch.tensor([[[[1.0, 2, 3, 4], [1 + 4 * e ** 2 / (1 + e ** 2) + k for k in range(4)]]]]), TOL),
    ]
    g = torch.Generator().manual_seed(20800)
    q, k, v = torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 3, 8, generator=g), torch.randn(1, 2, 3, 8,
                                                                                                      generator=g)
    cases.append(Case("example 2", "attend", [("q", q), ("k", k), ("v", v), ("mask", None)], None, TOL))
    w = layer_weights(g, 32, 2, 1, 16, torch.float32)
    cos, sin = RotaryEmbedding(Config(head_dim=16, partial_rotary_factor=0.25, rope_theta=1e7))(
        torch.arange(4)[None], torch.float32)
    cases.append(Case("example 3", "gated_attention", [("x", torch.randn(1, 4, 32, generator=g)), ("weights", w),
                                                       ("cos", cos), ("sin", sin), ("mask", None), ("eps", 1e-6)],
                      None, TOL))
    n = 0
    for B, H, Hkv, T, S, D, dtype, pads, scale, note in ATTEND:
        n += 1
        g = torch.Generator().manual_seed(20800 + n)
        q = (torch.randn(B, H, T, D, generator=g) * scale).to(dtype)
        k = (torch.randn(B, Hkv, S, D, generator=g) * scale).to(dtype)
        v = torch.randn(B, Hkv, S, D, generator=g).to(dtype)
        mask = padding(B, S, pads)[0] if pads else None
        cases.append(Case(f"hidden {n}", "attend", [("q", q), ("k", k), ("v", v), ("mask", mask)], None, TOL,
                          20800 + n, note))
    for B, d, H, Hkv, D, T, partial, theta, eps, dtype, pads, scale, note in GATED:
        n += 1
        g = torch.Generator().manual_seed(20800 + n)
        w = layer_weights(g, d, H, Hkv, D, dtype)
        mask, pos = padding(B, T, pads or [0] * B)
        cos, sin = RotaryEmbedding(Config(head_dim=D, partial_rotary_factor=partial, rope_theta=theta))(pos, dtype)
        x = (torch.randn(B, T, d, generator=g) * scale).to(dtype)
        cases.append(Case(f"hidden {n}", "gated_attention", [("x", x), ("weights", w), ("cos", cos), ("sin", sin),
                                                             ("mask", mask if pads else None), ("eps", eps)],
                          None, TOL, 20800 + n, note))
    for c in cases:
        if c.expected is None:
            c.expected = (oracle_attend if c.fn == "attend" else oracle_gated)(*c.values())
    return cases


# ---------------------------------------------------------------- known mistakes: the wrong answers they give

def _attend(q, k, v, mask, scale=True, softmax="fp32", share="interleave", diagonal=0, offset=True, fill="min",
            padding=True):
    """attend with one thing changed: the wrong variants below."""
    B, H, T, D = q.shape
    S, group = k.shape[2], H // k.shape[1]
    if share == "interleave":
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    else:  # tiled: head h reads K/V head h % Hkv
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores * D ** -0.5
    rows = torch.arange(S - T if offset else 0, (S if offset else T))[:, None]
    allowed = torch.arange(S)[None, :] <= rows + diagonal
    if mask is not None and padding:
        allowed = allowed & mask[:, None, None, :]
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min if fill == "min" else float("-inf"))
    if softmax == "fp32":
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    else:  # exp and sum by hand, in the input dtype
        e = torch.exp(scores - scores.amax(-1, keepdim=True))
        probs = e / e.sum(-1, keepdim=True)
    return probs @ v


def _gated(x, w, cos, sin, mask, eps, split="per_head", sigmoid=True, gate_after=False, norm_first=True,
           one_plus_w=True):
    """gated_attention with one thing changed."""
    B, T, d = x.shape
    D = w["q_norm.weight"].shape[0]
    H, Hkv = w["q_proj.weight"].shape[0] // (2 * D), w["k_proj.weight"].shape[0] // D
    qg = F.linear(x, w["q_proj.weight"])
    if split == "per_head":
        q, gate = qg.view(B, T, H, 2 * D).split(D, dim=-1)
    else:  # [all queries | all gates]
        q, gate = qg.view(B, T, 2, H, D).unbind(2)

    def norm(t, weight):
        tf = t.float()
        scale = (1 + weight.float()) if one_plus_w else weight.float()
        return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + eps) * scale).to(t.dtype)

    def rope(t):  # t (B, n, T, D)
        R = cos.shape[-1]
        c, s = cos[:, None], sin[:, None]
        t1, t2 = t[..., :R // 2], t[..., R // 2:R]
        return torch.cat((t1 * c[..., :R // 2] - t2 * s[..., :R // 2], t2 * c[..., R // 2:] + t1 * s[..., R // 2:],
                          t[..., R:]), dim=-1)

    q = q.transpose(1, 2)
    k = F.linear(x, w["k_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    v = F.linear(x, w["v_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    if norm_first:
        q, k = rope(norm(q, w["q_norm.weight"])), rope(norm(k, w["k_norm.weight"]))
    else:
        q, k = norm(rope(q), w["q_norm.weight"]), norm(rope(k), w["k_norm.weight"])
    out = _attend(q, k, v, mask).transpose(1, 2).reshape(B, T, H * D)
    gate = gate.reshape(B, T, H * D)
    gate = torch.sigmoid(gate) if sigmoid else gate
    if gate_after:
        return F.linear(out, w["o_proj.weight"]) * gate  # needs d == H·D to run at all
    return F.linear(out * gate, w["o_proj.weight"])


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("no_scale", "attend", lambda q, k, v, m: _attend(q, k, v, m, scale=False),
            _hint("looks like the scores were not scaled: divide q·kᵀ by √D (D = head size); without it the softmax "
                  "is far too sharp for large D",
                  "看起来分数没有缩放：q·kᵀ 要除以 √D（D 是头的大小）；不缩放时 D 越大 softmax 越尖")),
    Mistake("softmax_bf16", "attend", lambda q, k, v, m: _attend(q, k, v, m, softmax="low"),
            _hint("looks like the softmax was computed in bf16 (exp and sum in the input dtype): compute it in fp32, "
                  "torch.softmax(scores, dim=-1, dtype=torch.float32), then cast the probabilities back to q's dtype",
                  "看起来 softmax 是在 bf16 里算的（exp 和求和用输入的 dtype）：应在 fp32 里算，"
                  "torch.softmax(scores, dim=-1, dtype=torch.float32)，再把概率转回 q 的 dtype")),
    Mistake("repeat_not_interleave", "attend", lambda q, k, v, m: _attend(q, k, v, m, share="tile"),
            _hint("looks like the K/V heads were tiled (repeat: head h reads K/V head h % Hkv): query head h shares "
                  "K/V head h // (H/Hkv), a run of consecutive heads per K/V head, so use "
                  "repeat_interleave(H // Hkv, dim=1)",
                  "看起来 K/V 头是平铺复制的（repeat：第 h 个头读第 h % Hkv 个 K/V 头）："
                  "第 h 个查询头应读第 h // (H/Hkv) 个，"
                  "每个 K/V 头服务一段相邻的查询头，应使用 repeat_interleave(H // Hkv, dim=1)")),
    Mistake("mask_off_by_one", "attend", lambda q, k, v, m: _attend(q, k, v, m, diagonal=-1),
            _hint("looks like the causal mask is off by one: a token may look at itself, so query i sees keys at "
                  "positions 0 .. S - T + i, inclusive (torch.triu(..., diagonal=1) is what to hide)",
                  "看起来因果掩码差了一位：每个词元能看到自己，第 i 个查询看得到位置 0 .. S - T + i（含）的键"
                  "（要遮住的是 torch.triu(..., diagonal=1)）")),
    Mistake("mask_off_by_one", "attend", lambda q, k, v, m: _attend(q, k, v, m, diagonal=1),
            _hint("looks like the causal mask is off by one: query i must not see the key right after it; it sees "
                  "positions 0 .. S - T + i, inclusive",
                  "看起来因果掩码差了一位：第 i 个查询不能看到紧随其后的键；它只看位置 0 .. S - T + i（含）")),
    Mistake("mask_no_offset", "attend", lambda q, k, v, m: _attend(q, k, v, m, offset=False),
            _hint("looks like the causal mask assumes query i is at position i: when S > T the first S - T keys come "
                  "from earlier tokens, so query i sits at position S - T + i and sees every earlier key",
                  "看起来因果掩码假设第 i 个查询在位置 i：当 S > T 时，前 S - T 个键来自更早的词元，第 i 个查询位于 "
                  "S - T + i，能看到所有更早的键")),
    Mistake("neg_inf_mask", "attend", lambda q, k, v, m: _attend(q, k, v, m, fill="-inf"),
            _hint("looks like -inf was used to mask: a padding query has no key it may see, and softmax over a row "
                  "of -inf is 0/0 = NaN, which later layers spread to real tokens (0 · NaN = NaN). Fill with "
                  "torch.finfo(scores.dtype).min: such a row then gets a harmless uniform softmax",
                  "看起来用 -inf 做了遮挡：填充位置的查询没有任何可看的键，整行 -inf 的 softmax 是 0/0 = NaN，"
                  "后面的层会"
                  "把它传给真实词元（0 · NaN = NaN）。请用 torch.finfo(scores.dtype).min 填充，"
                  "这样的行会得到无害的均匀分布")),
    Mistake("ignored_padding", "attend", lambda q, k, v, m: _attend(q, k, v, m, padding=False),
            _hint("looks like the padding mask was ignored: a key whose mask is False (a padding token) must get "
                  "probability 0 from every query, a single new token (T = 1) too: the causal mask hides nothing "
                  "from it, the padding mask still does",
                  "看起来忽略了填充掩码：掩码为 False 的键（填充词元）对任何查询的概率都应为 0，"
                  "单个新词元（T = 1）也一样："
                  "因果掩码对它不遮挡任何键，填充掩码仍然要遮")),
    Mistake("blocked_query_gate", "gated_attention", lambda *a: _gated(*a, split="blocked"),
            _hint("looks like q_proj's output was split as [all queries | all gates]: the two are interleaved per "
                  "head, view it as (B, T, H, 2·D) and split the last dim into query (first D) and gate (last D)",
                  "看起来 q_proj 的输出按 [全部查询 | 全部门] 切开了：两者是按头交错的，应 view 成 (B, T, H, 2·D)，"
                  "最后一维前 D 个是查询，后 D 个是门")),
    Mistake("missing_sigmoid", "gated_attention", lambda *a: _gated(*a, sigmoid=False),
            _hint("looks like the gate was used as it is: the heads' output is multiplied by sigmoid(gate), a "
                  "number between 0 and 1 per dimension",
                  "看起来门没有经过 sigmoid：各头的输出要乘 sigmoid(gate)，每一维一个 0 到 1 之间的数")),
    Mistake("gate_after_o_proj", "gated_attention", lambda *a: _gated(*a, gate_after=True),
            _hint("looks like the gate was applied after o_proj: multiply the heads' output (B, T, H·D) by "
                  "sigmoid(gate) first, then apply o_proj",
                  "看起来门乘在了 o_proj 之后：应先让各头的输出 (B, T, H·D) 乘 sigmoid(gate)，再做 o_proj")),
    Mistake("norm_after_rope", "gated_attention", lambda *a: _gated(*a, norm_first=False),
            _hint("looks like q_norm / k_norm came after RoPE: normalise each head's q and k first, then rotate",
                  "看起来 q_norm / k_norm 放在了 RoPE 之后：应先对每个头的 q、k 归一化，再旋转")),
    Mistake("eps_ignored", "gated_attention", lambda x, w, cos, sin, mask, eps: oracle_gated(x, w, cos, sin, mask,
                                                                                             1e-6),
            _hint("looks like eps was fixed at 1e-6: q_norm and k_norm add the eps argument to the mean square, "
                  "x / √(mean(x²) + eps); it matters where the activations are small",
                  "看起来 eps 写死成了 1e-6：q_norm 和 k_norm 要把参数 eps 加到均方上，x / √(mean(x²) + eps)；"
                  "激活值小的时候它的影响很大")),
    Mistake("plain_norm_weight", "gated_attention", lambda *a: _gated(*a, one_plus_w=False),
            _hint("looks like q_norm / k_norm scaled by w: they are zero-centred RMSNorms, scale by (1 + w) "
                  "(chapter 3)", "看起来 q_norm / k_norm 乘的是 w：它们是零中心的 RMSNorm，应乘 (1 + w)（第 3 章）")),
]

ERROR_HINTS = [
    (r"shape '\[\d+, \d+, \d+, \d+\]' is invalid for input of size", "head_shapes",
     _hint("a view to heads failed: read the sizes off the weights, D = q_norm.weight.shape[0], "
           "H = q_proj.weight.shape[0] // (2·D), Hkv = k_proj.weight.shape[0] // D",
           "按头 view 失败：从权重读出尺寸，D = q_norm.weight.shape[0]，H = q_proj.weight.shape[0] // (2·D)，"
           "Hkv = k_proj.weight.shape[0] // D")),
]
