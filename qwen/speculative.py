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
     pass each DeltaNet layer's conv window and state are copied, and during it a hook keeps the input the layer's
     mixer reads (B, k + 1, d). After a rejection the copy is put back and the mixer is run again on the first m of
     those inputs: exactly a plain pass over the accepted tokens, for that layer only (the other layers' outputs are
     already right, since each position only sees earlier ones). Cost: the copies, Hv·dk·dv fp32 numbers plus
     (K−1)·C conv inputs per DeltaNet layer (18 MiB in the 0.8B, whatever k), the kept inputs ((k + 1)·d per layer,
     small), and on a rejection the DeltaNet mixers' projections again for m tokens (about a quarter of the 0.8B's
     weights). Keeping the state after every verified position instead would need the delta rule to hand out its
     intermediate states (k + 1 times the memory) and a kernel of its own; replaying from the copy reuses the layer.
"Identical to plain greedy" is exact arithmetic's promise: the verify pass computes k + 1 positions at once, plain
decoding one at a time, and the two may round differently. The teaching model's verify pass runs the DeltaNet
chunked kernel and products over k + 1 rows. The fast path's (qwen/fast.py) takes the DeltaNet decode step once per
verified token and reads each attention row as decode does, so only its products of k + 1 rows may round
otherwise (in bf16 on this course's CPU the synthetic checkpoint's verify logits equal its decode logits bit for
bit; at the 0.8B's shapes the first DeltaNet layer's out_proj already sums some rows in another order). In fp32 the
tests find the same tokens; in bf16 on the teaching path a top-2 pair within one bf16 step of each other can swap,
and from there the texts part (on the synthetic checkpoint, whose logits are nearly flat, after 10 to 20 tokens).
Batches: every row keeps the same number of tokens per step, the fewest any active row accepted (the others' extra
accepted guesses are re-guessed next step), so the caches stay rectangular; the results are unchanged.
The draft is pluggable: MTPDraft (the checkpoint's MTP head, qwen/mtp.py), or Scripted (a fixed script: always
right, always wrong, or any accept/reject pattern the tests need).
"""
import torch

from qwen.generate import emitted, filter_logits
from qwen.mtp import FinalHidden, new_cache, step


class Picker:
    """The sampling rules of one call: logits (B, V) -> token (B,) and the distribution it was drawn from (B, V),
    None for greedy."""

    def __init__(self, temperature, top_k, top_p, min_p, generator):
        self.rules, self.temperature, self.generator = (temperature, top_k, top_p, min_p), temperature, generator

    def probs(self, logits):  # (..., V) -> (..., V) fp32: softmax after the rules
        shape = logits.shape
        return filter_logits(logits.reshape(-1, shape[-1]), *self.rules).softmax(-1).reshape(shape)

    def draw(self, probs):  # (B, V) -> (B,)
        return torch.multinomial(probs, 1, generator=self.generator)[:, 0]

    def __call__(self, logits):
        if self.temperature == 0:
            return logits.argmax(-1), None
        probs = self.probs(logits)
        return self.draw(probs), probs


class MTPDraft:
    """Drafts with the MTP block (model.mtp). Its cache holds one entry per main-model entry: entry t is the pair
    (x_{t+1}, h_t). Chained guesses add entries that the next `advance` cuts back and replaces with the pairs of the
    tokens the main model accepted, built from the main model's own hidden states."""

    def __init__(self, model):
        if getattr(model, "mtp", None) is None:
            raise ValueError("the model has no MTP head: attach it first, model.mtp = qwen.mtp.load_mtp(path, dtype, "
                             "device) (the checkpoint needs mtp.* tensors), or pass another draft")
        self.model, self.mtp = model, model.mtp

    def start(self, tokens, hidden, mask):
        """After the prefill: tokens (B, T) = the prompt shifted by one plus the first new token, hidden (B, T, d)
        the main model's h over the prompt, mask (B, T) or None."""
        self.cache, self.kept = new_cache(), 0
        self.advance(tokens, hidden, mask)

    def advance(self, tokens, hidden, mask):
        """The main model accepted tokens (B, m) (the last one its own pick, not yet fed to it); hidden (B, m, d) its
        h at the positions before each; mask: None or (B, MTP entries after this call)."""
        self.cache.length = self.cache.layers[0].length = self.kept  # drop the chained guesses' entries
        self.mask = mask
        g, logits = step(self.model, self.mtp, tokens, hidden, self.cache, mask)
        self.g, self.logits, self.kept = g[:, -1:], logits[:, -1], self.cache.length

    def propose(self, k, pick):
        """k guesses (B, k) and the distributions they were drawn from (B, k, V), None for greedy."""
        g, logits, tokens, probs = self.g, self.logits, [], []
        for i in range(k):
            token, q = pick(logits)
            tokens.append(token)
            probs.append(q)
            if i < k - 1:  # chain: the block's own output and guess stand in for h and the next token
                mask = None if self.mask is None else torch.cat([self.mask, self.mask.new_ones(len(token), i + 1)], 1)
                g, logits = step(self.model, self.mtp, token[:, None], g, self.cache, mask)
                logits = logits[:, -1]
        return torch.stack(tokens, 1), None if probs[0] is None else torch.stack(probs, 1)


class Scripted:
    """A draft that proposes script(generated, k): generated (B, n) the tokens the main model has produced so far,
    returns (B, k). Deterministic (q is one-hot)."""

    def __init__(self, script):
        self.script = script

    def start(self, tokens, hidden, mask):
        self.generated = tokens[:, -1:]

    def advance(self, tokens, hidden, mask):
        self.generated = torch.cat([self.generated, tokens], 1)

    def propose(self, k, pick):
        return self.script(self.generated, k), None


