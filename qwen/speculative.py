"""Speculative decoding: a cheap draft guesses k tokens, one forward of the main model over k + 1 positions checks
them, and every guess the main model agrees with is a token that cost no decode step of its own.

One step, with x the token the main model picked last (not yet fed) and d_1..d_k the draft's guesses:
  1. verify: feed [x, d_1, ..., d_k] (k + 1 tokens, one forward). Position i's logits say what follows d_i (x for i=0).
  2. accept: greedy keeps d_1..d_n while d_i is the main model's argmax after d_{i-1}, then adds the main model's own
     token after d_n: n + 1 new tokens (n = k: the last one is a bonus). Sampling accepts d_i with probability
     min(1, p(d_i) / q(d_i)) (p the main model's distribution, q the draft's) and at the first rejection draws from
     the residual max(0, p − q), normalised: each token is then distributed exactly as p (Leviathan et al. 2023,
     Chen et al. 2023). A deterministic draft has q = one-hot: accept with p(d_i), else draw from p without d_i.
  3. rollback: the caches have seen k + 1 tokens, only m = n + 1 of them stay (fewer when a stop token ends the
     reply early). A full-attention layer's KV cache is cut back: its length pointer moves back k + 1 − m rows. A
     DeltaNet layer cannot be cut: its conv window and state have absorbed the rejected tokens. So before the verify
     pass each DeltaNet layer's conv window and state are copied, and during it hooks keep what its memory reads:
     the outputs of in_proj_qkv (the conv's inputs, (B, k + 1, C)), in_proj_b and in_proj_a (β's and g's,
     (B, k + 1, Hv) each). After a rejection the copy is put back and the layer's `remember` runs again on the first
     m of those: exactly a plain pass over the accepted tokens, for that layer's memory only. Nothing else is
     needed: the mixer's output for the accepted positions (the gate in_proj_z, out_proj) was already computed and
     used by the layers above, each position seeing only earlier ones, and the projections of the accepted tokens
     are the verify pass's own. So a replay reads no projection weight, only the conv's kernel (C·K numbers per
     layer) and the states. Cost: the copies, Hv·dk·dv fp32 numbers plus (K−1)·C conv inputs per DeltaNet layer
     (18.6 MiB in the 0.8B, whatever k), the kept projections ((k + 1)·(C + 2·Hv) per layer, about 1 MiB at
     k = 4), and on a rejection the conv and the delta rule over m tokens. Keeping the state after every verified
     position instead would need the delta rule to hand out its intermediate states (k + 1 times the memory) and a
     kernel of its own; replaying from the copy reuses the layer's own code.
"Identical to plain greedy" is exact arithmetic's promise: the verify pass computes k + 1 positions at once, plain
decoding one at a time, and the two may round differently. The teaching model's verify pass runs the DeltaNet
chunked kernel and products over k + 1 rows. The fast path's (qwen/fast.py) takes the DeltaNet decode step once per
verified token and reads each attention row as decode does, so only its products of k + 1 rows may round
otherwise (at the 0.8B's shapes the first DeltaNet layer's out_proj already sums some rows in another order; in bf16,
where chapter 13's bf16 dot multiplies a decode step's one row and oneDNN the verify pass's k + 1, a few outputs in ten
thousand round to the neighbouring bf16 number). In fp32 the
tests find the same tokens; in bf16 on the teaching path a top-2 pair within one bf16 step of each other can swap,
and from there the texts part (on the synthetic checkpoint, whose logits are nearly flat, after 10 to 20 tokens).
Batches: every row keeps the same number of tokens per step, the fewest any active row accepted (the others' extra
accepted guesses are re-guessed next step), so the caches stay rectangular; the results are unchanged.
The draft is pluggable (qwen/draft.py): MTPDraft (the checkpoint's MTP head), or Scripted (a fixed script: always
right, always wrong, or any accept/reject pattern the tests need). Entry point: speculate(model, ids, n, draft).
"""
from collections.abc import Iterable, Iterator

import torch

from qwen.draft import Draft
from qwen.generate import prepare
from qwen.lang import tr
from qwen.model import Cache, Qwen35
from qwen.mtp import FinalHidden
from qwen.sampling import Picker, Sampling, check, emitted

