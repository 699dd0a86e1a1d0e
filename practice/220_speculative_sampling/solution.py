"""Problem 220, reference solution: the speculative-sampling acceptance rule, with its uniforms given."""
import torch


def _draw(r: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling: rows of r (B, V) sum to 1, w (B,) uniforms -> (B,) the smallest j with w < cdf_j."""
    return torch.searchsorted(r.cumsum(-1), w[:, None].contiguous(), right=True)[:, 0]


def speculative_sample(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, u: torch.Tensor,
                       u_last: torch.Tensor) -> tuple:
    """Accept guess i when u[:, i] < p_i(d)/q_i(d), up to the first rejection; then draw the last token with
    u_last, from normalise(max(p_n − q_n, 0)) after a rejection at n, or from p_k when all k were accepted."""
    B, k = drafts.shape
    rows = torch.arange(B, device=drafts.device)
    p_d = p[:, :k].gather(-1, drafts[..., None])[..., 0]  # (B, k): the main model's probability of each guess
    q_d = q.gather(-1, drafts[..., None])[..., 0]  # (B, k): the draft's (> 0: it drew them)
    n = (u < p_d / q_d).long().cumprod(1).sum(1)  # (B,): accepted with probability min(1, p/q), a prefix
    # the distribution of the last token: the residual at the first rejection, or p after the last guess
    q_n = torch.cat([q, torch.zeros_like(p[:, :1])], 1)[rows, n]  # (B, V); zeros where n = k, so r = p_k there
    r = (p[rows, n] - q_n).clamp(min=0)
    r = r / r.sum(-1, keepdim=True)
    pos = torch.arange(k + 1, device=drafts.device)[None, :]
    guesses = torch.cat([drafts, drafts.new_full((B, 1), -1)], 1)
    tokens = torch.where(pos < n[:, None], guesses, torch.where(pos == n[:, None], _draw(r, u_last)[:, None], -1))
    return tokens, n
