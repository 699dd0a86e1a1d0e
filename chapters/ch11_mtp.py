"""Chapter 11: the multi-token-prediction head by hand, and speculative decoding with a state that cannot be cut.

Run: python chapters/ch11_mtp.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch11_mtp.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 11 · The MTP head and speculative decoding
#
# Every Qwen3.5 checkpoint ships a block that transformers' Qwen3.5 classes skip: `mtp.*`, a
# **multi-token-prediction** (MTP) head that guesses the token after next. Serving engines use it for
# **speculative decoding**: a cheap draft guesses a few tokens, one forward of the big model checks them all, and
# every guess it agrees with is a token that cost no decode step of its own — the model's own answer to the
# memory-bound decode that chapter 9 measured. Qwen3.5 makes this a real engineering lesson: a KV cache can be cut
# back after a rejected guess, a DeltaNet state cannot — it has already absorbed it. This chapter writes the head,
# the draft–verify loop and the state rollback, proves the output identical to plain decoding, and works out when
# it pays.
#
# ```
# qwen/
# ├── model.py        (chapter 8: the decoder layer the MTP block reuses)
# ├── mtp.py          + MTP, step, FinalHidden, load_mtp: the head, loaded from mtp.*
# ├── draft.py        + MTPDraft, Scripted, follow: what guesses the next k tokens
# └── speculative.py  + speculate, accept, Rollback: draft, verify, accept, roll back
# book/
# └── ch11.py         + this chapter's figures and the speed-up's closed form
# bench/
# └── bench_speculative.py + tokens/s for plain and speculative decoding at the 0.8B's shapes
# chapters/
# └── ch11_mtp.py     + this chapter's script
# notebooks/
# └── ch11_mtp.ipynb  + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch11_mtp.py` (`--figures` saves the figures, `--proof`
# compares the head with transformers' generic MTP layer). With the synthetic checkpoint the MTP head is as
# random as everything else, so its guesses are almost never right: this chapter then shows the machinery, and a
# draft that is always right shows the other end.

# %%
import copy
import math
import random
import statistics

import torch

import book
from book import ch11
from qwen import measure
from qwen.chat import render
from qwen.config import Config
from qwen.course import chapter_args
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.draft import MTPDraft, Scripted, follow
from qwen.family import kv_bytes_per_token, linear_layer_bytes
from qwen.generate import checkpoint_stop_tokens, generate
from qwen.hub import part_files
from qwen.model import load_model
from qwen.mtp import FinalHidden, load_mtp, new_cache, step
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, mtp_shapes, real_config, tensor_shapes
from qwen.speculative import Rollback, speculate
from qwen.synthetic import banner, is_synthetic, synthetic_path
from qwen.tokenizer import load_tokenizer
from qwen.weights import read_header

args = chapter_args(__doc__)
missing = ch11.missing_mtp(args.path)
if missing:  # no usable mtp.* block here: this chapter needs one, so it shows the synthetic one's
    print(f"(no usable MTP block here: {missing}; this chapter runs on the synthetic checkpoint instead)")
    args.path = synthetic_path()
    print(banner(book.in_notebook()))
real = real_config()
dev = args.device
dtype = torch.float32 if dev.type == "cpu" else None  # a CPU multiplies fp32 faster than bf16; elsewhere bf16
model = load_model(args.path, dtype=dtype, device=dev)  # the main model
model.mtp = load_mtp(args.path, dtype=dtype, device=dev)  # and its MTP block, attached in the open
tok = load_tokenizer(args.path)
SYNTHETIC = is_synthetic(args.path)
TAG = " (synthetic weights)" if SYNTHETIC else ""  # on every line printed from the weights
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here
if SYNTHETIC and dev.type == "cpu":
    torch.set_num_threads(1)  # d = 64: each of this chapter's many small products is too narrow to share out

# %%
book.show("ch11-map", book.model_map.draw, "mtp")

# %% [markdown]
# ## 1. What the checkpoint holds
# The block's tensors sit beside the text model's, under `mtp.`: two RMSNorms in front of a projection `fc` of
# shape (d, 2d), one decoder layer of the full-attention kind (chapter 8's, with its own q/k/v/o, QK-norms, two
# norms and an MLP), and a final `norm`. There is no embedding and no head: the block borrows the main model's.
# Read from the file's headers (chapter 1), beside the shapes the real 0.8B's config gives (`qwen.sizes.mtp_shapes`,
# which lists the block from a config alone, as `tensor_shapes` lists the text model in chapter 1):

# %%
keys = {k: v["shape"] for f in part_files(args.path, "mtp") for k, v in read_header(f).items() if k.startswith("mtp.")}
real_mtp = {"mtp." + k: v for k, v in mtp_shapes(REAL_TEXT_CONFIG).items()}  # from the config alone (qwen/sizes.py)
d_real = real.hidden_size
print(f"{'key':48s} {'this checkpoint':>16s} {'real Qwen3.5-0.8B':>18s}")
for key in sorted(keys):
    print(f"{key:48s} {str(tuple(keys[key])):>16s} {str(real_mtp.get(key)):>18s}")
n_mtp = sum(math.prod(s) for s in keys.values())
n_real_mtp = sum(math.prod(s) for s in real_mtp.values())
n_real = count_by_part(tensor_shapes(REAL_TEXT_CONFIG))["total"]
predicted = {"mtp." + k: v for k, v in mtp_shapes(model.cfg).items()}  # from this checkpoint's config.json
as_predicted = {k: tuple(v) for k, v in keys.items()} == predicted
print(f"{len(keys)} tensors, {n_mtp:,} parameters{TAG}; the same names as real Qwen3.5-0.8B's: "
      f"{sorted(keys) == sorted(real_mtp)}; the shapes its config predicts: {as_predicted}")
print(f"real Qwen3.5-0.8B: {n_real_mtp:,} parameters in mtp.*, {n_real_mtp / n_real:.1%} of the text model's "
      f"{n_real:,}")

# %% [markdown]
# ## 2. The head's forward, step by step
# The main model's last hidden state h_t — the output of its final norm, the vector the head turns into the
# logits for x_{t+1} — already knows a lot about the next token. The MTP block is handed that token as well, and
# looks one further:
#
# 1. embed the token x_{t+1} with the main model's table: e (B, T, d);
# 2. normalise each input on its own, `pre_fc_norm_embedding`(e) and `pre_fc_norm_hidden`(h_t), and join them,
#    embedding first: (B, T, 2d);
# 3. `fc` (d, 2d) projects back to d;
# 4. one full-attention decoder layer, `mtp.layers.0`, with its own KV cache and the main model's RoPE positions:
#    (B, T, d), each pair attending to the pairs before it;
# 5. `norm`, then the main model's head: logits (B, T, V) for x_{t+2}.
#
# This is the shape of DeepSeek-V3's MTP module (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §2.2): a shared
# embedding and head, two RMS-normed inputs projected from 2d to d, one transformer block. On a prompt, pair t is
# (x_{t+1}, h_t); the last pair takes the token the main model picks next.

# %%
prompt = "The capital of France is Paris. The capital of Italy is"
ids = torch.tensor([tok.encode(prompt)], device=dev)  # (1, T)
T = ids.shape[1]
mtp = model.mtp
with FinalHidden(model) as kept:
    logits = model(ids)  # (1, T, V)
h = kept.h  # (1, T, d): after the final norm
after = torch.cat([ids[:, 1:], logits[:, -1:].argmax(-1)], 1)  # (1, T): x_{t+1}; the last one the model's own pick
e = model.embed_tokens(after)  # (1, T, d)
joined = torch.cat([mtp.pre_fc_norm_embedding(e), mtp.pre_fc_norm_hidden(h)], dim=-1)  # (1, T, 2d)
u = mtp.fc(joined)  # (1, T, d)
cos, sin = model.rotary(torch.arange(T, device=dev)[None], u.dtype)  # pair t at position t (vLLM's convention)
g = mtp.norm(mtp.layers[0](u, cos, sin))  # (1, T, d): no cache, so causal attention over the T pairs
mtp_logits = model.lm_head(g)  # (1, T, V): the guess for x_{t+2}
for name, x, real_shape in (("h_t", h, f"(1, T, {d_real})"), ("embedded x_{t+1}", e, f"(1, T, {d_real})"),
                            ("joined", joined, f"(1, T, {2 * d_real})"), ("fc", u, f"(1, T, {d_real})"),
                            ("layer + norm", g, f"(1, T, {d_real})"),
                            ("logits", mtp_logits, f"(1, T, {real.vocab_size})")):
    print(f"{name:18s} {str(tuple(x.shape)):18s} real Qwen3.5-0.8B {real_shape}")
print(f"the steps by hand vs qwen.mtp.step: max |diff| = "
      f"{float((mtp_logits - step(model, mtp, after, h, new_cache())[1]).abs().max()):.1e}")
picks = logits[0].argmax(-1)  # (T,): the main model's own next token at each position
guesses = mtp_logits[0].argmax(-1)  # (T,): the block's guess for the token after that
agree = int((guesses[:-1] == picks[1:]).sum())
print(f"the block's guess for x_(t+2) equals the main model's pick there at {agree} of {T - 1} positions{TAG}")

# %% [markdown]
# On the synthetic checkpoint the block is random, and so are its guesses: they are almost never the main model's
# picks. A trained head's are, often; how often is what decides the speed-up (section 7).
#
# **Which position, which hidden state.** The two public sources agree on h: vLLM's Qwen3.5 MTP model is handed
# the main model's returned hidden states, which end with the final norm, and transformers' `MTPCandidateGenerator`
# takes `hidden_states[-1]`, also the final norm's output. They differ on the position: vLLM gives the pair
# (x_{t+1}, h_t) the position of h_t, t; transformers' generic `MtpLayer` path the position of x_{t+1}, t + 1. A
# RoPE score depends only on the distance between query and key (chapter 4), and within the block every pair is
# shifted by the same 1, so the logits agree up to rounding. This course uses vLLM's: entry t of the block's KV
# cache then lines up with entry t of the main model's. Numerically:

# %%
def head_at(positions, hidden):
    c, s = model.rotary(positions, u.dtype)
    joined = torch.cat([mtp.pre_fc_norm_embedding(e), mtp.pre_fc_norm_hidden(hidden)], dim=-1)
    return model.lm_head(mtp.norm(mtp.layers[0](mtp.fc(joined), c, s)))  # (1, T, V)


pos = torch.arange(T, device=dev)[None]
scale = float(mtp_logits.abs().max())
print(f"positions t + 1 instead of t: max |diff| = {float((head_at(pos + 1, h) - mtp_logits).abs().max()):.1e} "
      f"(logits up to {scale:.2f}); positions 2t: {float((head_at(2 * pos, h) - mtp_logits).abs().max()):.1e}")
seen = {}
hook = model.norm.register_forward_pre_hook(lambda module, inputs: seen.update(x=inputs[0]))
model(ids)
hook.remove()
print(f"h before the final norm instead of after it: max |diff| = "
      f"{float((head_at(pos, seen['x']) - mtp_logits).abs().max()):.1e}{TAG}")

# %% [markdown]
# Shifting every position by one changes nothing but rounding; doubling them changes the distances, and the logits.
# The hidden state before the final norm is a different input: `pre_fc_norm_hidden` normalises it again, but the
# final norm's per-channel scale (1 + w) is missing, so the block reads other numbers. Both sources use the output
# of the final norm, and so does `qwen.mtp.FinalHidden` (a hook on `model.norm`, so the model's code is unchanged).
#
# The finished module:

# %%
book.listing("qwen/mtp.py")

# %% [markdown]
# - **`MTP`** is steps 2 to 5 with the checkpoint's names (minus `mtp.`); the decoder layer is chapter 8's
#   `DecoderLayer` of the full-attention kind.
# - **`step`** embeds the tokens, takes the main model's positions for them (padding skipped, as the main model
#   does), runs the block with its cache, and applies the main model's head.
# - **`load_mtp`** builds the block on the meta device and fills it with the `mtp.*` tensors alone (chapter 1's
#   `fill`); the chapter attaches it in the open, `model.mtp = load_mtp(path, dtype, device)`: nothing is read
#   from disk behind a later call.
#
# ## 3. Why one full-attention layer
# Neither the checkpoint nor the sources read for this chapter (vLLM, transformers) say why the block is one
# full-attention layer and not a Gated DeltaNet one; what follows is an argument for the design, not a published
# rationale.
#
# - **The context is already read.** h_t comes out of every layer of the main model: it already carries what the
#   context says about the next token. The block's job is short-range: combine h_t with one more token and look one
#   step further. It needs no long, cheap memory of its own, which is what a DeltaNet layer is for.
# - **It can look back exactly.** At pair t the layer attends to every earlier pair (x_{s+1}, h_s), so it can find
#   an earlier occurrence of a token and copy what followed — retrieval that a fixed-size state can only
#   approximate (chapter 7).
# - **Its cache is cut by length.** A draft of k > 1 guesses writes cache entries for its own guesses, and most
#   steps throw some away. A KV cache drops them by moving its length back (`MTPDraft.advance` does so every step);
#   a DeltaNet layer in the block would need the snapshot-and-replay of section 6 for the draft too.
# - **It is cheap.** One layer's keys and values per token:

# %%
kv_tok = kv_bytes_per_token(real)
full = real.layer_types.count("full_attention")
print(f"real Qwen3.5-0.8B: the MTP layer keeps {kv_tok:,} B per token in bf16; the main model's {full} "
      f"full-attention layers {full * kv_tok:,} B: the block adds 1/{full} to the KV cache")

# %% [markdown]
# ## 4. Draft, verify, accept
# One step of speculative decoding, with x the token the main model picked last (not yet fed to it) and d_1 … d_k
# the draft's guesses:
#
# 1. **verify**: feed [x, d_1, …, d_k] to the main model, k + 1 positions in one forward. Position i's logits say
#    what the main model would pick after d_i (after x for i = 0).
# 2. **accept** (greedy): keep d_1, d_2, … while each equals the main model's pick after the one before it; stop at
#    the first that does not. Then add the main model's own pick after the last kept one: that is the correction
#    (it replaces the first wrong guess), or, when all k were kept, a bonus token. So a step makes n + 1 tokens
#    with n = 0 … k guesses kept, and every one of them is the token plain greedy decoding would have made.
# 3. **roll back** every cache to the accepted tokens (section 6), and let the draft guess again from there.
#
# A draft of k > 1 from the MTP block chains it: its own output g_t stands in for h, its own guess for the next
# token. How often such later guesses survive is a property of the trained weights, measured on a real checkpoint.
#
# **Try it first**: exercise 219 is the greedy accept step (`python practice/judge.py start 219`, or the cell
# below).

# %%
def greedy_accept(drafts, logits):
    raise NotImplementedError  # your code: (tokens (B, k + 1) with -1 after each row's n + 1, n (B,))


book.attempt(219, greedy_accept)

# %% [markdown]
# The draft is pluggable (`qwen/draft.py`): a draft carries its k, and `speculate(model, ids, n, draft)` runs the
# loop with it. `Scripted(script, k)` proposes whatever `script(generated, k)` returns, and
# `follow(reference, wrong)` is a script that reads the answer from a plain greedy run and proposes a wrong token
# (the right one + 1) wherever `wrong(step, i)` says so. Here is a draft that keeps 2, 0, 3, 1, 3, … of its k = 3
# guesses, and what the loop does with them:

# %%
N, N_SWEEP = 16, 40  # new tokens per run here, and in section 7 (where chance needs more forwards)
chat = render([{"role": "user", "content": "Explain in two sentences why the sky is blue."}])
chat_ids = tok.encode(chat)
stop = checkpoint_stop_tokens(args.path)
long_plain = list(generate(model, chat_ids, N_SWEEP, stop=stop))  # plain greedy: what every draft is checked against
reference = torch.tensor([long_plain], device=dev)  # (1, N_SWEEP)
plain = long_plain[:N]


class Recorded:
    """A draft that remembers its guesses, one list per main-model forward."""

    def __init__(self, draft):
        self.draft, self.log = draft, []
        self.k, self.counts, self.start, self.advance = draft.k, draft.counts, draft.start, draft.advance

    def propose(self, pick):
        guesses, q = self.draft.propose(pick)
        self.log.append(guesses[0].tolist())
        return guesses, q


def steps_of(out, log):
    """Each forward's fed token, guesses, accepted count and own token, read off a greedy output: a guess is kept
    exactly when it is the token the output has there."""
    steps, n = [], 1  # the prefill made out[0]
    for guesses in log:
        kept = next((i for i, d in enumerate(guesses) if n + i >= len(out) or d != out[n + i]), len(guesses))
        if n + kept >= len(out):
            break  # the run ended inside this step
        steps.append(dict(fed=out[n - 1], drafts=guesses, accepted=kept, main=out[n + kept]))
        n += kept + 1
    return steps


pattern = [2, 0, 3, 1, 3, 0]
draft = Recorded(Scripted(follow(reference, wrong=lambda j, i: i >= pattern[j % len(pattern)]), 3))
out = list(speculate(model, chat_ids, N, draft, stop=stop))
loop = steps_of(out, draft.log)
print(f"k = 3, the scripted draft: {len(draft.log)} main-model forwards for {len(out)} tokens; kept per forward "
      f"{[s['accepted'] for s in loop]}; identical to plain greedy: {out == plain}")

# %%
book.show("ch11-loop", ch11.loop_figure, loop[:6], lambda i: tok.decode([i]),
          title=f"The draft–verify loop, k = 3, a scripted draft{TAG}")

# %% [markdown]
# Whatever the draft proposes, speculative greedy makes exactly plain greedy's tokens: every token it emits is the
# main model's argmax after the tokens before it. The draft only decides how many of them one forward makes. With
# the MTP head, and with a draft that is always right (`follow(reference)`):

# %%
runs = {}
for kind, k in [("MTP head", 1), ("MTP head", 2), ("MTP head", 4), ("always right", 1), ("always right", 2),
                ("always right", 4)]:
    draft = MTPDraft(model, k) if kind == "MTP head" else Scripted(follow(reference), k)
    got = list(speculate(model, chat_ids, N, draft, stop=stop))
    stats = draft.counts  # main-model forwards after the prefill, guesses proposed and accepted
    runs[kind, k] = stats, (len(got) - 1) / max(stats["steps"], 1)  # the prefill made the first token
    print(f"{kind:12s} k = {k}: identical to plain greedy: {got == plain}; accepted {stats['accepted']} of "
          f"{stats['proposed']} guesses; {runs[kind, k][1]:.2f} tokens per main-model forward"
          f"{TAG if kind == 'MTP head' else ''}")

# %% [markdown]
# The two ends: the MTP head of the synthetic checkpoint is random, so it is almost never right and every forward
# makes one token (the main model's correction) — plain decoding's rate, plus the cost of drafting. The
# always-right draft makes k + 1 tokens per forward (the last forward of a run may be cut short by its length).
# With a real checkpoint the MTP head lands in between: the "MTP head" rows are then its real acceptance on this
# prompt. "Identical" is exact arithmetic's promise, kept here in fp32: in bf16 (this chapter's choice on a GPU)
# the verify pass over k + 1 positions rounds differently from one-token decoding, and two top tokens within a
# bf16 step of each other can swap.

# %% [markdown]
# ## 5. Sampling: the same distribution
# With sampling, "the main model's token" is a draw, and a guess is kept at random. The rule (Leviathan, Kalman
# and Matias 2023; Chen et al. 2023): with p the main model's distribution at that position and q the draft's,
# keep guess d with probability min(1, p(d) / q(d)); at the first rejection draw from the residual max(0, p − q),
# normalised. The emitted token is then distributed exactly as p. In one line: it is d and kept with probability
# q(d) · min(1, p(d)/q(d)) = min(p, q)(d), and otherwise drawn from the residual, which puts the missing
# p(d) − min(p, q)(d) back. Exactly, on five tokens:

# %%
p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
q = torch.tensor([0.1, 0.4, 0.3, 0.1, 0.1], dtype=torch.float64)
kept = torch.minimum(p, q)  # P(the guess is d and is kept)
residual = (p - q).clamp(min=0) / (p - q).clamp(min=0).sum()
total = kept + (1 - kept.sum()) * residual  # P(the step emits token d)
print(f"p = {p.tolist()}\nemitted = {[round(v, 12) for v in total.tolist()]}: equal to p: "
      f"{torch.allclose(total, p, rtol=0, atol=1e-15)}")
only_if_above = torch.where(p >= q, q, 0) + (1 - torch.where(p >= q, q, 0).sum()) * residual
from_p = kept + (1 - kept.sum()) * p
print(f"mistake 'keep only when p ≥ q': {[round(v, 3) for v in only_if_above.tolist()]}; mistake 'draw the "
      f"rejection from p': {[round(v, 3) for v in from_p.tolist()]}")

# %% [markdown]
# A deterministic draft (the scripts) has q = one-hot at d: keep d with probability p(d), else draw from p without
# d, normalised. The MTP head, when sampling, draws its guesses from its own distribution, which is then q.
# `speculate(model, ids, n, draft, Sampling(temperature=...))` applies the rule; tests/test_speculative.py checks
# the emitted distribution against the main model's over 200,000 draws.
#
# **Try it first**: exercise 220 is the acceptance rule (`python practice/judge.py start 220`, or the cell below).

# %%
def speculative_sample(p, q, drafts, u, u_last):
    raise NotImplementedError  # your code: (tokens (B, k + 1) with -1 after each row's n + 1, n (B,))


book.attempt(220, speculative_sample)

# %% [markdown]
# ## 6. Rolling back a state that cannot be cut
# After a rejection the verify forward has fed k + 1 tokens, and only m = n + 1 of them stay. Every cache must end
# up exactly as a plain pass over the accepted tokens would leave it.
#
# - A **full-attention** layer's KV cache holds one row per token: cut it back to the accepted length and it is
#   the plain cache (the rows after the cut are never read again, and the next step overwrites them).
# - A **Gated DeltaNet** layer's state S has folded every fed token into one (dk, dv) matrix per head; there is no
#   row to cut. Its conv window holds the last K − 1 = 3 inputs, so after a verify of k + 1 ≥ 3 tokens it holds
#   only verified ones: the inputs before them are gone. Undoing the state's update in arithmetic would mean
#   dividing by e^g, which can be close to 0, and inverting (I − β k kᵀ), nearly singular when β is close to 1.
#
# A tiny DeltaNet (d = 8, one head, dk = dv = 2, random weights, a slow decay) after a two-token prompt, then a
# verify of [x, d_1, d_2, d_3] where only d_1 is right:

# %%
tiny_cfg = Config.from_dict(dict(REAL_TEXT_CONFIG, hidden_size=8, linear_num_key_heads=1, linear_num_value_heads=1,
                                 linear_key_head_dim=2, linear_value_head_dim=2), "a tiny DeltaNet config")
torch.manual_seed(0)
tiny = GatedDeltaNet(tiny_cfg)
tiny.A_log.data.fill_(math.log(0.1))  # a slow-forgetting head: e^g ≈ 0.9 per token
xs = torch.randn(1, 6, 8)  # two prompt tokens, then x, d_1, d_2, d_3
plain_cache = DeltaNetCache()
for t in range(4):  # plain decoding: the prompt, then x and d_1, one token at a time
    tiny(xs[:, t:t + 1], plain_cache)
spec = DeltaNetCache()
tiny(xs[:, :2], spec)  # the prompt
saved = spec.conv.clone(), spec.state.clone()  # the snapshot, taken before the verify pass
tiny(xs[:, 2:], spec)  # verify: 4 tokens at once
absorbed = spec.state.clone()
window = tiny.in_proj_qkv(xs[:, 3:]).transpose(1, 2)  # (1, C, 3): the inputs of d_1, d_2, d_3
print(f"after the verify, the conv window is the inputs of d_1, d_2, d_3 only: {torch.equal(spec.conv, window)}")
spec.conv, spec.state = saved  # restore, then re-run the accepted tokens x, d_1
tiny(xs[:, 2:4], spec)
states = {"plain: after x, d1": plain_cache.state[0, 0], "verify: after x, d1, d2, d3": absorbed[0, 0],
          "restored + x, d1 replayed": spec.state[0, 0]}
for name, S in states.items():
    print(f"{name:28s} S = {[[round(v, 4) for v in row] for row in S.tolist()]}")
print(f"|verify − plain| = {float((absorbed - plain_cache.state).abs().max()):.3f}; "
      f"|replayed − plain| = {float((spec.state - plain_cache.state).abs().max()):.1e}, "
      f"conv window {float((spec.conv - plain_cache.conv).abs().max()):.1e}")

# %%
book.show("ch11-rollback", ch11.rollback_figure, states)

# %% [markdown]
# The state after the verify pass has absorbed d_2 and d_3; the restored and replayed one equals the plain state up
# to rounding (the replay runs the chunked kernel over two tokens, plain decoding the token-by-token rule).
#
# **The course's choice**: before each verify pass, copy every DeltaNet layer's conv window and state, and keep
# what the layer's memory reads during the pass: the outputs of `in_proj_qkv` (the conv's inputs), `in_proj_b` and
# `in_proj_a` (β's and g's), through forward hooks, so the model code is unchanged. After a rejection, put the copy
# back and run the layer's memory — `GatedDeltaNet.remember`: the conv, the gates, the delta rule — again on the
# first m of them, as exercise 221 does. The memory alone: the replay's job is the conv window and the state, and
# the mixer's output at the accepted positions (its gate `in_proj_z`, `out_proj`) was already computed by the
# verify pass and used by the layers above. Those need nothing either: each position only sees earlier ones, so
# their outputs for the accepted positions are already right, and their KV caches are cut by length. The
# alternative — keep the state after every verified position — needs the kernel to hand out its intermediate
# states, and k + 1 copies of them. What each costs for the real 0.8B, per sequence:

# %%
linear = real.layer_types.count("linear_attention")
per_layer = linear_layer_bytes(real)  # state in fp32 + the K − 1 conv inputs in bf16
print(f"real Qwen3.5-0.8B: the snapshot, {linear} layers × {per_layer:,} B = {linear * per_layer / 2 ** 20:.1f} MiB, "
      f"whatever k; the KV caches: nothing to copy")
channels = 2 * real.linear_num_key_heads * real.linear_key_head_dim + \
    real.linear_num_value_heads * real.linear_value_head_dim  # C: the conv's inputs [q | k | v]
kept_row = channels + 2 * real.linear_num_value_heads  # one token's conv inputs, b and a
for k in (1, 2, 4):
    kept_bytes = linear * (k + 1) * kept_row * 2  # (k + 1, C + 2·Hv) in bf16 per DeltaNet layer
    print(f"real Qwen3.5-0.8B, k = {k}: + kept projections {kept_bytes / 2 ** 20:.2f} MiB; a state per verified "
          f"position instead: {(k + 1) * linear * per_layer / 2 ** 20:.1f} MiB")

# %% [markdown]
# And the replay's cost, in chapter 9's currency: a decode step is bound by reading the weights, so a replay costs
# ρ decode steps, ρ = the bytes it moves over the bytes of the weights (bf16) a decode step reads. Re-running each
# whole mixer on the m accepted tokens reads a quarter of the model; its memory alone skips `in_proj_z` and
# `out_proj`; the course's replay reads no projection at all, only the conv's kernel (C × K numbers a layer), the
# copy it restores and the state and window it writes, once each, as a fused kernel would (the kept projections of
# m ≤ k tokens add under 0.1 %; section 7 measures what torch's unfused operations cost):

# %%
mixer = {name.split("linear_attn.")[1]: math.prod(shape) for name, shape in tensor_shapes(REAL_TEXT_CONFIG).items()
         if name.startswith(f"layers.{real.layer_types.index('linear_attention')}.linear_attn.")}
whole = sum(mixer.values())  # one mixer's weights
memory = whole - mixer["in_proj_z.weight"] - mixer["out_proj.weight"] - mixer["norm.weight"]  # what the state reads
rho_whole, rho_memory = linear * whole / n_real, linear * memory / n_real
moved = linear * (mixer["conv1d.weight"] * 2 + 2 * per_layer)  # the conv kernel (bf16); the copy read, the new written
rho = moved / (2 * n_real)  # against a decode step's 2 B per weight
print(f"real Qwen3.5-0.8B, a rejection's replay against a decode step ({2 * n_real:,} B of weights):")
print(f"  each mixer again, whole: {linear} × {whole:,} weights: ρ ≈ {rho_whole:.2f}")
print(f"  its memory alone (no in_proj_z, norm, out_proj): {linear} × {memory:,} weights: ρ ≈ {rho_memory:.2f}")
print(f"  the memory from the verify pass's projections (qwen.speculative): {linear} × {mixer['conv1d.weight']:,} "
      f"conv weights and {linear} × 2 × {per_layer:,} B of states: ρ ≈ {rho:.3f} (the copy before every verify "
      f"moves as many bytes again, rejection or not: part of c)")

# %% [markdown]
# On the checkpoint itself, with `qwen.speculative.Rollback`: a verify pass of 4 tokens of which 2 stay, against a
# plain pass that fed only those 2, one at a time. Equal means equal up to rounding, for the KV caches too: their
# rows for the 2 kept tokens were computed in a forward over 4 positions (every DeltaNet layer below them ran its
# chunked kernel), the plain ones one position at a time. How much rounding that is, through every layer: a plain
# pass that reads the same 2 tokens in one forward is about as far (the same order) from the one-at-a-time pass.

# %%
verify = torch.tensor([plain[:4]], device=dev)  # [x, d_1, d_2, d_3]: any four tokens will do
plain_cache, both, spec = model.new_cache(), model.new_cache(), model.new_cache()
for c in (plain_cache, both, spec):
    model(ids, cache=c)  # the prompt
for t in range(2):
    model(verify[:, t:t + 1], cache=plain_cache)  # plain decoding: x, then d_1
model(verify[:, :2], cache=both)  # x and d_1 in one forward


def distance(ours, plain, kind):
    """The largest difference between two caches' entries of one kind ("k", "v", "conv", "state"), relative to the
    plain entry's largest value."""
    return max(float((getattr(a, kind) - getattr(b, kind)).abs().max() / getattr(b, kind).abs().max())
               for a, b in zip(ours.layers, plain.layers) if hasattr(b, kind) and getattr(b, kind) is not None)