WANTED = ("in_proj_qkv", "in_proj_b", "in_proj_a")  # what a DeltaNet layer's memory reads: conv inputs, β's, g's


def taps(mixer):
    """(module, which output) for each of WANTED: the teaching layer's own projections (their whole output), or the
    fast path's joined one (qwen/fast.py), whose outputs come in the order of its `joins`."""
    if hasattr(mixer, "in_proj_qkv"):
        return [(getattr(mixer, name), None) for name in WANTED]
    return [(mixer.in_proj, mixer.in_proj.joins.index(name)) for name in WANTED]


class Rollback:
    """`with Rollback(model, cache) as saved: model(verify ids, cache)`, then saved.keep(m): every cache as a plain
    pass over the first m of the verified tokens leaves it (see the module docstring)."""

    def __init__(self, model: Qwen35, cache: Cache) -> None:
        self.model, self.cache, self.start = model, cache, cache.length
        self.saved = [(c.conv.clone(), c.state.clone()) if kind == "linear_attention" else None  # type: ignore[union-attr]
                      for kind, c in zip(model.cfg.layer_types, cache.layers)]
        # layer -> [conv inputs (B, T, C), b (B, T, Hv), a (B, T, Hv)] of the verify pass
        self.kept: dict[int, list[torch.Tensor]] = {}

    def __enter__(self) -> "Rollback":
        self.hooks = [module.register_forward_hook(self.recorder(i, slot, which))
                      for i, layer in enumerate(self.model.layers) if layer.kind == "linear_attention"
                      for slot, (module, which) in enumerate(taps(layer.linear_attn))]
        return self

    def recorder(self, i, slot, which):
        def record(module, args, out):
            self.kept.setdefault(i, [None] * len(WANTED))[slot] = out if which is None else out[which]
        return record

    def __exit__(self, *exc: object) -> None:
        for hook in self.hooks:
            hook.remove()

    def keep(self, m: int) -> None:
        T = self.cache.length - self.start  # tokens the verify pass fed
        if m == T:
            return
        for i, (layer, c) in enumerate(zip(self.model.layers, self.cache.layers)):
            if layer.kind == "full_attention":
                c.length = self.start + m  # type: ignore[union-attr]  # the KV cache: move the length pointer back
            else:  # DeltaNet: back to the copy, then its memory over the accepted tokens again
                c.conv, c.state = self.saved[i]  # type: ignore[union-attr, misc]
                if m:
                    layer.linear_attn.remember(*(x[:, :m] for x in self.kept[i]), c)  # type: ignore[union-attr, operator]
        self.cache.length = self.start + m


def accept(drafts: torch.Tensor, logits: torch.Tensor, q: torch.Tensor | None, pick: Picker,
           active: torch.Tensor) -> torch.Tensor:
    """drafts (B, k), the main model's logits over the k + 1 verified positions (B, k + 1, V), the draft's
    distributions q (B, k, V) or None (one-hot). Returns the new tokens (B, n + 1): n accepted guesses, the same n
    for every row (the fewest any active row accepted), then the main model's token."""
    B, k = drafts.shape
    rows = torch.arange(B, device=drafts.device)
    if pick.greedy:
        target = logits.argmax(-1)  # (B, k + 1): what the main model would pick after each verified position
        agree = (drafts == target[:, :k]).long().cumprod(1).sum(1)  # (B,) accepted guesses per row
        n = int(agree[active].min()) if active.any() else 0
        return torch.cat([drafts[:, :n], target[:, n:n + 1]], 1)
    p = pick.probs(logits.float())  # (B, k + 1, V)
    p_d = p[:, :k].gather(-1, drafts[..., None])[..., 0]  # (B, k): p of each guess
    q_d = torch.ones_like(p_d) if q is None else q.gather(-1, drafts[..., None])[..., 0]
    u = torch.rand(B, k, generator=pick.generator, device=drafts.device)
    ok = u * q_d < p_d  # accept with probability min(1, p/q)
    agree = ok.long().cumprod(1).sum(1)
    n = int(agree[active].min()) if active.any() else 0
    if n == k:  # every guess accepted by some row's rule: the bonus token from p after the last guess
        last = pick.draw(p[:, k])
    else:
        qn = torch.zeros_like(p[:, n]).scatter_(-1, drafts[:, n:n + 1], 1.0) if q is None else q[:, n]
        residual = (p[:, n] - qn).clamp(min=0)
        residual = residual / residual.sum(-1, keepdim=True).clamp(min=1e-30)
        fresh = pick.draw(torch.where(residual.sum(-1, keepdim=True) > 0, residual, p[:, n]))
        last = torch.where(agree > n, drafts[rows, n], fresh)  # rows that accepted guess n + 1 emit it
    return torch.cat([drafts[:, :n], last[:, None]], 1)


