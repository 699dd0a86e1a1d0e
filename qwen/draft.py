"""Drafts for speculative decoding (qwen/speculative.py): what guesses the next k tokens before the main model checks
them. A draft carries its k and the counts of its last run; the loop calls, in order:
  start(tokens, hidden, mask)    after the prefill: the prompt shifted by one plus the first new token (B, T), the
                                 main model's final-norm hidden states over the prompt (B, T, d), the mask or None
  propose(pick) -> (guesses (B, k), q (B, k, V) or None)   q: the distributions the guesses were drawn from, None
                                 for a deterministic draft (one-hot q)
  advance(tokens, hidden, mask)  the main model accepted tokens (B, m) with its hidden states (B, m, d) before each

MTPDraft guesses with the checkpoint's multi-token-prediction block (qwen/mtp.py); Scripted proposes whatever a
script says (always right, always wrong, or any accept/reject pattern the tests and chapter 11 need).
"""
from collections.abc import Callable

import torch

from qwen.model import Qwen35
from qwen.mtp import MTP, new_cache, step
from qwen.sampling import Picker, check


class Draft:
    """k guesses per main-model step; counts: the last run's main-model steps after the prefill and guesses proposed
    and accepted (qwen.speculative.speculate fills them)."""

    def __init__(self, k: int):
        self.k = check("k", k)  # for no guesses, use generate
        self.counts = dict(steps=0, proposed=0, accepted=0)

    def start(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        raise NotImplementedError  # each draft says how (the module docstring gives the order of the calls)

    def propose(self, pick: Picker) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def advance(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        raise NotImplementedError


class MTPDraft(Draft):
    """Drafts with the MTP block: `mtp`, else model.mtp. Its cache holds one entry per main-model entry: entry t is
    the pair (x_{t+1}, h_t). Chained guesses add entries that the next `advance` cuts back and replaces with the pairs
    of the tokens the main model accepted, built from the main model's own hidden states."""

    def __init__(self, model: Qwen35, k: int, mtp: MTP | None = None):
        super().__init__(k)
        mtp = getattr(model, "mtp", None) if mtp is None else mtp
        if mtp is None:
            raise ValueError("the model has no MTP head: load it first (model.mtp = "
                             "qwen.mtp.load_mtp(checkpoint, ...), from a checkpoint with mtp.* tensors), or pass "
                             "another draft")
        self.model, self.mtp = model, mtp

    def start(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        self.cache, self.kept = new_cache(), 0
        self.advance(tokens, hidden, mask)

    def advance(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        """mask: None or (B, MTP entries after this call)."""
        self.cache.length = self.cache.layers[0].length = self.kept  # type: ignore[union-attr]  # (a KVCache)
        self.mask = mask
        g, logits = step(self.model, self.mtp, tokens, hidden, self.cache, mask)
        self.g, self.logits, self.kept = g[:, -1:], logits[:, -1], self.cache.length

    def propose(self, pick: Picker) -> tuple[torch.Tensor, torch.Tensor | None]:
        g, logits, tokens, probs = self.g, self.logits, [], []
        for i in range(self.k):
            token, q = pick(logits)
            tokens.append(token)
            if q is not None:  # None for a greedy pick, and then for every guess
                probs.append(q)
            if i < self.k - 1:  # chain: the block's own output and guess stand in for h and the next token
                mask = None if self.mask is None else torch.cat([self.mask, self.mask.new_ones(len(token), i + 1)], 1)
                g, logits = step(self.model, self.mtp, token[:, None], g, self.cache, mask)
                logits = logits[:, -1]
        return torch.stack(tokens, 1), torch.stack(probs, 1) if probs else None


class Scripted(Draft):
    """A draft that proposes script(generated, k): generated (B, n) the tokens the main model has produced so far,
    returns (B, k). Deterministic (q is one-hot)."""

    def __init__(self, script: Callable[[torch.Tensor, int], torch.Tensor], k: int) -> None:
        super().__init__(k)
        self.script = script

    def start(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        self.generated = tokens[:, -1:]

    def advance(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor | None) -> None:
        self.generated = torch.cat([self.generated, tokens], 1)

    def propose(self, pick: Picker) -> tuple[torch.Tensor, None]:
        return self.script(self.generated, self.k), None


def follow(reference: torch.Tensor, wrong: Callable[[int, int], bool] = lambda n, i: False
           ) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """A script that reads the answer from `reference` (B, N), the tokens plain decoding produces: proposes the true
    next tokens, except where wrong(step, i) says to propose a token that is certainly not it (reference + 1)."""
    calls: list[int] = []

    def script(generated, k):
        n = generated.shape[1]
        right = torch.nn.functional.pad(reference, (0, k + 1))[:, n:n + k]  # beyond the reference: zeros
        bad = torch.tensor([wrong(len(calls), i) for i in range(k)], device=right.device)
        calls.append(n)
        return torch.where(bad, right + 1, right)
    return script
