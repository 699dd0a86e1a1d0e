"""A wrong solution to problem 220. Draws the token after a rejection from p, not from the residual."""
import torch


def speculative_sample(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, u: torch.Tensor,
                       u_last: torch.Tensor) -> tuple:
    B, k = drafts.shape
    rows = torch.arange(B)
    p_d = p[:, :k].gather(-1, drafts[..., None])[..., 0]
    q_d = q.gather(-1, drafts[..., None])[..., 0]
    n = (u < p_d / q_d).long().cumprod(1).sum(1)
    r = p[rows, n]
    last = torch.searchsorted(r.cumsum(-1), u_last[:, None].contiguous(), right=True)[:, 0]
    pos = torch.arange(k + 1)[None, :]
    guesses = torch.cat([drafts, drafts.new_full((B, 1), -1)], 1)
    return torch.where(pos < n[:, None], guesses, torch.where(pos == n[:, None], last[:, None], -1)), n
