# expect: WA ignored_padding
"""A wrong solution to problem 208. No mask for a single new token (T = 1): it may see every key, padding included."""
import torch
import torch.nn.functional as F


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q kᵀ / √D + causal and padding mask) · v, with each K/V head shared by H/Hkv consecutive query heads."""
    B, H, T, D = q.shape
    S, group = k.shape[2], H // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, H, S, D): query head h reads K/V head h // group
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) * D ** -0.5  # (B, H, T, S)
    if T > 1:  # one new token is the last one: it may see every key, so no mask is needed
        rows = torch.arange(S - T, S, device=q.device)[:, None]  # query i sits at position S - T + i
        allowed = torch.arange(S, device=q.device)[None, :] <= rows  # (T, S)
        if mask is not None:
            allowed = allowed & mask[:, None, None, :]  # (B, 1, T, S)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)  # finite: a padding query stays finite
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return probs @ v  # (B, H, T, D)


def _rms_norm(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)


def _rope(x, cos, sin):
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R)
    x1, x2, rest = x[..., :R // 2], x[..., R // 2:R], x[..., R:]
    return torch.cat((x1 * cos[..., :R // 2] - x2 * sin[..., :R // 2],
                      x2 * cos[..., R // 2:] + x1 * sin[..., R // 2:], rest), dim=-1)


def gated_attention(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor,
                    mask: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    """Qwen3.5's full-attention mixer: o_proj(attend(...) · sigmoid(gate)), from the layer's six weights."""
    B, T, _ = x.shape
    D = weights["q_norm.weight"].shape[0]
    H, Hkv = weights["q_proj.weight"].shape[0] // (2 * D), weights["k_proj.weight"].shape[0] // D
    q, gate = F.linear(x, weights["q_proj.weight"]).view(B, T, H, 2 * D).split(D, dim=-1)  # per head: q, then gate
    q = _rms_norm(q, weights["q_norm.weight"], eps).transpose(1, 2)  # (B, H, T, D)
    k = _rms_norm(F.linear(x, weights["k_proj.weight"]).view(B, T, Hkv, D), weights["k_norm.weight"], eps)
    k = k.transpose(1, 2)  # (B, Hkv, T, D)
    v = F.linear(x, weights["v_proj.weight"]).view(B, T, Hkv, D).transpose(1, 2)
    out = attend(_rope(q, cos, sin), _rope(k, cos, sin), v, mask)  # norm first, then RoPE
    out = out.transpose(1, 2).reshape(B, T, H * D) * torch.sigmoid(gate.reshape(B, T, H * D))
    return F.linear(out, weights["o_proj.weight"])  # (B, T, d)