with Rollback(model, spec) as rollback:
    model(verify, cache=spec)
print(f"before the rollback, the DeltaNet states (holding d_2, d_3 too) differ from the plain ones by "
      f"{distance(spec, plain_cache, 'state'):.0%} of their scale{TAG}")
rollback.keep(2)
KINDS = ("k", "v", "conv", "state")
print(f"after Rollback.keep(2): lengths {spec.length} and {plain_cache.length}; largest difference, relative to the "
      f"entry's scale: {', '.join(f'{kind} {distance(spec, plain_cache, kind):.1e}' for kind in KINDS)}")
print(f"x and d_1 in one plain forward, against one at a time: "
      f"{', '.join(f'{kind} {distance(both, plain_cache, kind):.1e}' for kind in KINDS)}{TAG}")

# %% [markdown]
# **Try it first**: exercise 221 is the DeltaNet rollback (`python practice/judge.py start 221`, or the cell
# below).

# %%
def rollback(conv, state, x, k, v, g, beta, n_accepted):
    raise NotImplementedError  # your code: (conv window, state) after each row's first n_accepted + 1 tokens


book.attempt(221, rollback)

# %% [markdown]
# ### The finished modules: `qwen/draft.py` and `qwen/speculative.py`

# %%
book.listing("qwen/draft.py")

