"""A wrong solution to problem 220. Accepts a guess exactly when p(d) >= q(d), ignoring u."""
import torch


def speculative_sample(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, u: torch.Tensor,
                       u_last: torch.Tensor) -> tuple:
    B, k = drafts.shape
    rows = torch.arange(B)
    p_d = p[:, :k].gather(-1, drafts[..., None])[..., 0]
    q_d = q.gather(-1, drafts[..., None])[..., 0]
    n = (p_d >= q_d).long().cumprod(1).sum(1)
    q_n = torch.cat([q, torch.zeros_like(p[:, :1])], 1)[rows, n]
    r = (p[rows, n] - q_n).clamp(min=0)
    r = r / r.sum(-1, keepdim=True)
    last = torch.searchsorted(r.cumsum(-1), u_last[:, None].contiguous(), right=True)[:, 0]
    pos = torch.arange(k + 1)[None, :]
    guesses = torch.cat([drafts, drafts.new_full((B, 1), -1)], 1)
    return torch.where(pos < n[:, None], guesses, torch.where(pos == n[:, None], last[:, None], -1)), n