def follow(reference, wrong=lambda n, i: False):
    """A script that reads the answer from `reference` (B, N), the tokens plain decoding produces: proposes the true
    next tokens, except where wrong(step, i) says to propose a token that is certainly not it (reference + 1)."""
    calls = []

    def script(generated, k):
        n = generated.shape[1]
        right = torch.nn.functional.pad(reference, (0, k + 1))[:, n:n + k]  # beyond the reference: zeros
        bad = torch.tensor([wrong(len(calls), i) for i in range(k)], device=right.device)
        calls.append(n)
        return torch.where(bad, right + 1, right)
    return script


class Rollback:
    """`with Rollback(model, cache) as saved: model(verify ids, cache)`, then saved.keep(m): every cache as a plain
    pass over the first m of the verified tokens leaves it (see the module docstring)."""

    def __init__(self, model, cache):
        self.model, self.cache, self.start = model, cache, cache.length
        self.saved = [(c.conv.clone(), c.state.clone()) if kind == "linear_attention" else None
                      for kind, c in zip(model.cfg.layer_types, cache.layers)]
        self.inputs = {}

    def __enter__(self):
        self.hooks = [layer.linear_attn.register_forward_pre_hook(self.recorder(i))
                      for i, layer in enumerate(self.model.layers) if layer.kind == "linear_attention"]
        return self

    def recorder(self, i):
        def record(module, args):
            self.inputs[i] = (args[0], args[2])  # the mixer's input (B, T, d) and its mask (B, T) or None
        return record

    def __exit__(self, *exc):
        for hook in self.hooks:
            hook.remove()

    def keep(self, m):
        T = self.cache.length - self.start  # tokens the verify pass fed
        if m == T:
            return
        for i, (layer, c) in enumerate(zip(self.model.layers, self.cache.layers)):
            if layer.kind == "full_attention":
                c.length = self.start + m  # the KV cache: move the length pointer back
            else:  # DeltaNet: back to the copy, then the accepted tokens again
                c.conv, c.state = self.saved[i]
                h, mask = self.inputs[i]
                if m:
                    # a fresh copy: F.linear takes a slow path (a copy of the whole weight, 400 ms per replay on the
                    # 0.8B) for a one-row slice that keeps the k + 1 rows' strides
                    h = h[:, :m].clone(memory_format=torch.contiguous_format)
                    layer.linear_attn(h, c, None if mask is None else mask[:, :m])
        self.cache.length = self.start + m


def accept(drafts, logits, q, pick, active):
    """drafts (B, k), the main model's logits over the k + 1 verified positions (B, k + 1, V), the draft's
    distributions q (B, k, V) or None (one-hot). Returns the new tokens (B, n + 1): n accepted guesses, the same n
    for every row (the fewest any active row accepted), then the main model's token."""
    B, k = drafts.shape
    rows = torch.arange(B, device=drafts.device)
    if pick.temperature == 0:
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
def decode(model, ids, max_new_tokens, k, draft, pick, stop, mask, cache, batched, stats=None):
    """The loop behind generate(..., speculative=k): yields as generate does. ids (B, T); mask None or (B, T);
    cache: the model's, empty or holding the tokens before ids. stats: a dict that gets 'steps' (main-model forwards
    after the prefill), 'proposed' and 'accepted' guesses."""
    if k < 1:
        raise ValueError(f"speculative={k}: the number of guessed tokens must be at least 1 (0 or None: no drafts)")
    draft = MTPDraft(model) if draft is None else draft
    stats = {} if stats is None else stats
    stats.update(steps=0, proposed=0, accepted=0)
    if max_new_tokens <= 0:
        return
    B, offset = ids.shape[0], cache.length  # the draft sees only this call's tokens
    done = torch.zeros(B, dtype=torch.bool, device=ids.device)
    with FinalHidden(model, head_last=True) as kept:
        logits = model(ids, cache=cache, mask=mask)[:, -1]  # prefill: every position's h, the head for the last
    token, _ = pick(logits)
    produced = 1
    yield emitted(token, done, batched)
    done |= torch.isin(token, stop)
    if done.all() or produced == max_new_tokens:
        return
    draft.start(torch.cat([ids[:, 1:], token[:, None]], 1), kept.h, None if mask is None else mask[:, offset:])
    while True:
        drafts, q = draft.propose(k, pick)  # (B, k)
        fed = torch.cat([token[:, None], drafts], 1)  # (B, k + 1)
        wide = None if mask is None else torch.cat([mask, mask.new_ones(B, k + 1)], 1)
        with Rollback(model, cache) as saved, FinalHidden(model) as kept:
            logits = model(fed, cache=cache, mask=wide)  # (B, k + 1, V): one forward verifies k guesses
        new = accept(drafts, logits, q, pick, ~done)  # (B, n + 1)
        stats["steps"] += 1
        stats["proposed"] += k
        stats["accepted"] += new.shape[1] - 1
        m = 0
        for token in new.T:  # (B,) each
            m += 1
            produced += 1
            yield emitted(token, done, batched)
            done |= torch.isin(token, stop)
            if done.all() or produced == max_new_tokens:
                break
        saved.keep(m)  # the caches as after a plain pass over x, d_1 .. d_{m-1}
        mask = None if mask is None else torch.cat([mask, mask.new_ones(B, m)], 1)
        if done.all() or produced == max_new_tokens:
            return
        draft.advance(new, kept.h[:, :m], None if mask is None else mask[:, offset:])