# %%
book.listing("qwen/speculative.py")

# %% [markdown]
# - **`accept`** is step 2: for greedy, the agreeing prefix (a cumulative product of the matches counts it) and the
#   main model's token; for sampling, the rule above. In a batch every row keeps the same number of tokens, the
#   fewest any row accepted, so the caches stay rectangular (the others' extra guesses are guessed again).
# - **`Rollback`** is section 6: the copies, the hooks that keep what each DeltaNet layer's memory reads (the
#   outputs of `in_proj_qkv`, `in_proj_b`, `in_proj_a`), and `keep(m)`, which replays `remember` on them.
# - **`MTPDraft`** keeps the block's cache one entry per main-model entry; `advance` cuts its chained guesses'
#   entries and adds the pairs of the accepted tokens, built from the main model's own hidden states of the verify
#   pass.
# - **`speculate`** is the loop, `generate`'s with a draft: prefill, then propose, verify, accept, roll back until a
#   stop token or the limit; the draft's `counts` hold the forwards and guesses.
#
# ## 7. When it pays
# Suppose each guess is right with probability α, independently, and the verify stops at the first wrong one.
# Then a forward keeps at least i guesses with probability α^i (i ≤ k), and makes
#
# **E[tokens per forward] = 1 + α + α² + … + α^k = (1 − α^{k+1}) / (1 − α)**,
#
# k + 1 at α = 1. It costs one verify forward — c decode steps; where decoding is bound by reading the weights
# (chapter 9), the verify reads them once for all its k + 1 positions, so c stays close to 1 for small k — plus k
# draft steps of r decode steps each — plus, when a guess was rejected (probability 1 − α^k: not all k kept), the
# rollback's replay of ρ decode steps (section 6). So the speed-up over plain decoding is
#
# **S(α, k) = (1 − α^{k+1}) / ((1 − α)(c + k·r + (1 − α^k)·ρ))**.
#
# The MTP block's draft step reads the block and the **head**: in the 0.8B the tied head is a third of the model's
# weights, so by bytes read, r is far from 0. Where S = 1, speculative decoding starts to pay (`ch11.break_even`
# solves for α); with a free rollback (ρ = 0), with each mixer re-run whole (ρ ≈ 0.25) and with the course's replay:

