# expect: WA eps_ignored cases>=2
"""A wrong solution to problem 209. q_norm and k_norm use eps = 1e-6 whatever the eps argument says."""
import torch
import torch.nn.functional as F


def _rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)


def _rope(x, cos, sin):
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R)
    x1, x2, rest = x[..., :R // 2], x[..., R // 2:R], x[..., R:]
    return torch.cat((x1 * cos[..., :R // 2] - x2 * sin[..., :R // 2],
                      x2 * cos[..., R // 2:] + x1 * sin[..., R // 2:], rest), dim=-1)


def attention_step(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-6) -> tuple:
    """Gated attention over the T new tokens of x, reading the S0 cached ones: (output, all keys, all values)."""
    B, T, _ = x.shape
    D = weights["q_norm.weight"].shape[0]
    H, Hkv = weights["q_proj.weight"].shape[0] // (2 * D), weights["k_proj.weight"].shape[0] // D
    q, gate = F.linear(x, weights["q_proj.weight"]).view(B, T, H, 2 * D).split(D, dim=-1)
    q = _rope(_rms_norm(q, weights["q_norm.weight"]).transpose(1, 2), cos, sin)  # (B, H, T, D)
    k = _rms_norm(F.linear(x, weights["k_proj.weight"]).view(B, T, Hkv, D), weights["k_norm.weight"])
    k = _rope(k.transpose(1, 2), cos, sin)  # (B, Hkv, T, D): stored as they are used, after norm and RoPE
    v = F.linear(x, weights["v_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    k, v = torch.cat((cache_k, k), dim=2), torch.cat((cache_v, v), dim=2)  # (B, Hkv, S, D), S = S0 + T
    S = k.shape[2]
    scores = (q @ k.repeat_interleave(H // Hkv, 1).transpose(-2, -1)) * D ** -0.5  # (B, H, T, S)
    allowed = torch.arange(S)[None, :] <= torch.arange(S - T, S)[:, None]  # new token i is at position S0 + i
    if mask is not None:
        allowed = allowed & mask[:, None, None, :]
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    out = (probs @ v.repeat_interleave(H // Hkv, 1)).transpose(1, 2).reshape(B, T, H * D)
    out = F.linear(out * torch.sigmoid(gate.reshape(B, T, H * D)), weights["o_proj.weight"])
    return out, k, v
