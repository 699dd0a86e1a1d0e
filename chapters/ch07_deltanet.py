"""Chapter 7: Gated DeltaNet by hand — the delta rule token by token, the chunked form that is fast, and the state
that replaces a KV cache.

Run: python chapters/ch07_deltanet.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch07_deltanet.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 7 · Gated DeltaNet: a memory of fixed size
#
# Three layers in four of Qwen3.5 are not softmax attention. Attention keeps every past key and value and compares
# the new query with all of them; a Gated DeltaNet layer keeps one matrix per head, a memory S that maps keys to values,
# and updates it as each token arrives. Its cost per token does not grow with the context, and neither does its
# cache. This chapter writes the memory's update rule (the *delta rule*) token by token, then derives the chunked
# form that computes the same thing with matrix products, proves the two equal, and adds up what the fixed-size
# state saves.
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── norm.py         (chapter 3: GatedRMSNorm and l2norm are used here)
# └── deltanet.py     + causal_conv, recurrent_delta_rule, chunked_delta_rule, DeltaNetCache, GatedDeltaNet
# book/
# ├── family.py       (chapter 6: the sizes of the Qwen3.5 family and their cache, used for the memory bill)
# └── ch07.py         + this chapter's figures
# bench/
# └── bench_deltanet.py + our chunked kernel against transformers' own, as ratios
# chapters/
# └── ch07_deltanet.py + this chapter's script
# notebooks/
# └── ch07_deltanet.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch07_deltanet.py` (`--figures` saves the figures,
# `--proof` compares with transformers). With the synthetic checkpoint, everything measured on it comes from
# random weights drawn around their initial values: it shows what the code does, not what the trained model does.

# %%
import math

import torch
import torch.nn.functional as F

import book
from book import ch07
from qwen.config import Config
from qwen.course import chapter_args
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.norm import RMSNorm, l2norm
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.weights import fill, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
SYNTHETIC = is_synthetic(args.path)
TAG = " (synthetic weights)" if SYNTHETIC else ""  # on every line printed from the weights
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %%
book.show("ch07-map", book.model_map.draw, "deltanet")

# %% [markdown]
# The ideas have names and papers: the delta rule as a fast-weight memory is **DeltaNet** (Schlag, Irie and
# Schmidhuber 2021, "Linear Transformers Are Secretly Fast Weight Programmers"); the chunk-parallel form of section 4
# is Yang, Wang, Zhang, Shen and Kim 2024 ("Parallelizing Linear Transformers with the Delta Rule over Sequence
# Length"); the forgetting gate on top is **Gated DeltaNet** (Yang, Kautz and Hatamizadeh 2025, "Gated Delta
# Networks: Improving Mamba2 with Delta Rule"), the layer Qwen3.5 uses.
#
# ## 1. The delta rule as a memory
# Take a matrix S of shape (dk, dv) and write pairs into it: key k (a unit vector of dk numbers) → value v (dv
# numbers). Reading is a product: Sᵀk. Plain *linear attention* writes by adding, S ← S + k vᵀ: read back with k_i,
# it returns v_i plus (k_j·k_i) v_j for every other pair j — exact only when the keys are orthogonal and no key is
# written twice. The *delta rule* first asks the memory what it holds for k, then writes only the error:
#
# **S ← S + β · k (v − Sᵀk)ᵀ**, with a write strength β in (0, 1).
#
# With β = 1 the memory then returns exactly v for k after the write, whatever it held before. Below: five pairs in
# a memory with dk = 8, in float64, read back with their keys.

# %%
def write(pairs, delta, beta=1.0):
    """Write (key, value) pairs into an empty memory, by the delta rule or by plain addition."""
    k0, v0 = pairs[0]
    S = torch.zeros(k0.shape[0], v0.shape[0], dtype=torch.float64)
    for k, v in pairs:
        S = S + beta * torch.outer(k, v - S.T @ k) if delta else S + torch.outer(k, v)
    return S


def recall_error(S, keys, values):
    return max(float((S.T @ k - v).abs().max()) for k, v in zip(keys, values))


gen = torch.Generator().manual_seed(7)
orthonormal = torch.linalg.qr(torch.randn(8, 8, generator=gen, dtype=torch.float64))[0].T[:5]  # 5 rows, k_i·k_j = 0
random_unit = torch.randn(5, 8, generator=gen, dtype=torch.float64)
random_unit = random_unit / random_unit.norm(dim=1, keepdim=True)  # exactly unit length (no eps)
old, new = torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.randn(5, 4, generator=gen, dtype=torch.float64)
tests = {"orthogonal keys": (list(zip(orthonormal, old)), orthonormal, old),
         "orthogonal keys,\neach written twice": (list(zip(orthonormal, old)) + list(zip(orthonormal, new)),
                                                 orthonormal, new),
         "random unit keys": (list(zip(random_unit, old)), random_unit, old)}
errors = {}
for name, (pairs, keys, want) in tests.items():
    errors[name] = tuple(recall_error(write(pairs, delta=rule), keys, want) for rule in (True, False))
    print(f"{name.replace(chr(10), ' '):36s} largest recall error: delta rule {errors[name][0]:.1e}, "
          f"plain linear attention {errors[name][1]:.1e}")
last_key, last_value = random_unit[-1], old[-1]
print(f"random unit keys, the last pair written: delta rule error "
      f"{float((write(tests['random unit keys'][0], True).T @ last_key - last_value).abs().max()):.1e}")

# %% [markdown]
# - **Orthogonal keys, written once**: both are exact (the error is float64 rounding).
# - **The same keys written twice**, new values replacing old: linear attention returns old + new; the delta rule
#   subtracts what the memory held before writing, so it returns the new value, exactly.
# - **Keys that are not orthogonal** (five random directions in 8 dimensions overlap): both make errors, because
#   a later write to an overlapping key disturbs the earlier ones. The delta rule's last write is exact (β = 1,
#   unit keys); the earlier ones are partly overwritten (writing them again would bring them closer: each write is
#   one step of gradient descent on that pair's error). Whatever the rule, a memory read as Sᵀk returns arbitrary
#   values exactly for at most dk keys: with more keys than dimensions, some key is a combination of the others,
#   and so is what it reads back. Each of Qwen3.5's heads has dk = 128, and there are many heads.
#
# A memory that is only ever written fills up with stale pairs. The **forgetting gate** multiplies the whole state
# by e^g ≤ 1 before each write (g ≤ 0 is computed from the token): whatever was written n tokens ago is read back
# at e^(g₁ + … + gₙ) of its strength. Each head has its own learned rate, so one head can forget within a few
# tokens while another keeps a memory across hundreds (e^g = 0.99 halves it only every 69 tokens).

# %%
for e in (0.5, 0.9, 0.99):
    print(f"e^g = {e:4}: after 10 tokens {e ** 10:.3f} of a memory is left, after 100 {e ** 100:.2e}; "
          f"half-life {math.log(0.5) / math.log(e):6.1f} tokens")

# %%
book.show("ch07-memory", ch07.memory_figure, errors, (0.5, 0.9, 0.99))

# %% [markdown]
# ## 2. The gated delta rule, token by token
# Putting both together, one value head of one layer does, for each token t:
#
# 1. **forget**: S ← e^{g_t} S
# 2. **correct**: S ← S + k_t ⊗ β_t (v_t − Sᵀk_t)
# 3. **read**: o_t = Sᵀ q_t
#
# Equivalently S_t = e^{g_t}(I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ: a decay, then (I − β_t k_t k_tᵀ) removes a
# fraction β_t of what k_t used to map to (all of it when β_t = 1, where it is a projection), then the new pair.
# The query q_t reads the memory after token t has written to it.
#
# Around this rule the layer (`layers.N.linear_attn.*`) builds its inputs from the normed hidden state x (B, T, d):
#
# - `in_proj_qkv` gives [q | k | v] (2·Hk·dk + Hv·dv channels), which goes through a **causal depthwise conv**: each
#   channel mixes its last K = 4 values (taps `conv1d.weight`, no bias), then silu. It lets a token's q, k, v see
#   the few tokens just before it.
# - q and k are split into Hk heads of dk and **l2-normalised** (unit length: k must be a direction for the delta
#   rule's correction to be a projection); q is also scaled by dk^−½. v is split into Hv heads of dv. When Hv > Hk
#   (by their published model cards, the 4B, 9B and 27B have 2 or 3 value heads per key head), value head h uses
#   key head ⌊h / (Hv/Hk)⌋.
# - **β = sigmoid(b)** with b = `in_proj_b`(x): how much of its error each token writes, per value head.
# - **g = −e^{A_log} · softplus(a + dt_bias)** with a = `in_proj_a`(x), in fp32: a learned rate e^{A_log} per head
#   times a token-dependent, positive step size; so g ≤ 0, and e^g ∈ (0, 1].
# - The output o (B, T, Hv, dv) goes through the **gated RMSNorm** of chapter 3 with the gate z = `in_proj_z`(x),
#   then `out_proj` back to d.
#
# **Try it first**: exercise 210 is the causal conv with its state, exercise 211 the rule above (run `python
# practice/judge.py start 210` and `start 211`, or write them in the cells below: the judge grades them here).

# %%
def causal_conv(x, weight, state=None):
    raise NotImplementedError  # your code: (silu of the causal depthwise conv (B, T, C), the new state (B, C, K-1))


book.attempt(210, causal_conv)

# %%
def recurrent_delta_rule(q, k, v, g, beta, state=None):
    raise NotImplementedError  # your code: (o (B, T, Hv, dv) in v's dtype, the final fp32 state (B, Hv, dk, dv))


book.attempt(211, recurrent_delta_rule)

# %% [markdown]
# ## 3. On the checkpoint: the gates over a sentence
# Layer 0 of the checkpoint, on a sentence: embedding, the layer's input norm, then the layer's own projections.
# The decay e^g and the write strength β, per token and value head (the figure shows the decay as a half-life,
# ln ½ / g tokens, on a log scale: e^g = 0.5 is a half-life of 1 token, e^g = 0.99 one of 69):

# %%
from qwen.deltanet import causal_conv, recurrent_delta_rule  # noqa: E402  (the finished ones, from here on)

tok = load_tokenizer(args.path)
text = "The capital of France is Paris. The capital of Italy is Rome. So the capital of France is"
ids = torch.tensor([tok.encode(text)])
tokens = [tok.decode([i]) for i in ids[0]]
rows = W["embed_tokens.weight"][ids].float()  # the embedding lookup of chapter 2: (1, T, d)
x = fill(RMSNorm(cfg.hidden_size, cfg.rms_norm_eps), W, "layers.0.input_layernorm.")(rows)  # layer 0's input
layer = fill(GatedDeltaNet(cfg), W, "layers.0.linear_attn.")  # fp32: bf16 weights widen exactly
beta = layer.in_proj_b(x).sigmoid()[0]  # (T, Hv)
g = -layer.A_log.float().exp() * F.softplus(layer.in_proj_a(x).float() + layer.dt_bias.float())
decay = g[0].exp()  # (T, Hv)
print(f"{len(tokens)} tokens, {cfg.linear_num_value_heads} value heads in layer 0{TAG}")
for h in range(cfg.linear_num_value_heads):
    print(f"head {h}: e^A_log = {float(layer.A_log.exp()[h]):5.2f}, dt_bias = {float(layer.dt_bias[h]):+.2f} -> "
          f"decay e^g from {float(decay[:, h].min()):.3f} to {float(decay[:, h].max()):.3f}, "
          f"β from {float(beta[:, h].min()):.2f} to {float(beta[:, h].max()):.2f}")

# %% [markdown]
# Each head's rate e^{A_log} sets how fast it can forget; softplus(a + dt_bias) scales that per token. In the
# synthetic checkpoint A_log and dt_bias are random draws like transformers' initial values (e^{A_log} uniform in
# [0.01, 16], dt_bias around 1), so these heatmaps show what an untrained layer does — most heads forget almost
# everything at every token — and nothing about the trained model, whose heads are free to learn slow decays.

# %%
book.show("ch07-gates", ch07.gates_figure, tokens, decay, beta, SYNTHETIC)

# %% [markdown]
# Running the layer one token at a time with a `DeltaNetCache`, the state after each token. Its size is fixed —
# (B, Hv, dk, dv) — and its norm rises with writes and falls with decays:

# %%
cache, norms = DeltaNetCache(), []
for t in range(ids.shape[1]):
    layer(x[:, t:t + 1], cache=cache)
    norms.append(cache.state[0].flatten(1).norm(dim=1))  # (Hv,)
norms = torch.stack(norms)  # (T, Hv)
print(f"after {len(tokens)} tokens the cache holds conv {tuple(cache.conv.shape)} {cache.conv.dtype} and state "
      f"{tuple(cache.state.shape)} {cache.state.dtype}; ‖S‖ per head{TAG}: "
      f"{', '.join(f'{n:.2f}' for n in norms[-1].tolist())}")

# %%
book.show("ch07-state", ch07.state_norm_figure, tokens, norms, SYNTHETIC)

# %% [markdown]
# ## 4. The chunked form
# The recurrent form takes T sequential steps, each a handful of tiny (dk × dv) operations: fine for generating
# one token, slow for reading a prompt. The chunked form computes the same numbers for a chunk of C = 64 tokens at
# once. Within one chunk (rows i = 1…C, S the state before the chunk), write G_i = g_1 + … + g_i (the log of the
# decay from the chunk's start to token i), and call **v′_i = β_i (v_i − (e^{g_i} S_{i−1})ᵀ k_i)** the correction
# token i writes. Unrolling the recurrence inside the chunk:
#
# - S_i = e^{G_i} S + Σ_{j≤i} e^{G_i − G_j} k_j v′_jᵀ: the old state, decayed, plus every write so far, each
#   decayed from its own time. So the **decay matrix** Γ_ij = e^{G_i − G_j} (j ≤ i, 0 above) says how much of
#   token j's write is left when token i reads.
# - Put that into v′_i: v′_i = β_i v_i − β_i e^{G_i} Sᵀk_i − β_i Σ_{j<i} Γ_ij (k_i·k_j) v′_j. Every v′_i depends on
#   the earlier v′_j: moving those terms to the left gives one linear system for all the corrections at once,
#
#   **(I + strictly_lower(βKKᵀ ⊙ Γ)) V′ = βV − (βe^G K) S**.
#
#   The matrix A on the left is **unit lower-triangular**: ones on the diagonal (v′_i does not depend on itself),
#   zeros above (nor on later tokens). Solving it by forward substitution *is* the token loop — row i uses rows
#   j < i — but a triangular solve (`torch.linalg.solve_triangular`) does it as one library call over all chunks
#   and heads, and the rest becomes matrix products. Because the right side is linear in S, A⁻¹ is applied once:
#   **V′ = U − W S** with **U = A⁻¹(βV)** and **W = A⁻¹(βe^G K)**, both computed for every chunk at once; only S is
#   unknown until the previous chunk is done.
# - Reading: o_i = S_iᵀ q_i = e^{G_i} Sᵀq_i + Σ_{j≤i} Γ_ij (q_i·k_j) v′_j, that is **O = (e^G Q) S + (QKᵀ ⊙ Γ) V′**
#   (this Γ keeps its diagonal, Γ_ii = 1: token i reads its own write).
# - **Crossing the chunk boundary**: the state after the chunk is S_C, **S ← e^{G_C} S + (e^{G_C − G} K)ᵀ V′**.
#
# So the loop over chunks needs the previous chunk's S three times: for the corrections V′ = U − W S, for the
# outputs O (through (e^G Q) S), and for the next state. Everything else — Γ, A⁻¹, U, W, QKᵀ ⊙ Γ — is computed
# for all chunks at once; a sequence of T tokens takes T/64 loop steps of three small matrix products each.
#
# The literature calls this the **WY representation** of the chunk's product of (I − β k kᵀ) factors, and the
# triangular solve the **UT transform** (transformers' comment calls A its "UT system"). The same quantities under
# three sets of names:
#
# | this course | meaning | fla (`chunk_gated_delta_rule_fwd`) | transformers (`torch_chunk_gated_delta_rule`) |
# |---|---|---|---|
# | G | cumulative log decay in the chunk | g (after `chunk_local_cumsum`) | cum_decay |
# | Γ | e^(G_i − G_j), lower triangle | (inside the kernels) | pairwise_decay |
# | A | I + strictly_lower(βKKᵀ ⊙ Γ) | A (`chunk_scaled_dot_kkt_fwd`, then `solve_tril`) | ut_system |
# | U = A⁻¹(βV) | corrections before the state is known | u | new_values |
# | W = A⁻¹(βe^G K) | what the carried state subtracts | w | k_cumdecay |
# | V′ = U − W S (`V_new`) | the corrections | v_new | v_new |
# | QKᵀ ⊙ Γ (`P`) | attention inside the chunk | (inside `chunk_fwd_o`) | intra_chunk_attn |
# | S | the state carried between chunks | h (one per chunk), final_state | last_recurrent_state |
#
# The last chunk is padded with zeros (g = 0 keeps the state, k = v = β = 0 write nothing) and the padded rows
# are dropped. Here are Γ and A for our sentence in layer 0 (shorter than 64 tokens, so one padded chunk), for
# the value head that forgets least: A's entries below the diagonal are β_i (k_i·k_j) Γ_ij, how much token j's
# correction changes token i's.

# %%
Hk, Hv, dk, dv = cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim, \
    cfg.linear_value_head_dim
u, _ = causal_conv(layer.in_proj_qkv(x), layer.conv1d.weight)  # (1, T, 2·Hk·dk + Hv·dv)
q, k, v = u.split([Hk * dk, Hk * dk, Hv * dv], dim=-1)
q = l2norm(q.reshape(1, -1, Hk, dk).float()) * dk ** -0.5  # (1, T, Hk, dk)
k = l2norm(k.reshape(1, -1, Hk, dk).float())
v = v.reshape(1, -1, Hv, dv)  # (1, T, Hv, dv)
h = int(decay.mean(0).argmax())  # the value head that forgets least: its Γ has the most to show
G = g[0, :, h].cumsum(0)  # the sentence is shorter than a chunk: one chunk
Gamma = (G[:, None] - G[None, :]).masked_fill(~torch.ones(len(G), len(G), dtype=torch.bool).tril(), -math.inf).exp()
kh = k[0, :, h // (Hv // Hk)]  # (T, dk): value head h reads key head ⌊h / r⌋
A = torch.eye(len(G)) + ((beta[:, h, None] * kh @ kh.T) * Gamma).tril(-1)
print(f"the first chunk of value head {h}: {len(G)} tokens; Γ below the diagonal from "
      f"{float(Gamma.tril(-1).max()):.3f} down to {float(Gamma[Gamma > 0].min()):.1e}; "
      f"A's largest entry below the diagonal {float(A.tril(-1).abs().max()):.3f}{TAG}")

# %%
book.show("ch07-chunk", ch07.chunk_figure, Gamma, A, h, SYNTHETIC)

# %% [markdown]
# The structure of Γ is easier to see on a toy chunk where every token decays the memory by e^g = 0.95: Γ_ij =
# 0.95^(i − j), a smooth fade away from the diagonal (below). The sentence's heads above forget much faster
# (the synthetic draw of A_log), so their Γ is nearly diagonal.

# %%
toy_G = torch.full((16,), math.log(0.95)).cumsum(0)
toy_Gamma = (toy_G[:, None] - toy_G[None, :]).masked_fill(~torch.ones(16, 16, dtype=torch.bool).tril(), -math.inf).exp()
print(f"toy chunk, e^g = 0.95: Γ[15, 0] = {float(toy_Gamma[15, 0]):.3f} = 0.95^15 = {0.95 ** 15:.3f}")

# %%
book.show("ch07-toy-gamma", ch07.toy_gamma_figure, toy_Gamma, 0.95)

# %% [markdown]
# **Try it first**: exercise 212 writes the chunked form and is graded against the token-by-token rule at lengths
# that are not multiples of the chunk (`python practice/judge.py start 212`, or the cell below).

# %%
def chunked_delta_rule(q, k, v, g, beta, state=None, chunk_size=64):
    raise NotImplementedError  # your code: the same (o, final state) as the token-by-token rule, chunk by chunk


book.attempt(212, chunked_delta_rule)

# %% [markdown]
# The two forms share no code, so their agreement is a test of both. In float64 they agree to rounding; in fp32
# they differ by the order of the sums. On this layer's own q, k, v, g, β (and in chunks of 8, so the sentence
# spans several chunks and the state crosses boundaries):

# %%
from qwen.deltanet import chunked_delta_rule  # noqa: E402  (the finished one, from here on)
from qwen.family import (  # noqa: E402  (the sizes, for section 5's memory bill)
    SIZES,
    all_attention_bytes,
    cache_bytes,
    kv_bytes_per_token,
    linear_layer_bytes,
)

inputs = (q, k, v, g, beta[None])
o_rec64, S_rec64 = recurrent_delta_rule(*(t.double() for t in inputs))
for dtype in (torch.float64, torch.float32):
    o_chunk, S_chunk = chunked_delta_rule(*(t.to(dtype) for t in inputs), chunk_size=8)
    o_rec, _ = recurrent_delta_rule(*(t.to(dtype) for t in inputs))
    print(f"{str(dtype):14s} max |chunked − recurrent| = {float((o_chunk.double() - o_rec.double()).abs().max()):.1e};"
          f" chunked vs the float64 recurrent answer {float((o_chunk.double() - o_rec64).abs().max()):.1e} "
          f"(outputs up to {float(o_rec64.abs().max()):.2f})")

# %% [markdown]
# ## The code: `qwen/deltanet.py`

# %%
book.listing("qwen/deltanet.py")

# %% [markdown]
# - **`causal_conv`** puts the K − 1 previous inputs (the conv state, or zeros) in front of x and convolves without
#   padding, so output t reads inputs t − 3 … t. It returns the newest K − 1 inputs as the next call's state.
#   `F.conv1d` sums bf16 products in fp32 and rounds once; a per-tap bf16 sum would be off by a step.
# - **`recurrent_delta_rule`** is section 2, line by line, in fp32 (float64 for float64 inputs). Key heads are
#   matched to value heads with `repeat_interleave` (heads 0, 0, 1, 1 — not `repeat`'s 0, 1, 0, 1).
# - **`chunked_delta_rule`** is section 4. It keeps the value heads grouped by their key head, so KKᵀ and QKᵀ are
#   computed once per key head and shared (no copies of q and k per value head); it finds A⁻¹ with one triangular
#   solve against the identity and applies it to both right sides with matrix products (U and W, the table's
#   names); and it lays every operand
#   out contiguously, since matrix products on strided views run at half speed on a CPU.
#   `python bench/bench_deltanet.py` times it against transformers' own pure-torch kernel in one run.
# - **`DeltaNetCache`** holds `conv` (B, C, K − 1) in the model dtype and `state` (B, Hv, dk, dv) in fp32.
#   **`GatedDeltaNet.forward`** uses the recurrent form for a single token with a cache (a decode step) and the
#   chunked form for anything longer, starting from the cached state; a padding mask zeroes padded positions of
#   the input, so with left padding the state stays exactly zero until the text starts.
#
# ## 5. The memory bill
# A full-attention layer keeps, for every token of the context, a key and a value: 2 · Hkv · D numbers per token.
# A Gated DeltaNet layer keeps Hv · dk · dv fp32 numbers of state and (K − 1) · (2·Hk·dk + Hv·dv) of conv state,
# whatever the context (transformers' cache keeps K conv inputs, one of which is never read again: about 1% more
# in the 0.8B). First the formula against the cache our layer really keeps:

# %%
cache = DeltaNetCache()
bf16_layer = fill(GatedDeltaNet(cfg), W, "layers.0.linear_attn.").to(torch.bfloat16)  # as stored; `layer` stays fp32
bf16_layer(x.bfloat16(), cache=cache)
kept = cache.state.numel() * cache.state.element_size() + cache.conv.numel() * cache.conv.element_size()
print(f"this checkpoint's layer 0 keeps {kept:,} bytes per sequence; the formula says "
      f"{linear_layer_bytes(cfg):,}")

# %% [markdown]
# The same formulas for the five dense Qwen3.5 sizes, with their numbers from the published model cards and
# configs (read from public copies, not checked against the hub here; `qwen/family.py` names each source), per
# sequence, in bf16 with an fp32 state:

# %%
T32 = 32 * 1024
print(f"{'':10s} {'linear layer':>13s} {'full layer, per token':>22s} {'at 32k tokens':>14s} "
      f"{'whole model at 32k':>19s} {'all full attention':>19s}")
for name, s in SIZES.items():
    per_token, linear = kv_bytes_per_token(s), linear_layer_bytes(s)
    print(f"Qwen3.5-{name:5s} {linear / 2 ** 20:9.2f} MiB {per_token:16,} B {per_token * T32 / 2 ** 20:9.0f} MiB "
          f"{sum(cache_bytes(s, T32)) / 2 ** 30:14.2f} GiB "
          f"{all_attention_bytes(s, T32) / 2 ** 30:14.2f} GiB")
s = SIZES["0.8B"]
even = linear_layer_bytes(s) / kv_bytes_per_token(s)
print(f"real Qwen3.5-0.8B: one linear layer holds as much as a full layer's KV cache at {even:,.0f} tokens")

# %% [markdown]
# A DeltaNet layer's state costs as much as a few hundred tokens of KV cache, and never more. At 32k tokens the
# whole model's cache is about a quarter of what the same model with full attention everywhere would keep (its
# full-attention layers, 6 to 16 of them by size, still grow), and the state part is fixed: doubling the context
# doubles only the full-attention part.

# %%
book.show("ch07-bill", ch07.memory_bill_figure)

# %% [markdown]
# ## Try this
#
# - In section 1, write the random unit keys with β = 0.5 instead of 1
#   (`write(tests["random unit keys"][0], delta=True, beta=0.5)`): does the last pair's error stay 0? Then write
#   12 random unit keys into the 8 dimensions (`l2norm(torch.randn(12, 8, dtype=torch.float64))`): which pairs can
#   still be read back?
# - Run `chunked_delta_rule` on section 4's inputs with `chunk_size=1`, `3` and `64`: the answers agree to rounding;
#   time them with `%timeit` in the notebook. Why is chunk size 1 the recurrent form in disguise?
# - Prefill the layer with the first 10 tokens (`c = DeltaNetCache(); layer(x[:, :10], cache=c)`), then feed the
#   rest one at a time: the outputs equal one pass over the whole sentence (tests/test_deltanet.py checks it
#   against transformers' cache).
#
# ## Show the proof
# transformers' `Qwen3_5GatedDeltaNet` on the same weights and the same input. In fp32 the difference is the order
# of the sums (both use a chunked kernel, laid out differently). In bf16 both round q, k, v, β, the kernel output
# and the gated norm to bf16 in the same places (the gated norm in transformers' order, chapter 3), so nearly every
# output is equal; a rare one, where an fp32 intermediate lands on the other side of a rounding boundary, may
# differ by one bf16 step of its own size.

# %%
def compare(transformers, path, layer):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    theirs = Qwen3_5GatedDeltaNet(transformers.AutoConfig.from_pretrained(path).text_config, 0)
    theirs.load_state_dict(layer.float().state_dict())
    h = torch.randn(2, 100, layer.in_proj_qkv.in_features, generator=torch.Generator().manual_seed(1))
    book.oracle.difference("layer 0, fp32", layer(h), theirs(h))
    ours, want = layer.bfloat16()(h.bfloat16()).float(), theirs.bfloat16()(h.bfloat16()).float()
    diff = (ours - want).abs()
    # one bf16 step at each output's own size (at least the smallest normal number, so 0 - 0 is 0 steps)
    own_step = (torch.finfo(torch.bfloat16).eps * want.abs()).clamp_min(torch.finfo(torch.bfloat16).tiny)
    print(f"layer 0, bf16: {int((diff > 0).sum())} of {diff.numel()} outputs differ from transformers, by at most "
          f"{float((diff / own_step).max()):.2f} bf16 steps of their own size")


book.proof(compare, args.path, layer)

# %% [markdown]
# ## Summary
#
# - A Gated DeltaNet head keeps a memory S (dk × dv). Per token: forget (S ← e^g S), correct (S ← S + k ⊗ β(v −
#   Sᵀk)), read (o = Sᵀq). The correction writes only what the memory got wrong, so a key written again replaces
#   its value instead of piling up, as it would in plain linear attention.
# - The gates come from the token: β = sigmoid(b) says how much to write, g = −e^{A_log} softplus(a + dt_bias) ≤ 0
#   how much to forget. q and k are unit vectors (l2norm), q scaled by dk^−½; a causal conv of width 4 comes first,
#   a gated RMSNorm after.
# - The chunked form computes the same numbers: within a chunk the corrections solve a unit lower-triangular
#   system, and only the state crosses from chunk to chunk. Proven equal to the recurrent form (float64, 1e-12) and
#   to transformers (fp32, 1e-5).
# - The cache of a linear layer is its state and the last 3 conv inputs: fixed size, whatever the context. In the
#   real 0.8B a linear layer's cache equals a full layer's KV cache at a few hundred tokens; at 32k tokens the whole
#   model keeps about a quarter of what full attention everywhere would.
#
# Shapes, in the notation of the table: x (B, T, d) → [q | k | v] (B, T, 2·Hk·dk + Hv·dv) → q, k (B, T, Hk, dk),
# v (B, T, Hv, dv); β, g (B, T, Hv); state S (B, Hv, dk, dv) fp32; conv state (B, 2·Hk·dk + Hv·dv, K − 1); o (B, T,
# Hv, dv) → gated norm with z (B, T, Hv, dv) → out_proj → (B, T, d).

# %%
book.notation(args.path)

# %% [markdown]
# File added in this chapter: `qwen/deltanet.py` (and `book/ch07.py`, `bench/bench_deltanet.py`).
#
# **Exercises**: 210 · the causal conv with its state; 211 · the gated delta rule, token by token; 212 · the
# chunked delta rule (`python practice/judge.py start 210`, or the cells in sections 2 and 4).
#
# ## How to explain it
#
# 1. **Why linear attention.** Softmax attention compares each new query with every past key: the cost per token
#    and the KV cache grow with the context. Linear attention drops the softmax, so Σ_j (q·k_j) v_j = (Σ_j k_j v_jᵀ)ᵀ
#    q: the sum can be kept as one matrix, updated per token. Fixed memory, fixed cost per token.
# 2. **What the delta rule corrects.** Plain linear attention only adds, so the matrix accumulates every pair and
#    old values interfere with new ones. The delta rule treats S as a key → value memory trained online: it
#    predicts the value for k, Sᵀk, and writes β times the error — one step of gradient descent, learning rate β,
#    on ½‖Sᵀk − v‖².
#    Rewriting a key replaces its value.
# 3. **What the gates do.** β (per token, per head) is the learning rate of that step; e^g (per token, per head)
#    decays the whole memory first, so a head can forget old context quickly or keep it. Mamba2's gate and the delta
#    rule together are "Gated DeltaNet".
# 4. **Why chunking.** Token by token is T sequential steps of tiny operations. Within a chunk the corrections
#    satisfy a unit lower-triangular linear system; one triangular solve and a few matrix products replace the
#    inner loop (the WY representation / UT transform), and only the chunk-to-chunk step — corrections, outputs
#    and state, each needing the carried state — stays sequential (T/64 steps). Same numbers, matrix-sized
#    work — and for generation, the recurrent step is the cheap one.
# 5. **Why a hybrid.** A fixed-size state cannot recall everything exactly (at most dk independent keys per head);
#    one full-attention layer in four keeps every past key and value, so it can still look up any earlier token —
#    softmax weights are soft, so even that is retrieval, not guaranteed exact recall — at a quarter of the KV cache.