# %%
head = real.vocab_size * d_real
r = (n_real_mtp + head) / n_real  # a draft step against a decode step, by the weights each reads
print(f"real Qwen3.5-0.8B: a draft step reads the block ({n_real_mtp:,}) and the head ({head:,}), "
      f"a decode step all {n_real:,}: r ≈ {r:.2f} by bytes read (an estimate)")
for k in (1, 2, 4):
    even = [ch11.break_even(k, 1.0, r, cost) for cost in (0.0, rho_whole, rho)]
    print(f"c = 1, k = {k}: pays from α ≈ {even[0]:.2f} (ρ = 0), {even[1]:.2f} (ρ = {rho_whole:.2f}), {even[2]:.2f} "
          f"(ρ = {rho:.3f}) on; at α = 0.8: {ch11.speedup(0.8, k, 1.0, r, rho):.2f}x (at most "
          f"{ch11.speedup(1.0, k, 1.0, r, rho):.2f}x at α = 1)")

# %% [markdown]
# The formula on this checkpoint's machinery: a scripted draft that is right with probability α at random
# (so the independence the formula assumes holds), k = 3, against the closed form:

# %%
K_SWEEP, measured = 3, []
for alpha in (0.5, 0.8):
    rng = random.Random(1)
    draft = Scripted(follow(reference, wrong=lambda j, i, a=alpha, rng=rng: rng.random() >= a), K_SWEEP)
    got = list(speculate(model, chat_ids, N_SWEEP, draft, stop=stop))
    stats = draft.counts
    per = (len(got) - 1) / stats["steps"]
    measured.append((alpha, per, K_SWEEP, f"random, α = {alpha}"))
    print(f"α = {alpha}, k = {K_SWEEP}: {per:.2f} tokens per forward over {stats['steps']} forwards, closed form "
          f"{ch11.tokens_per_step(alpha, K_SWEEP):.2f} (apart by chance); identical: {got == long_plain}")
