"""A wrong solution to problem 220. The right distributions, but the last token drawn with torch.multinomial instead of
u_last: the distribution cases pass, the exact draws do not (no named hint)."""
import torch


def speculative_sample(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, u: torch.Tensor,
                       u_last: torch.Tensor) -> tuple:
    B, k = drafts.shape
    rows = torch.arange(B)
    p_d = p[:, :k].gather(-1, drafts[..., None])[..., 0]
    q_d = q.gather(-1, drafts[..., None])[..., 0]
    n = (u < p_d / q_d).long().cumprod(1).sum(1)
    q_n = torch.cat([q, torch.zeros_like(p[:, :1])], 1)[rows, n]
    r = (p[rows, n] - q_n).clamp(min=0)
    last = torch.multinomial(r / r.sum(-1, keepdim=True), 1, generator=torch.Generator().manual_seed(0))[:, 0]
    pos = torch.arange(k + 1)[None, :]
    guesses = torch.cat([drafts, drafts.new_full((B, 1), -1)], 1)
    return torch.where(pos < n[:, None], guesses, torch.where(pos == n[:, None], last[:, None], -1)), n
