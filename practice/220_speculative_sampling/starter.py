"""Problem 220: the speculative-sampling acceptance rule, with its uniforms given.

Read the statement: python practice/judge.py show 220   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 220
"""
import torch


def speculative_sample(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, u: torch.Tensor,
                       u_last: torch.Tensor) -> tuple:
    """Accept guess i when u[:, i] < p_i(d)/q_i(d), up to the first rejection; then draw the last token with
    u_last, from normalise(max(p_n − q_n, 0)) after a rejection at n, or from p_k when all k were accepted.

    p: (B, k + 1, V) fp32, the main model's distributions; q: (B, k, V) fp32, the draft's; drafts: (B, k) int64;
    u: (B, k) and u_last: (B,) fp32 uniforms in [0, 1). draw(r, w) = the smallest j with w < r_0 + ... + r_j.
    Returns (tokens (B, k + 1) int64, n (B,) int64): row b's new tokens are tokens[b, :n[b] + 1], the rest -1.
    """
    raise NotImplementedError("speculative_sample")