single = runs["MTP head", 1][0]["accepted"] / runs["MTP head", 1][0]["proposed"]  # k = 1: α itself
for (kind, k), (_stats, per) in runs.items():
    measured.append((single if kind == "MTP head" else 1.0, per, k, kind + (TAG if kind == "MTP head" else "")))

# %%
book.show("ch11-speedup", ch11.speedup_figure, (1, 2, 4), 1.0, r, measured, rho, rho_whole,
          title=f"Speculative decoding: closed form (real Qwen3.5-0.8B's r and ρ, c = 1; dashed: each mixer re-run "
                f"whole), measured points{TAG}")

# %% [markdown]
# The measured points sit where the closed form puts them: the random drafts near their curves (chance aside), the
# always-right draft at k + 1 (a step cut short at the end of the run pulls it a little below), the synthetic MTP
# head at α ≈ 0. For a real head, α is the fraction of single guesses it gets right (k = 1); its later guesses in a
# chain need not be as good as the first, and where they are worse, the closed form overestimates what k > 1 gives.
#
# And the time it takes here: one verify forward and one rollback against one decode step, and the always-right
# draft's speed against plain decoding (one run each, on a shared machine: noisy).

# %%
def seconds(run, repeats=3):
    return measure.medians([run], dev, repeats, warmup=0)[0]  # each run timed with the device synchronised


