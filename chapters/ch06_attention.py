"""Chapter 6: gated full attention — query and gate from one projection, QK-norm, RoPE, grouped K/V heads, the
causal softmax written out, the output gate, and the KV cache.

Run: python chapters/ch06_attention.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch06_attention.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 6 · Gated full attention and the KV cache
#
# Every fourth layer of Qwen3.5 mixes tokens with ordinary softmax attention: each token builds a query, compares it
# with the keys of every earlier token, and takes a weighted average of their values. Qwen3.5 changes four things
# in the textbook version: a per-head **output gate**, made by the same projection as the query and applied as
# `sigmoid(gate)` to the heads' output before the output projection; an RMSNorm on each head's query and key
# (**QK-norm**) before RoPE; **partial RoPE** (only the first quarter of each head's dimensions rotate); and
# **grouped-query attention** (several query heads share one key/value head). This chapter writes
# `qwen/attention.py`, runs it on a sentence step by step, and adds the **KV cache** that generation needs.

# %%
import time

import torch
import torch.nn.functional as F

import book
from book import ch06
from qwen.attention import GatedAttention, KVCache
from qwen.config import Config
from qwen.course import chapter_args
from qwen.family import SIZES, all_attention_bytes, cache_bytes
from qwen.norm import RMSNorm
from qwen.rope import RotaryEmbedding, apply_rope
from qwen.sizes import REAL_NAME, real_config
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.weights import fill, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)  # lazy: only the tensors this chapter asks for are read
real = real_config()
REAL = REAL_NAME
dev, d, H, Hkv, D = args.device, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
R = int(D * cfg.partial_rotary_factor)
layer = cfg.layer_types.index("full_attention")  # the first full-attention layer
prefix = f"layers.{layer}.self_attn."
SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %% [markdown]
# Where it sits: the mixer of layers 3, 7, 11, … (one in four); the other layers use Gated DeltaNet (chapter 7).
# The KV cache box belongs to generation (chapter 9), but this chapter writes it, because attention defines what it
# must hold.

# %%
book.show("ch06-map", book.model_map.draw, "attention")

# %% [markdown]
# ## 1. Six tensors per layer
# `q_proj` is twice as tall as the query needs: it makes H query heads **and** H gate heads of D values each.
# `k_proj` and `v_proj` make only Hkv heads, shared by groups of query heads. `o_proj` maps the H heads back to the
# residual width d. `q_norm` and `k_norm` hold one (1 + w) scale of length D, used by every head. No biases.

# %%
full = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
print(f"full-attention layers: {full} ({len(full)} of {cfg.num_hidden_layers})")
SHAPES = {"q_proj.weight": ("(2·H·D, d)", lambda c: (2 * c.num_attention_heads * c.head_dim, c.hidden_size)),
          "k_proj.weight": ("(Hkv·D, d)", lambda c: (c.num_key_value_heads * c.head_dim, c.hidden_size)),
          "v_proj.weight": ("(Hkv·D, d)", lambda c: (c.num_key_value_heads * c.head_dim, c.hidden_size)),
          "o_proj.weight": ("(d, H·D)", lambda c: (c.hidden_size, c.num_attention_heads * c.head_dim)),
          "q_norm.weight": ("(D,)", lambda c: (c.head_dim,)), "k_norm.weight": ("(D,)", lambda c: (c.head_dim,))}
print(f"   {'':16s} {'this checkpoint':16s} {'formula':12s} {REAL}")
for name, (formula, shape) in SHAPES.items():
    assert tuple(W[prefix + name].shape) == shape(cfg)
    print(f"   {name:16s} {str(shape(cfg)):16s} {formula:12s} {shape(real)}")
for label, c in (("this checkpoint", cfg), (REAL, real)):
    per_layer = sum(torch.Size(shape(c)).numel() for _, shape in SHAPES.values())
    n = c.layer_types.count("full_attention")
    print(f"{label}: H = {c.num_attention_heads}, Hkv = {c.num_key_value_heads}, D = {c.head_dim}: "
          f"{per_layer:,} weights per layer, {per_layer * n:,} in its {n} full-attention layers")

# %% [markdown]
# ## 2. Write it
# The recipe, for x of shape (B, T, d) and the RoPE tables cos, sin of the T positions (chapter 4):
#
# 1. `q_proj(x)` viewed as (B, T, H, 2·D): for each head, the first D values are its query, the next D its gate.
# 2. q_norm on each query head, k_norm on each key head (k = `k_proj(x)` viewed as (B, T, Hkv, D)); v = `v_proj(x)`.
# 3. RoPE on q and k — after the norm.
# 4. scores = q·kᵀ / √D for every pair (query t, key s); −∞ (in practice the most negative float) where s > t or
#    key s is padding; softmax over s in fp32; the output of each head is the weighted sum of the values.
#    Query head h reads K/V head h // (H/Hkv).
# 5. Heads side by side (B, T, H·D), times sigmoid(gate), then `o_proj`.
#
# **Try it first:** exercise 208 asks for the attention (`attend`) and the whole layer (`gated_attention`) from its
# six weights. Start it with `python practice/judge.py start 208`, or write the two functions in the cell below (in
# the notebook) and run it: the judge grades them.


# %%
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    raise NotImplementedError  # your code here


def gated_attention(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor,
                    mask: torch.Tensor | None = None, eps: float = 1e-6) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(208, attend, gated_attention)

# %% [markdown]
# ### The finished module: `qwen/attention.py`

# %%
book.listing("qwen/attention.py")

# %% [markdown]
# `GatedAttention.forward` is the recipe line by line; `attention` is step 4 and `causal_mask` builds which keys each
# query may see; `KVCache` is section 7. The rest of the chapter runs the module's parts on a sentence, one step at
# a time, and checks each step.
#
# ## 3. Query and gate, interleaved per head
# A sentence, embedded and normalised by the layer's `input_layernorm`. The layers before it are skipped (chapter 8
# runs the whole stack), so what follows is this layer's response to the embeddings alone.

# %%
tok = load_tokenizer(args.path)
sentence = "The cat sat on the mat because it was tired."
ids = tok.encode(sentence)
tokens = [tok.decode([i]) for i in ids]
T = len(ids)
emb = W["embed_tokens.weight"][ids].float()[None].to(dev)  # (1, T, d): only this sentence's rows are read
x = fill(RMSNorm(d, cfg.rms_norm_eps), W, f"layers.{layer}.input_layernorm.").to(dev)(emb)
attn = fill(GatedAttention(cfg), W, prefix).to(dev)
qg = attn.q_proj(x)  # (1, T, 2·H·D)
q, gate = qg.view(1, T, H, 2 * D).split(D, dim=-1)  # each (1, T, H, D)
print(f"{T} tokens: {tokens}")
print(f"q_proj(x) {tuple(qg.shape)} -> view (1, T, H, 2D) {(1, T, H, 2 * D)} -> query {tuple(q.shape)} "
      f"and gate {tuple(gate.shape)}")
print(f"head 1 reads rows {2 * D}..{3 * D - 1} of q_proj.weight as its query and rows {3 * D}..{4 * D - 1} as its "
      f"gate")
blocked = qg.view(1, T, 2, H, D)  # the wrong reading: [all queries | all gates]
print(f"read as [all queries | all gates], 'query head 1' would be head 0's gate: "
      f"{torch.equal(blocked[:, :, 0, 1], gate[:, :, 0])}")

# %% [markdown]
# ## 4. QK-norm, then RoPE
# Each head's query and key are RMS-normalised over D (the zero-centred RMSNorm of chapter 3, one weight shared by
# all heads). This bounds every score: |q·k| ≤ ‖q‖‖k‖, and after the norm a head's length is at most
# √D · max|1 + w| whatever the input. Then RoPE rotates the first R dims; a rotation keeps lengths, so the bound
# survives.

# %%
rope = RotaryEmbedding(cfg)
positions = torch.arange(T, device=dev)[None]  # (1, T)
cos, sin = rope(positions, x.dtype)  # (1, T, R)
qn = attn.q_norm(q).transpose(1, 2)  # (1, H, T, D)
k = attn.k_norm(attn.k_proj(x).view(1, T, Hkv, D)).transpose(1, 2)  # (1, Hkv, T, D)
v = attn.v_proj(x).view(1, T, Hkv, D).transpose(1, 2)  # (1, Hkv, T, D): no norm, no RoPE
q_raw_rms = q.pow(2).mean(-1).sqrt()
print(f"RMS of the query heads before q_norm: {q_raw_rms.min():.2f} .. {q_raw_rms.max():.2f}; after: "
      f"{qn.pow(2).mean(-1).sqrt().min():.2f} .. {qn.pow(2).mean(-1).sqrt().max():.2f}{SYNTHETIC}")
qr, kr = apply_rope(qn, cos, sin), apply_rope(k, cos, sin)
print(f"RoPE keeps each head's length: max change {(qr.norm(dim=-1) - qn.norm(dim=-1)).abs().max():.1e}; "
      f"dims {R}..{D - 1} untouched: {torch.equal(qr[..., R:], qn[..., R:])}")

# %% [markdown]
# ## 5. The scores, the mask, the softmax, the weighted sum
# Grouped-query attention first: K/V head j serves query heads j·(H/Hkv) … (j+1)·(H/Hkv) − 1, a run of
# consecutive heads, so the keys are expanded with `repeat_interleave` (not `repeat`, which would tile them). Then
# four lines: scores, mask, softmax, weighted sum.

# %%
group, real_group = H // Hkv, real.num_attention_heads // real.num_key_value_heads
print(f"H = {H} query heads, Hkv = {Hkv} K/V heads: query head h reads K/V head {[h // group for h in range(H)]}"
      f" ({REAL}: {[h // real_group for h in range(real.num_attention_heads)]})")
kx, vx = kr.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (1, H, T, D)
raw = qr @ kx.transpose(-2, -1)  # (1, H, T, T): one score per (query, key)
scores = raw * D ** -0.5
allowed = torch.ones(T, T, dtype=torch.bool, device=dev).tril()  # query t sees keys 0..t
scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
probs = torch.softmax(scores, dim=-1, dtype=torch.float32)  # (1, H, T, T)
heads = probs @ vx  # (1, H, T, D)
print(f"every row of probabilities sums to 1: max |sum - 1| = {(probs.sum(-1) - 1).abs().max():.1e}; "
      f"above the diagonal exactly 0: {bool((probs[..., ~allowed] == 0).all())}; "
      f"the first token attends only to itself: {bool((probs[..., 0, 0] == 1).all())}")

# %% [markdown]
# Why divide by √D: a dot product of D terms grows like √D. Without the scale the softmax of a large head
# (D = 256 in the real 0.8B) is far sharper; with it, the spread of the scores no longer depends on D — exactly so
# when the entries of q and k are roughly independent with unit variance. QK-norm gives each head an RMS near 1
# (times its 1 + w), but not independent entries: a trained head's q and k can line up, and its scores spread more.

# %%
unscaled = torch.softmax(raw.masked_fill(~allowed, torch.finfo(raw.dtype).min), dim=-1, dtype=torch.float32)
print(f"score spread (std over allowed pairs): {raw[..., allowed].std():.2f} without 1/√D, "
      f"{(raw * D ** -0.5)[..., allowed].std():.2f} with it (√D = {D ** 0.5:g}){SYNTHETIC}")
print(f"mean largest probability of a row from token 4 on: {unscaled[..., 4:, :].amax(-1).mean():.2f} without the "
      f"scale, {probs[..., 4:, :].amax(-1).mean():.2f} with it{SYNTHETIC}")

# %% [markdown]
# The probabilities of a few heads, tokens as labels. On the synthetic checkpoint the weights are random, so these
# maps show the causal triangle and nothing about language; run the chapter with `--model Qwen/Qwen3.5-0.8B` to see
# what trained heads attend to.

# %%
picks = sorted({0, 1, H // 2, H - 1})
book.show("ch06-maps", ch06.attention_maps, probs[0].cpu(), tokens, picks,
          f"Attention of layer {layer}'s heads on one sentence, earlier layers skipped{SYNTHETIC}")

# %% [markdown]
# ## 6. The output gate
# Each head's output is multiplied, dimension by dimension, by sigmoid(gate): a number between 0 and 1 computed from
# the token itself. A head can shut (gate ≪ 0) when it has nothing useful to add. The Qwen team's study of this gate
# (Qiu et al., 2025, "Gated Attention for Large Language Models") reports that it adds a non-linearity between the
# value and output projections, makes the output sparse, and mitigates the "attention sink" (heads dumping most of
# their weight on the first token): the sink is much weaker with the gate, not gone. The steps above, put
# together, are the module.

# %%
gated = heads.transpose(1, 2).reshape(1, T, H * D) * torch.sigmoid(gate.reshape(1, T, H * D))
y = attn.o_proj(gated)  # (1, T, d)
print(f"the steps by hand vs GatedAttention: max |diff| = {(y - attn(x, cos, sin)).abs().max():.1e}")
s = torch.sigmoid(gate)
print(f"sigmoid(gate) on this sentence: mean {s.mean():.2f}, {(s < 0.1).float().mean():.0%} below 0.1, "
      f"{(s > 0.9).float().mean():.0%} above 0.9{SYNTHETIC}")

# %%
book.show("ch06-gate", ch06.gate_distribution, gate.reshape(T, H * D).cpu(), H,
          f"The output gate of layer {layer} on one sentence{SYNTHETIC}")

# %% [markdown]
# On random weights the gate sits around 0.5 with a spread set by how the synthetic weights were drawn: a finding
# about the real model needs the real weights.
#
# ## 7. The KV cache
# Generating text adds one token at a time, and each new token's query needs the keys and values of all earlier
# tokens. They never change, because the model is causal: token s's key and value depend only on tokens 0…s (every
# mixer before this layer looks only backwards), and its position s is fixed, so its rotation is too. Tokens added
# later cannot change them, and recomputing them for every new token would be wasted work. The KV cache keeps
# them: keys **after k_norm and RoPE**, exactly as attention uses them, and values, each (B, Hkv, S, D), growing
# along S.
#
# **Try it first:** exercise 209 asks for one attention step that reads a cache and returns it grown
# (`python practice/judge.py start 209`, or the cell below in the notebook).


# %%
def attention_step(x: torch.Tensor, weights: dict, cos: torch.Tensor, sin: torch.Tensor, cache_k: torch.Tensor,
                   cache_v: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-6) -> tuple:
    raise NotImplementedError  # your code here


book.attempt(209, attention_step)

# %% [markdown]
# `KVCache.update` appends along S and returns everything stored; `GatedAttention.forward` places new token i at
# position `cache.length + i` in the causal mask. The rule that defines a correct cache: the sentence processed in
# pieces — a prompt, then one token at a time — gives what it gives processed at once. A first piece shorter than
# the next works too.

# %%
whole = attn(x, cos, sin)
cache, outs, start = KVCache(), [], 0
for n in [2, 5] + [1] * (T - 7):
    end = start + n
    outs.append(attn(x[:, start:end], cos[:, start:end], sin[:, start:end], cache=cache))
    print(f"   {n} new token{'s' if n > 1 else ' '} -> cache keys {tuple(cache.k.shape)}, "
          f"values {tuple(cache.v.shape)}")
    start = end
print(f"in pieces vs at once: max |diff| = {(torch.cat(outs, 1) - whole).abs().max():.1e} (fp32 rounding); "
      f"cached keys vs the keys after k_norm and RoPE above: max |diff| = {(cache.k - kr).abs().max():.1e}")

# %% [markdown]
# A continuation projects only its new tokens: the step above multiplied one row of x by `q_proj`, `k_proj` and
# `v_proj`, whatever the length of the cache. Attention itself still reads every cached key, so each step costs time
# and memory in proportion to the context. How much memory: 2 (K and V) × Hkv × D values per token in each
# full-attention layer, 2 bytes each in bf16.

# %%
per_token = cache_bytes(cfg, 1)[0]  # bf16, as the checkpoint stores it
print(f"this checkpoint: {len(full)} full layers × 2 × {Hkv} × {D} × 2 bytes = {per_token:,} bytes per token")
for name, c in SIZES.items():
    per = cache_bytes(c, 1)[0]
    print(f"Qwen3.5-{name:4s}: {per:7,} bytes per token; {per * 32768 / 2 ** 30:5.2f} GiB at 32,768 tokens, "
          f"{per * 262144 / 2 ** 30:5.1f} GiB at 262,144; with full attention in all "
          f"{c.num_hidden_layers} layers: {all_attention_bytes(c, 262144) / 2 ** 30:5.1f} GiB")
deltanet = cache_bytes(real, 0)[1]  # fp32 states + bf16 conv inputs, none of it growing
print(f"{REAL}'s {real.layer_types.count('linear_attention')} DeltaNet layers keep {deltanet / 2 ** 20:.1f} MiB of "
      f"state at any length (chapter 7); the other sizes: " + ", ".join(
          f"{name} {cache_bytes(c, 0)[1] / 2 ** 20:.1f} MiB" for name, c in SIZES.items()
          if name != "0.8B"))

# %% [markdown]
# The sizes come from public copies of each model's config (the course cannot reach the hub to check them; the
# sources are listed in `qwen/family.py`). Every size puts full attention in one layer of four, so its cache is a
# quarter of what an all-attention model of the same shape would need; the DeltaNet layers keep a state that does
# not grow (dashed, one line per size).

# %%
book.show("ch06-kv-bytes", ch06.kv_cache_bytes, SIZES, 262_144)

# %% [markdown]
# ### Appending without copying
# The obvious way to grow the cache, `torch.cat((k_old, k_new), dim=2)`, makes a new tensor and copies every stored
# key into it: on every token, the whole cache. At 32k tokens that is 64 MiB per full-attention layer in the real
# 0.8B, more bytes per step than the layer's weights. `KVCache` writes the new rows into buffers that have room to
# spare and keeps a `length`; only a full buffer is moved to a larger one, a quarter larger each time, so a row is
# copied about four times in total however long the text grows. One layer of the real 0.8B, bf16, one new token:


# %%
def append_ms(S, how, repeats=5):
    """Median milliseconds to append one token's key and value to a layer holding S tokens (the real 0.8B's
    Hkv × D, bf16), by torch.cat or by KVCache.update."""
    old = torch.zeros(1, real.num_key_value_heads, S, real.head_dim, dtype=torch.bfloat16)
    new = torch.ones(1, real.num_key_value_heads, 1, real.head_dim, dtype=torch.bfloat16)
    cache = KVCache()
    cache.update(old, old)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        if how == "cat":
            torch.cat((old, new), dim=2), torch.cat((old, new), dim=2)  # a new K and a new V: everything copied
        else:
            cache.update(new, new)  # one row written into each buffer
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[repeats // 2]


full_layers = real.layer_types.count("full_attention")
for S in (1024, 8192, 32768):
    cat, update = append_ms(S, "cat"), append_ms(S, "update")
    print(f"   {S:6,} tokens cached: torch.cat {cat:.3f} ms, KVCache.update {update:.3f} ms per layer; "
          f"× {full_layers} layers: {full_layers * cat:.2f} ms against {full_layers * update:.2f} ms per token")

# %% [markdown]
# The copy grows with the text; the write does not (timings on a shared machine vary from run to run; the growth
# does not). Reading the cache still grows with the text: 12 KiB per token over the six layers, about 384 MiB at
# 32k beside 1.5 GB of bf16 weights, so a decode step at 32k should cost about a quarter more than at 1k, not
# several times more. `bench/bench_model.py --contexts 1024 8192 32768` measures it on the whole model.

# %% [markdown]
# ## 8. A faster path, proven equal
# PyTorch's fused `F.scaled_dot_product_attention` computes the same function (on GPUs with flash or
# memory-efficient kernels that never store the T × S matrix). It is a different order of operations, so it agrees
# to rounding, not bit for bit: in bf16 it can be one grid step away from the written-out version that transformers'
# eager path and this course use.

# %%
fused = F.scaled_dot_product_attention(qr, kx, vx, is_causal=True)
print(f"F.scaled_dot_product_attention vs the written-out attention: max |diff| = {(fused - heads).abs().max():.1e}")

# %% [markdown]
# ## Try this
#
# - Load `q_proj` as [all queries | all gates] (view (1, T, 2, H, D) and split on dim 2) and run the layer: how far
#   does the output move? Nothing errors: every shape still fits, which is why this bug survives.
# - Replace `repeat_interleave` by `repeat` for the keys and values: with H = 8 and Hkv = 2 (the real 0.8B), which
#   query heads now read a different K/V head?
# - Decode with the cache, but feed the RoPE tables of positions 0..n−1 again for the new tokens instead of their
#   real positions: the output changes though every weight is the same. Which part of the cache is now wrong?
#
# ## Show the proof
# The sentence through transformers' `Qwen3_5Attention` (eager) of the same layer, with its own RoPE tables and
# causal mask: the same operations in the same order, so the outputs agree exactly in fp32 and in bf16.


# %%
def compare(transformers, path):
    from transformers.masking_utils import create_causal_mask
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention, Qwen3_5TextRotaryEmbedding

    text = transformers.AutoConfig.from_pretrained(path).text_config
    text._attn_implementation = "eager"
    theirs = Qwen3_5Attention(text, layer_idx=layer)
    theirs.load_state_dict({n: W[prefix + n] for n in theirs.state_dict()})
    ours = fill(GatedAttention(cfg), W, prefix)
    for dtype in (torch.float32, torch.bfloat16):
        xs, ours, theirs = x.cpu().to(dtype), ours.to(dtype), theirs.to(dtype)
        hf_tables = Qwen3_5TextRotaryEmbedding(text)(xs, positions.cpu())
        mask = create_causal_mask(config=text, inputs_embeds=xs, attention_mask=None, cache=None)
        book.oracle.difference(f"gated attention, {dtype}", ours(xs, *rope(positions.cpu(), dtype)),
                               theirs(xs, hf_tables, mask)[0])


book.proof(compare, args.path)

# %% [markdown]
# ## Summary
#
# - Full attention is every fourth layer: 6 of 24 in the 0.8B. `q_proj` makes a query and a gate per head,
#   interleaved per head; `k_proj` and `v_proj` make Hkv heads, each shared by H/Hkv consecutive query heads.
# - q_norm and k_norm (zero-centred RMSNorm over D) come before RoPE, which rotates the first R = D/4 dims.
# - scores = q·kᵀ/√D, the causal and padding mask (the most negative float, so a padding row stays finite), softmax
#   in fp32, weighted sum of the values; then sigmoid(gate) per dimension, then `o_proj`.
# - The KV cache stores keys after norm and RoPE and the values: a prompt in pieces equals the prompt at once. It
#   grows by 2·Hkv·D values per token per full-attention layer: 12 KiB per token in bf16 for the 0.8B, 3 GiB at
#   262,144 tokens.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | x (after input_layernorm) | (B, T, d) | (B, T, 1024) |
# | q_proj(x) → query, gate | (B, T, H, 2D) → 2 × (B, T, H, D) | (B, T, 8, 512) → 2 × (B, T, 8, 256) |
# | k_proj(x), v_proj(x) | (B, T, Hkv, D) | (B, T, 2, 256) |
# | q, k after norm and RoPE, heads first | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | cached keys / values (S = cached + new) | (B, Hkv, S, D) | (B, 2, S, 256) |
# | scores, probabilities | (B, H, T, S) | (B, 8, T, S) |
# | heads' output, times sigmoid(gate) | (B, T, H·D) | (B, T, 2048) |
# | o_proj(…) | (B, T, d) | (B, T, 1024) |

# %%
book.notation(args.path)

# %% [markdown]
# ### Exercises
# 208 · the attention and the gated layer, with hints for the usual mistakes ([all queries | all gates], no sigmoid,
# the gate after o_proj, norm after RoPE, softmax in bf16, `repeat` for `repeat_interleave`, no 1/√D, the mask off
# by one). 209 · the KV cache: a cached continuation must equal the whole sequence processed at once.

# %%
book.attempt(208)
book.attempt(209)

# %% [markdown]
# ## How to explain it
#
# 1. **The core.** softmax(QKᵀ/√D + mask)·V per head: each token's query scores every earlier token's key, the
#    scores become weights, the output is the weighted average of the values. The √D keeps the scores' spread
#    independent of the head size (for roughly independent, unit-variance entries); the causal mask hides the
#    future; the softmax runs in fp32.
# 2. **What Qwen3.5 changes.** QK-norm (RMSNorm of q and k per head, before RoPE) bounds the logits and stabilises
#    training; partial RoPE (a quarter of each head's dims rotate); GQA (8 query heads share 2 K/V heads in the 0.8B),
#    which cuts the KV cache by H/Hkv; and an output gate, sigmoid of a second projection of the input, applied per
#    dimension before o_proj — a head can switch itself off, and the Qwen team reports that it mitigates the
#    attention sink.
# 3. **The cache.** Decoding reuses every past key and value, stored after norm and RoPE — valid because the model
#    is causal (a token's key and value depend only on the tokens up to it) — so each step projects only the new
#    token; the cost is memory that grows with the context — 2·Hkv·D·2 bytes per token per attention layer.
#    Qwen3.5 keeps it small by putting full attention in only a quarter of its layers; the other three quarters
#    are linear attention with a fixed-size state (chapter 7).
#
# ## Files
#
# ```
# qwen/
# ├── weights.py           (chapter 1)
# ├── tokenizer.py         (chapter 2)
# ├── embedding.py         (chapter 2)
# ├── norm.py              (chapter 3)
# ├── rope.py              (chapter 4)
# ├── mlp.py               (chapter 5)
# ├── attention.py         + GatedAttention, KVCache, attention, causal_mask
# └── family.py            + the dense Qwen3.5 sizes and the arithmetic of their cache
# book/
# └── ch06.py              + this chapter's figures
# chapters/
# └── ch06_attention.py    + this chapter's script
# notebooks/
# └── ch06_attention.ipynb + this notebook, written from the script
# practice/
# ├── 208_gated_attention/ + exercise 208
# └── 209_kv_cache/        + exercise 209
#
# + new in this chapter · unmarked: from an earlier chapter
# ```
