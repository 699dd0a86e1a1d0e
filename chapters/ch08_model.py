"""Chapter 8: the whole model — decoder layers, the hybrid stack, next-token prediction, and a look inside.

Run: python chapters/ch08_model.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch08_model.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 8 · The whole model
#
# Every part is written: the embedding (chapter 2), the norms (3), RoPE and the MLP (4, 5), gated attention (6)
# and Gated DeltaNet (7). This chapter stacks them into the Qwen3.5 text model, loads a checkpoint into it,
# predicts the next token of a prompt, and then looks inside: how big the residual stream gets, what the model
# would predict if it stopped after layer i (the logit lens), and where the parameters and the time go.
#
# ```
# qwen/
# └── model.py            + DecoderLayer, the stack (Qwen35), Cache, load_model
# book/
# ├── ch08.py             + this chapter's figures
# └── diff.py             + python -m book.diff: module-by-module comparison with transformers
# chapters/
# └── ch08_model.py       + this chapter's script
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %%
import time

import torch

import book
from book import ch08
from qwen.config import Config
from qwen.course import chapter_args
from qwen.model import load_model
from qwen.sizes import real_config
from qwen.synthetic import is_synthetic
from qwen.tokenizer import Tokenizer

torch.manual_seed(0)
args = chapter_args(__doc__)
synthetic = is_synthetic(args.path)
NOTE = " (synthetic weights: random, so the tokens mean nothing)" if synthetic else ""
SYN = " (synthetic weights)" if synthetic else ""

# %%
book.show("ch08-map", book.model_map.draw, "model")

# %% [markdown]
# ## 1. A decoder layer, and the stack
#
# Each layer (24 in the 0.8B, numbered 0 to 23 as in the checkpoint's keys) does two things, each behind its own
# RMSNorm and each added to the residual stream x:
#
# - h = x + Mixer(RMSNorm(x)) — the mixer is the only place where tokens see each other: Gated DeltaNet on
#   "linear_attention" layers, gated attention on "full_attention" layers (`layer_types` in the config);
# - out = h + MLP(RMSNorm(h)) — each token alone.
#
# This is *pre-norm*: the norm sits on the branch, never on the stream itself, so x is a running sum of every
# layer's writes. After the last layer one more RMSNorm (`norm`) and the head (`lm_head`, tied to the embedding in
# the 0.8B) turn each position's vector into 248,320 scores, one per token. No embedding scale, no logit cap.
#
# The pattern of mixers is the heart of Qwen3.5: three linear-attention layers, then one full-attention layer.

# %%
book.show("ch08-pattern", ch08.pattern_figure, Config.load(args.path).layer_types)

# %% [markdown]
# **Try it first:** exercise 213 asks for the decoder layer and the stack, with the mixers and the MLP given
# (`python practice/judge.py start 213`, or replace the stubs below and run the cell: the judge grades it here).

# %%
def decoder_layer(x, p, kind, eps):
    raise NotImplementedError  # your code: pre-norm mixer and MLP, each added to x


def hybrid_stack(x, layers, layer_types, final_norm, eps):
    raise NotImplementedError  # your code: every layer in order, then the final norm


book.attempt(213, decoder_layer, hybrid_stack)

# %% [markdown]
# The course's model: `qwen/model.py`. `load_model` builds it on PyTorch's "meta" device (shapes, no memory), then
# makes each parameter the tensor read from the checkpoint, in the dtype asked for: nothing is initialised and then
# overwritten, and in bf16 the weights are never held twice (a 0.8B-shaped checkpoint peaks at 1.04× its file
# size, `python bench/load_memory.py`). The loader is chapter 1's `fill`, the one every part of the model goes
# through.

# %%
book.listing("qwen/model.py")

# %% [markdown]
# ## 2. Predict the next token
# One forward pass gives a score for every token at every position; the last position's scores, through a
# softmax, are the distribution of the next token.

# %%
started = time.perf_counter()
model = load_model(args.path, device=args.device)
print(f"loaded {sum(p.numel() for p in model.parameters()):,} parameters in {model.embed_tokens.weight.dtype} "
      f"on {args.device} in {(time.perf_counter() - started) * 1000:.0f} ms")
tok = Tokenizer(args.path)
prompt = "The capital of France is Paris. The capital of Japan is"
ids = torch.tensor([tok.encode(prompt)], device=args.device)
with torch.no_grad():
    logits = model(ids)  # (1, T, V)
probs = logits[0, -1].float().softmax(-1)
top = probs.topk(5)
print(f"prompt: {prompt!r} ({ids.shape[1]} tokens); next token{NOTE}:")
for p, i in zip(top.values.tolist(), top.indices.tolist()):
    print(f"   p = {p:.3g}  {tok.decode([i])!r}")
print(f"   (a uniform guess over the {probs.numel():,} rows would give each token {1 / probs.numel():.2g})")

# %% [markdown]
# ## 3. Look inside: the residual stream and the logit lens
# Run the layers by hand and keep x after each one. Its size (root mean square) shows how much each layer writes.
# Then apply the final norm and the head to each intermediate x: the **logit lens** asks what the model would
# predict if it stopped there. With a real checkpoint, watch at which depth the actual next token climbs to the top
# ranks; with random weights there is nothing to find. Below, "after layer i" is the output of `layers.i` (numbered
# from 0, as in the checkpoint), and "the embedding" is x before any layer.

# %%
with torch.no_grad():
    x = model.embed_tokens(ids)
    T = ids.shape[1]
    cos, sin = model.rotary(torch.arange(T, device=ids.device)[None], x.dtype)
    stream = [x]
    for layer in model.layers:
        x = layer(x, cos, sin)
        stream.append(x)
    rms = torch.stack([s[0].float().pow(2).mean(-1).sqrt() for s in stream]).cpu()  # (layers + 1, T)
    lens = torch.stack([model.lm_head(model.norm(s))[0] for s in stream])  # (layers + 1, T, V)
targets = ids[0, 1:]  # the token that actually follows each position
ranks = (lens[:, :-1].float() > lens[:, :-1].float().gather(-1, targets.expand(len(stream), -1)[..., None])).sum(-1)
L = len(model.layers)
mid = L // 2 - 1  # the layer half-way down: stream[i + 1] is the output of layer i, stream[0] the embedding
print(f"residual stream RMS{SYN}: after the embedding {rms[0].mean():.3g}, "
      f"after layer {mid} {rms[mid + 1].mean():.3g}, "
      f"after layer {L - 1} (the last) {rms[-1].mean():.3g}")
print(f"logit lens, top-1 at the last position{SYN}:")
for i in [-1] + [i for i in range(L) if i % 4 == 3 or i == L - 1]:  # the embedding, then each 4th layer and the last
    name = "the embedding" if i < 0 else f"layer {i:2d}"
    print(f"   after {name:13s}: {tok.decode([lens[i + 1, -1].argmax().item()])!r}")
tied = model.lm_head.weight is model.embed_tokens.weight
echo = int((lens[0].argmax(-1) == ids[0]).sum())
print(f"logit lens at the embedding: the top-1 is the input token itself at {echo} of {T} positions"
      + (" (the head is the embedding table, tied: norm(E[t]) is most aligned with its own row E[t])" if tied
         else ""))

# %% [markdown]
# The lens's first row reads the embedding itself. The head of the 0.8B is the embedding table (tied), so there each
# position's scores are those of its own row against every row, and its own row tends to win (the count above
# measures how often): the embedding "predicts" the input token, not the next one. That row says
# nothing about what the layers learn; the rows above it do.

# %%
book.show("ch08-residual", ch08.residual_figure, rms.numpy(), model.cfg.layer_types, synthetic)

# %%
labels = [tok.decode([t]) for t in targets.tolist()]
book.show("ch08-lens", ch08.lens_figure, ranks.cpu().numpy(), labels, synthetic)

# %% [markdown]
# ## 4. Where the parameters and the time go
# Parameters are counted per component; time is measured with forward hooks around each module on one pass over
# the prompt (one run on a shared machine: read the shares in the figure, not the milliseconds). Measured time says
# what this checkpoint costs at its own widths: on the synthetic one (d = 64 instead of 1024) the small DeltaNet
# operations weigh far more than at the real shapes. So the third row counts the work at the real 0.8B's shapes:
# the FLOPs of the same forward pass (`book.ch08.flops_by_component`: torch's FLOP counter around the course's own
# modules run on the meta device, shapes only; matrix products and the conv, elementwise work left out). A count is
# not a timing, but at these widths the matrix products are most of the time.

# %%
def component(name):
    if name.startswith("embed_tokens") or name.startswith("lm_head"):
        return "embedding + head"
    if ".linear_attn." in name:
        return "DeltaNet mixers"
    if ".self_attn." in name:
        return "attention mixers"
    if ".mlp." in name:
        return "MLPs"
    return "norms"


params = {}
for name, p in model.named_parameters():  # a tied head is counted once, with the embedding
    params[component(name)] = params.get(component(name), 0) + p.numel()
seconds, started_at = {}, {}


def before(module, _):
    started_at[module] = time.perf_counter()


def after(module, _, __, name=None):
    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started_at[module]


hooks = []
for name, m in model.named_modules():
    if name in ("embed_tokens", "lm_head", "norm") or name.endswith(("linear_attn", "self_attn", ".mlp",
                                                                      "layernorm")):
        hooks.append(m.register_forward_pre_hook(before))
        which = component(name + ".")
        hooks.append(m.register_forward_hook(lambda mod, a, o, n=which: after(mod, a, o, n)))
with torch.no_grad():
    model(ids)
for h in hooks:
    h.remove()
total = sum(params.values())
print(f"parameters and forward time by component{SYN}:")
for part in params:
    print(f"   {part:18s} {params[part]:>13,} parameters ({params[part] / total:5.1%}), "
          f"{seconds.get(part, 0) * 1000:.1f} ms")
print("   (real Qwen3.5-0.8B: 752,393,024 text parameters; MLPs 35.1%, embedding 33.8%)")
shape_cfg = real_config() if synthetic else model.cfg
flops = ch08.flops_by_component(shape_cfg, T)
where = "real Qwen3.5-0.8B shapes" if synthetic else "this checkpoint's shapes"
print(f"FLOPs of one pass over these {T} tokens at the {where} (a count, not a timing): " + ", ".join(
    f"{part} {n / 1e9:.2f} G ({n / sum(flops.values()):.0%})" for part, n in flops.items() if n))

# %%
book.show("ch08-shares", ch08.share_figure, {"parameters": params, f"time{SYN}": seconds,
                                             f"FLOPs, {where}": flops}, synthetic)

# %% [markdown]
# ## 5. With a cache
# Generation feeds one token at a time. `model.new_cache()` holds, per layer, what the next call needs: keys and
# values for the attention layers (6 in the 0.8B; growing with the text) and a conv window plus a (Hv, dk, dv) state
# for the DeltaNet layers (18; fixed size). A prefill then one token gives the same scores as one pass over
# everything, up to rounding: the two orders of work round differently. Measured on random weights at the real
# 0.8B shapes (logits up to about 3, prompts of 12 to 50 tokens): up to 2.4e-5 in fp32, and up to 0.10 in bf16,
# where every layer's output is rounded to 8 significant bits — about 6 bf16 steps of the largest logit (one step
# is 0.016 there).

# %%
with torch.no_grad():
    cache = model.new_cache()
    model(ids[:, :-1], cache=cache)
    last = model(ids[:, -1:], cache=cache)
scale = logits[0, -1].float().abs().max()
print(f"prefill {T - 1} tokens, then 1 with the cache, in {logits.dtype}: max |diff| to the full pass = "
      f"{(last[0, -1].float() - logits[0, -1].float()).abs().max():.2g} (largest logit {scale:.2g}){SYN}; "
      f"cache.length = {cache.length}")

# %% [markdown]
# ## Try this
#
# - Change the prompt and watch the logit lens: with a real checkpoint, at which depth does the right answer take
#   over? With the synthetic one, does any position ever rank its next token first?
# - Skip the last full-attention layer (`model.layers[23]` in the 0.8B) in the loop of section 3: how much does the
#   final prediction change, compared with skipping a DeltaNet layer (`model.layers[22]`)?
# - Load with `dtype=torch.float32` and compare the top-5 probabilities with bf16.
# - Put your own part in the model: after solving an exercise of chapters 3–7, run
#   `from practice.plugin import plug_in; plug_in(204, rms_norm, gated_rms_norm, l2norm)` in a cell (or
#   `python practice/judge.py 204 --plug-in`): the top-5 with the course's part and with yours, side by side.
#
# ## Show the proof
# `python -m book.diff --model ...` compares every module with transformers on one prompt. Here: the logits.

# %%
def compare(transformers, path, ids):
    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    theirs = transformers.Qwen3_5ForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager").eval()
    ours = load_model(path, dtype=torch.float32)
    with torch.no_grad():
        book.oracle.difference("fp32 logits of the prompt", ours(ids.cpu()), theirs(ids.cpu()).logits)
    print("(fp32: rounding only; every module alone agrees to 1e-6 of its scale, see python -m book.diff)")


book.proof(compare, args.path, ids)

# %% [markdown]
# ## Summary
#
# - A Qwen3.5 decoder layer is pre-norm: x + Mixer(norm(x)), then + MLP(norm(·)). The mixer is Gated DeltaNet in
#   three layers of four and gated attention in the fourth ([L, L, L, F] × 6 in the 0.8B).
# - The model: embedding (no scale) → 24 layers → final RMSNorm → head (tied in the 0.8B) → logits, no cap.
# - `load_model` builds on the meta device and fills each parameter from safetensors in the target dtype.
# - A cache makes generation incremental; its DeltaNet part does not grow with the text.
#
# Shapes recap: ids (B, T) → x (B, T, d) through every layer → logits (B, T, V); attention caches (B, Hkv, S, D)
# per full layer; DeltaNet caches a (B, C, K−1) conv window and a (B, Hv, dk, dv) fp32 state.

# %%
book.notation(args.path)

# %% [markdown]
# Exercise: **213** the decoder layer and the hybrid stack (`python practice/judge.py 213`).
#
# ## How to explain it
#
# 1. **The residual stream.** Every layer reads a normalised copy of x and adds its result back; x itself is never
#    normalised until the end. So the model is a sum of contributions, and the logit lens can read it at any depth.
# 2. **Why hybrid.** Full attention looks back at every token but its cache grows with the text; Gated DeltaNet
#    keeps a fixed-size state. Three of four layers use the cheap one; one of four keeps every past key and value, so
#    it can still look up any earlier token.
# 3. **Where the cost is.** In the 0.8B the MLPs (35%) and the embedding (34%) hold two thirds of the parameters.
#    Time depends on the code, the device and the widths, so measure it (section 4) at the shapes that matter: at
#    the real 0.8B shapes a short prompt's FLOPs split roughly in thirds between the head, the DeltaNet mixers and
#    the MLPs, with about 5% in attention; on the narrow synthetic checkpoint the measured time is dominated by
#    the DeltaNet mixers' many small operations instead.