cache = model.new_cache()
model(ids, cache=cache)


def verify_once(n):
    with Rollback(model, cache) as back:
        model(verify[:, :n], cache=cache)
    back.keep(0)


def replay_once(m, repeats=3):
    """Median seconds of Rollback.keep(m) alone, after a verify over 4 positions on a copy of the prompt's cache."""
    times = []
    for _ in range(repeats):
        fresh = copy.deepcopy(cache)
        with Rollback(model, fresh) as back:
            model(verify, cache=fresh)
        times.append(measure.timed(lambda: back.keep(m), dev)[0])
    return statistics.median(times)


one_s, four_s, replay_s = seconds(lambda: verify_once(1)), seconds(lambda: verify_once(4)), replay_once(2)
plain_s = seconds(lambda: list(generate(model, chat_ids, N, stop=stop)), 1)
fast_s = seconds(lambda: list(speculate(model, chat_ids, N, Scripted(follow(reference), 4), stop=stop)), 1)
print(f"this checkpoint on {dev}{' (synthetic: narrow, so fixed overheads dominate)' if SYNTHETIC else ''}: one "
      f"decode step {one_s * 1e3:.1f} ms, a verify forward over 4 positions {four_s * 1e3:.1f} ms, a rollback that "
      f"keeps 2 of them {replay_s * 1e3:.1f} ms (ρ here: {replay_s * 1e3:.1f} ms / {one_s * 1e3:.1f} ms; by bytes at "
      f"the 0.8B's shapes {rho:.3f}); {N} tokens: plain {plain_s * 1e3:.0f} ms, the always-right draft with k = 4 "
      f"{fast_s * 1e3:.0f} ms")

