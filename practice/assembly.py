"""Given parts for exercise 213 (the decoder layer and the hybrid stack): the real interfaces, toy insides.

rms_norm and mlp are the real formulas (chapters 3 and 5); the two mixers are small stand-ins for Gated DeltaNet
and gated attention, so the exercise is about the assembly alone. The learner's file imports them from here.
"""
import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps):
    """x̂ · (1 + weight), statistics in fp32, rounded once to x's dtype (chapter 3)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1 + weight.float())).to(x.dtype)


def mlp(x, p):
    """SwiGLU (chapter 5): down(silu(gate(x)) * up(x))."""
    return F.linear(F.silu(F.linear(x, p["gate_proj"])) * F.linear(x, p["up_proj"]), p["down_proj"])


def linear_mixer(x, p):
    """Stand-in for Gated DeltaNet: a causal running sum that halves at every step. (B, T, d) -> (B, T, d)."""
    u = F.linear(x, p["in_proj"]).float()  # (B, T, n)
    T = x.shape[1]
    t = torch.arange(T)
    decay = torch.where(t[:, None] >= t[None, :], 0.5 ** (t[:, None] - t[None, :]).float(), torch.zeros(()))
    return F.linear((decay @ u).to(x.dtype), p["out_proj"])


def full_mixer(x, p):
    """Stand-in for gated attention: one causal softmax head with q = k = v. (B, T, d) -> (B, T, d)."""
    u = F.linear(x, p["in_proj"])  # (B, T, n)
    T = x.shape[1]
    scores = (u @ u.transpose(1, 2)).float() * u.shape[-1] ** -0.5  # (B, T, T)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return F.linear((scores.softmax(-1) @ u.float()).to(x.dtype), p["out_proj"])


MIXERS = {"linear_attention": linear_mixer, "full_attention": full_mixer}