@torch.no_grad()
def speculate(model: Qwen35, input_ids: torch.Tensor | list[int] | list[list[int]], max_new_tokens: int, draft: Draft,
              sampling: Sampling | None = None, stop: Iterable[int] | None = None,
              mask: torch.Tensor | None = None, cache: Cache | None = None) -> Iterator[int | list[int | None]]:
    """generate (qwen/generate.py) with `draft` guessing draft.k tokens per main-model step: yields as generate does,
    the same tokens for greedy sampling, the same distribution otherwise. draft.counts gets this run's 'steps'
    (main-model forwards after the prefill), 'proposed' and 'accepted' guesses. No presence penalty: a limit of this
    loop, not of the method (the verify pass knows the guesses, so position i could be penalised for the tokens up to
    d_i; this loop scores every position with one rule); and no images (yet)."""
    check("max_new_tokens", max_new_tokens)  # at the first next(), before the prefill
    sampling = sampling or Sampling()
    if sampling.presence_penalty:
        raise ValueError(tr("presence_penalty: this speculative loop does not apply one (each verified position "
                            "would need its own, counting the guesses before it); use it with plain generate",
                            "presence_penalty：这个投机解码循环不施加它（每个验证位置都需要自己的惩罚，"
                            "要算上它前面的猜测）；请在普通的 generate 里用它"))
    ids, batched, stop, mask, cache = prepare(model, input_ids, stop, mask, cache)
    pick, k, counts = Picker(sampling, ids.device), draft.k, draft.counts
    counts.update(steps=0, proposed=0, accepted=0)
    B, offset = ids.shape[0], cache.length  # the draft sees only this call's tokens
    done = torch.zeros(B, dtype=torch.bool, device=ids.device)
    with FinalHidden(model, head_last=True) as kept:
        logits = model(ids, cache=cache, mask=mask)[:, -1]  # prefill: every position's h, the head for the last
    token, _ = pick(logits)
    produced = 1
    yield emitted(token, done, batched)
    done |= torch.isin(token, stop)  # type: ignore[arg-type]  # (stop: the tensor prepare made of it)
    if done.all() or produced == max_new_tokens:
        return
    draft.start(torch.cat([ids[:, 1:], token[:, None]], 1), kept.h, None if mask is None else mask[:, offset:])
    while True:
        drafts, q = draft.propose(pick)  # (B, k)
        fed = torch.cat([token[:, None], drafts], 1)  # (B, k + 1)
        wide = None if mask is None else torch.cat([mask, mask.new_ones(B, k + 1)], 1)
        with Rollback(model, cache) as saved, FinalHidden(model) as kept:
            logits = model(fed, cache=cache, mask=wide)  # (B, k + 1, V): one forward verifies k guesses
        new = accept(drafts, logits, q, pick, ~done)  # (B, n + 1)
        counts["steps"] += 1
        counts["proposed"] += k
        counts["accepted"] += new.shape[1] - 1
        m = 0
        for token in new.T:  # (B,) each
            m += 1
            produced += 1
            yield emitted(token, done, batched)
            done |= torch.isin(token, stop)  # type: ignore[arg-type]
            if done.all() or produced == max_new_tokens:
                break
        saved.keep(m)  # the caches as after a plain pass over x, d_1 .. d_{m-1}
        mask = None if mask is None else torch.cat([mask, mask.new_ones(B, m)], 1)
        if done.all() or produced == max_new_tokens:
            return
        draft.advance(new, kept.h[:, :m], None if mask is None else mask[:, offset:])