# %% [markdown]
# On this checkpoint nothing is bound by memory (d = 64: its weights are tiny), so these times are fixed overheads,
# and the ρ measured here says little about the real model. `python bench/bench_speculative.py` measures the same
# at the real 0.8B's shapes (random weights: the speed does not depend on the values), for k = 1, 2, 4, with the
# always-right draft (the upper bound) and the random MTP head (about the lower bound), the verify cost c and the
# rollback's ρ. Measured once on a shared 2-core CPU (bf16, the fast path): a rollback that keeps 1 token took
# about 0.1 of a decode step, one that keeps 4 about 0.3 to 0.45 (the decode step itself varied from 1.0 to
# 1.7 s). That is above the byte count's 0.027: torch runs the delta rule's step as separate elementwise
# operations, each a pass over a layer's 1 MiB state, for every replayed token, where the byte count assumes a
# fused kernel that keeps the state on chip across the m tokens. Re-running each mixer whole took about 0.45 s
# more in both cases: the quarter of the weights the course's replay no longer reads.
#
# ## Try this
#
# - In section 7, run the random draft with α = 0.95 and k = 1, 2, 4, 8: where does a larger k stop paying (with
#   the real 0.8B's r and ρ in `ch11.speedup`)? And with `rho_whole`, each mixer re-run whole?
# - Change `pattern` in section 4 to `[0]` (every first guess wrong) and to `[3]` (all right): the output stays
#   the same, only the number of forwards changes.
# - In section 6, restore only `spec.state` (not the conv window) before the replay: how far is the state from the
#   plain one now?
# - With a real checkpoint: `bash course.sh chat --speculative 2` prints the acceptance rate and tokens per
#   main-model forward after each reply. Try a reply that repeats the question, and one that invents.
#
# ## Show the proof
# The block against transformers' generic `MtpLayer` (`transformers.modeling_layers`) built around a Qwen3.5
# full-attention decoder layer, with the `mtp.*` tensors mapped onto its names: pre_fc_norm_embedding → enorm,
# pre_fc_norm_hidden → hnorm, fc → eh_proj, layers.0 → mtp_block, norm → post_norm. Same h, same positions, fp32:
# the two compute the same operations, so the difference is 0 or rounding (on a GPU this chapter runs the model in
# bf16, and the difference is then bf16's rounding of our side).

# %%
def compare(transformers, path, h, after, mtp_logits):
    from safetensors import safe_open
    from transformers.modeling_layers import MtpLayer
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    transformers.logging.set_verbosity_error()  # its notice that its fused kernels are not installed
    text = transformers.AutoConfig.from_pretrained(path).get_text_config()
    theirs = MtpLayer(text, Qwen3_5DecoderLayer, Qwen3_5RMSNorm, text.layer_types.index("full_attention"))
    names = {"pre_fc_norm_embedding.": "enorm.", "pre_fc_norm_hidden.": "hnorm.", "fc.": "eh_proj.",
             "layers.0.": "mtp_block.", "norm.": "post_norm."}
    state = {}
    for file in part_files(path, "mtp"):
        with safe_open(file, framework="pt") as f:
            for key in (k for k in f.keys() if k.startswith("mtp.")):
                prefix = next(p for p in names if key[4:].startswith(p))
                state[names[prefix] + key[4 + len(prefix):]] = f.get_tensor(key).float()
    theirs.load_state_dict(state)
    theirs = theirs.float().eval()
    T = after.shape[1]
    positions = torch.arange(T, device=dev)[None]
    cos_sin = tuple(t.float().cpu() for t in model.rotary(positions, torch.float32))  # the main model's RoPE table
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    g = theirs(model.embed_tokens(after).float().cpu(), h.float().cpu(), cos_sin, causal, positions.cpu(), None)
    book.oracle.difference("MTP block, fp32, the chapter's prompt", mtp_logits.float().cpu(),
                           g @ model.lm_head.weight.float().cpu().T)  # the shared head


book.proof(compare, args.path, h, after, mtp_logits)

# %% [markdown]
# ## Summary
#
# - The MTP block (`mtp.*`) reads the main model's final-norm hidden state h_t and the embedding of x_{t+1},
#   normalises both, joins and projects them (fc, 2d → d), runs one full-attention decoder layer with its own KV
#   cache, normalises, and predicts x_{t+2} with the main model's head. Positions t (vLLM) or t + 1
#   (transformers) give the same logits up to rounding: RoPE sees distances.
# - Speculative decoding: draft k guesses, verify them in one forward over k + 1 positions, keep the agreeing
#   prefix plus the main model's own token. Greedy output is plain greedy's, token for token, whatever the draft;
#   sampling keeps the main model's distribution (min(1, p/q), then the residual).
# - The rollback: KV caches are cut by length; DeltaNet layers are restored from a copy taken before the verify
#   and replay their memory (conv, gates, delta rule) on the accepted tokens' projections, kept from the verify
#   pass — 18.6 MiB for the real 0.8B whatever k, against (k + 1) times that for a state per verified position.
#   The replay reads no projection weight: ρ ≈ 0.03 of a decode step, where re-running each mixer whole reads a
#   quarter of the model (ρ ≈ 0.25).
# - The gain: (1 − α^{k+1}) / (1 − α) tokens per forward, divided by the step's cost c + k·r + (1 − α^k)·ρ. In
#   the 0.8B the shared head makes the MTP draft step more than a third of a decode step by bytes read: the head
#   must be right more than about 4 times in 10 at k = 1 (more for a larger k) before speculative decoding pays at
#   all, and the gain stays modest (1.3x to 1.4x at α = 0.8).
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | h_t (final-norm output) and embedded x_{t+1} | (B, T, d) each | (B, T, 1024) |
# | joined, after the two norms | (B, T, 2d) | (B, T, 2048) |
# | `mtp.fc.weight` | (d, 2d) | (1024, 2048) |
# | the block's output g_t | (B, T, d) | (B, T, 1024) |
# | the block's logits (shared head) | (B, T, V) | (B, T, 248320) |
# | the block's KV cache | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | draft guesses; verify input | (B, k); (B, k + 1) | |
# | verify logits | (B, k + 1, V) | (B, k + 1, 248320) |
# |DeltaNet snapshot, per linear layer|conv (B, C, K − 1), state (B, Hv, dk, dv) fp32|(B, 6144, 3), (B, 16, 128, 128)|

# %%
book.notation(args.path)

# %% [markdown]
# File added in this chapter: `book/ch11.py` (`qwen/mtp.py`, `qwen/draft.py` and `qwen/speculative.py` are its
# modules).
#
# ### Exercises
# 219 · the greedy accept step (accepting past the first mismatch, dropping the correction token, the logits of the
# wrong position); 220 · the speculative-sampling acceptance rule (keeping a guess only when p ≥ q, resampling from
# p instead of the residual); 221 · the DeltaNet rollback (keeping the state after the rejected tokens).

# %%
book.attempt(219)
book.attempt(220)
book.attempt(221)

# %% [markdown]
# ## How to explain it
#
# 1. **Why it works.** Decoding one token reads every weight; checking five tokens in one forward reads them once
#    too. So if a cheap guesser is often right, one expensive forward can confirm several tokens.
# 2. **Why the output does not change.** Every emitted token is the main model's own choice after the tokens before
#    it: a guess is kept only when it equals that choice (greedy), or with the probability that leaves the main
#    model's distribution unchanged (sampling). The draft changes the speed, never what the main model says: the
#    same text (greedy), the same distribution (sampling).
# 3. **What the MTP head is.** A one-layer model that reads the big model's last hidden state and the next token,
#    and guesses the token after. It shares the embedding and the head, so it is small to store — but reading the
#    head is most of a draft step in a small model.
# 4. **Why Qwen3.5 makes it hard.** Attention's cache is a list of rows: rejected rows are cut off. DeltaNet's cache
#    is one matrix that every token has been folded into: it has to be saved before the guesses and rebuilt from the
#    accepted inputs after.
# 5. **When it pays.** (1 − α^{k+1}) / (1 − α) tokens per forward against c + k·r + (1 − α^k)·ρ of cost: high
#    acceptance, a cheap draft, a verify that costs little more than one decode step, and a rollback that re-reads
#    no weights.
