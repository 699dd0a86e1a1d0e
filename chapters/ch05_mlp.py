"""Chapter 5: the SwiGLU MLP — down(silu(gate(x)) ⊙ up(x)).

Run: python chapters/ch05_mlp.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch05_mlp.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 5 · The SwiGLU MLP
#
# Every decoder layer (24 in the 0.8B) ends with an MLP: after the mixer has moved information between tokens, the
# MLP works on each token on its own. It widens the vector from d to I, lets a **gate** decide how much of each
# hidden unit passes, and projects back to d. Outside the embedding it holds most of the weights (264M of 498M in
# the 0.8B). This chapter writes `qwen/mlp.py` and runs one layer's MLP on a sentence.

# %%
import torch
import torch.nn.functional as F

import book
from book import ch05
from qwen.config import Config
from qwen.course import chapter_args
from qwen.mlp import MLP
from qwen.norm import RMSNorm
from qwen.sizes import REAL_NAME, real_config
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.weights import fill, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)  # lazy: only the tensors this chapter asks for are read
real = real_config()
dev, d, I = args.device, cfg.hidden_size, cfg.intermediate_size
SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""
torch.manual_seed(0)

# %% [markdown]
# Where it sits: after `post_attention_layernorm`, in every layer, linear-attention and full-attention alike.

# %%
book.show("ch05-map", book.model_map.draw, "mlp")

# %% [markdown]
# ## 1. Three matrices
# `gate_proj` and `up_proj` are (I, d), `down_proj` is (d, I), with no biases. In the real 0.8B, d = 1024 and
# I = 3584 (3.5 d): 3 · 1024 · 3584 = 11.0M weights per layer, 264M over 24 layers — more than the embedding's
# 254M and more than all mixers together. The classic MLP of the same d, relu with a width of 4 d, has two matrices:
# 2 · d · 4d = 8 d² against SwiGLU's 3 · d · 3.5d = 10.5 d², so Qwen3.5's MLP is 31 % larger than it.

# %%
for name, c in (("this checkpoint", cfg), (REAL_NAME, real)):
    per_layer = 3 * c.hidden_size * c.intermediate_size
    print(f"{name:20s} d = {c.hidden_size:5,}, I = {c.intermediate_size:6,} "
          f"({c.intermediate_size / c.hidden_size:.2f} d): "
          f"{per_layer / 1e6:7.3f}M weights per MLP, {per_layer * c.num_hidden_layers / 1e6:8.2f}M in "
          f"{c.num_hidden_layers} layers")
relu_4d = 2 * real.hidden_size * 4 * real.hidden_size
print(f"{REAL_NAME}: a 4d relu MLP would have {relu_4d / 1e6:.3f}M weights; SwiGLU at "
      f"{real.intermediate_size / real.hidden_size:.1f} d has "
      f"{3 * real.hidden_size * real.intermediate_size / relu_4d - 1:.0%} more")
for name in ("gate_proj", "up_proj", "down_proj"):
    t = W[f"layers.0.mlp.{name}.weight"]
    print(f"layers.0.mlp.{name}.weight: {tuple(t.shape)} {t.dtype}")

# %% [markdown]
# ## 2. The gate: silu
# The classic transformer MLP is down(relu(up(x))). SwiGLU (Shazeer, 2020) splits the widening in two: one
# projection goes through silu(z) = z · sigmoid(z) and multiplies the other, unit by unit. silu is smooth, lets a
# little through below zero (its minimum is −0.278 at z ≈ −1.28), and is ≈ z for large z.
#
# Check by hand: sigmoid(1) = 1 / (1 + e⁻¹) = 0.7311, so silu(1) = 0.7311 and silu(−1) = −0.2689.

# %%
z = torch.tensor([-6.0, -1.2785, -1.0, 0.0, 1.0, 6.0])
print("z        :", [f"{v:+.4f}" for v in z.tolist()])
print("silu(z)  :", [f"{v:+.4f}" for v in F.silu(z).tolist()])
print("relu(z)  :", [f"{v:+.4f}" for v in F.relu(z).tolist()])

# %%
book.show("ch05-activations", ch05.activations)

# %% [markdown]
# ## 3. Write it
# **Try it first:** exercise 207 asks for silu and the whole MLP from its three weight matrices. Start it with
# `python practice/judge.py start 207`, or write the two functions in the cell below (in the notebook) and run it:
# the judge grades them.


# %%
def silu(z: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


def swiglu_mlp(x: torch.Tensor, gate_weight: torch.Tensor, up_weight: torch.Tensor,
               down_weight: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(207, silu, swiglu_mlp)

# %% [markdown]
# ### The finished module: `qwen/mlp.py`

# %%
book.listing("qwen/mlp.py")

# %% [markdown]
# One line of math: `down_proj(silu(gate_proj(x)) * up_proj(x))`. The names are the checkpoint's, so loading a
# layer's MLP is a plain copy of three tensors. Check it on one token by hand: the MLP's output equals the sum over
# hidden units of silu(gate_u · x) · (up_u · x) times column u of down_proj.

# %%
mlp = fill(MLP(cfg), W, "layers.0.mlp.").to(dev)
x = torch.randn(1, 1, d, device=dev)
gw, uw, dw = (getattr(mlp, n).weight for n in ("gate_proj", "up_proj", "down_proj"))
by_units = sum(F.silu(gw[u] @ x[0, 0]) * (uw[u] @ x[0, 0]) * dw[:, u] for u in range(I))
with torch.no_grad():
    y = mlp(x)
print(f"layer 0 MLP on one random vector: output {tuple(y.shape)}; unit-by-unit sum differs by "
      f"{(y[0, 0] - by_units).abs().max():.1e} (fp32 rounding)")

# %% [markdown]
# ## 4. Each token on its own
# The MLP never mixes positions: changing one token's input changes only that token's output.

# %%
xs = torch.randn(1, 5, d, device=dev)
changed = xs.clone()
changed[0, 2] += 1.0
with torch.no_grad():
    moved = (mlp(changed) - mlp(xs)).abs().amax(-1)[0]
print("largest change of each output after changing token 2's input:", [f"{v:.2g}" for v in moved.tolist()])

# %% [markdown]
# ## 5. The gate on a sentence
# A sentence, embedded and normalised by layer 0's `post_attention_layernorm`, through layer 0's MLP. The mixer is
# skipped here (chapter 8 runs the whole layer), so this is the MLP's response to the embeddings alone. For each
# token: how many hidden units pass almost nothing to down_proj (|silu(z) · up| below 1 % of that token's largest).
# That is a small product, not a shut gate: either factor can be the small one, and many such units have an open
# gate (z > 0); the count of those is printed too.

# %%
tok = load_tokenizer(args.path)
sentence = "The capital of France is Paris, and the capital of Japan is Tokyo."
ids = torch.tensor([tok.encode(sentence)], device=dev)
emb = W["embed_tokens.weight"][ids[0].cpu()].to(dev).float()[None]  # (1, T, d): only this sentence's rows
h = fill(RMSNorm(d, cfg.rms_norm_eps), W, "layers.0.post_attention_layernorm.").to(dev)(emb)
with torch.no_grad():
    gate, up = mlp.gate_proj(h)[0], mlp.up_proj(h)[0]  # (T, I) each
act = F.silu(gate) * up
tiny = act.abs() < 0.01 * act.abs().amax(-1, keepdim=True)  # (T, I): passes almost nothing
small = tiny.float().mean(-1)
tokens = [tok.decode([i]) for i in ids[0].tolist()]
print(f"{len(tokens)} tokens, {I:,} units{SYNTHETIC}")
print(f"gate z < 0 (there |silu(z)| ≤ 0.28): {(gate < 0).float().mean():.0%} of (token, unit) pairs; passing almost "
      f"nothing, per token: {[f'{v:.0%}' for v in small.tolist()]}")
print(f"of the {int(tiny.sum())} (token, unit) pairs that pass almost nothing, {int((tiny & (gate > 0)).sum())} "
      f"have an open gate (z > 0): a small product, not a shut gate{SYNTHETIC}")

# %%
book.show("ch05-gates", ch05.gate_activations, gate.cpu(), up.cpu(), tokens,
          f"Layer 0's MLP on one sentence, mixer skipped{SYNTHETIC}")

# %% [markdown]
# On the synthetic checkpoint the weights are random, so these shares say nothing about the real model: a random
# gate is negative about half the time by construction. Run the chapter with `--model Qwen/Qwen3.5-0.8B` to see how
# the trained gate behaves.
#
# ## Try this
#
# - Replace silu by relu in a copy of the MLP and compare the outputs on the sentence: how many units does relu
#   shut exactly, and how far do the outputs move?
# - Swap `gate_proj` and `up_proj` when loading (load one tensor into the other): the output changes, though every
#   weight is the same. Which of the two does silu see?
# - Feed the same token twice in a sentence: its two MLP outputs are identical, since the mixer is skipped here.
#
# ## Show the proof
# The same input through transformers' `Qwen3_5MLP` of this checkpoint's layer 0: the same three `F.linear`, `F.silu`
# and product in the same order, so the outputs agree to fp32 rounding in fp32 and bit for bit in bf16.


# %%
def compare(transformers, path):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5MLP

    text = transformers.AutoConfig.from_pretrained(path).text_config
    theirs = Qwen3_5MLP(text, intermediate_size=text.intermediate_size)
    theirs.load_state_dict({n: W[f"layers.0.mlp.{n}"] for n in theirs.state_dict()})
    ours = fill(MLP(cfg), W, "layers.0.mlp.")
    x = torch.randn(2, 7, d)
    with torch.no_grad():
        book.oracle.difference("MLP, fp32", ours(x), theirs(x))
        book.oracle.difference("MLP, bf16", ours.bfloat16()(x.bfloat16()), theirs.bfloat16()(x.bfloat16()))


book.proof(compare, args.path)

# %% [markdown]
# ## Summary
#
# - The MLP is down(silu(gate(x)) ⊙ up(x)): two widening projections, one through silu, multiplied unit by unit,
#   and one projection back. No biases; each token on its own.
# - In the real 0.8B it is 1024 → 3584 → 1024 in every layer: 264M weights over 24 layers, more than the
#   embedding (254M) and more than all the mixers together.
# - silu(z) = z · sigmoid(z): smooth, slightly negative below 0, ≈ z above a few units.
# - In bf16 `F.silu` rounds once; z · sigmoid(z) written out rounds twice — the reference uses `F.silu`.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | x (after post_attention_layernorm) | (B, T, d) | (B, T, 1024) |
# | gate_proj(x), up_proj(x) | (B, T, I) | (B, T, 3584) |
# | silu(gate) ⊙ up | (B, T, I) | (B, T, 3584) |
# | down_proj(…) | (B, T, d) | (B, T, 1024) |

# %%
book.notation(args.path)

# %% [markdown]
# ### Exercises
# 207 · the SwiGLU MLP, with hints for the usual mistakes (silu on the wrong branch, gate and up swapped, sigmoid in
# place of silu, x @ W for x @ Wᵀ).

# %%
book.attempt(207)

# %% [markdown]
# ## How to explain it
#
# 1. **What it is.** A gated linear unit: out = W_down (silu(W_gate x) ⊙ W_up x). Against the classic
#    W₂ relu(W₁ x) it has a third matrix; Shazeer kept the parameter count by shrinking the width from 4 d to
#    8/3 d (3 · 8/3 = 2 · 4). Qwen3.5-0.8B uses 3.5 d, so its MLP has 31 % more parameters than a 4 d relu MLP.
# 2. **Why the gate.** The product lets the network modulate each hidden unit multiplicatively by a function of the
#    input — a learned, input-dependent mask — and in Shazeer's comparisons GLU variants trained to lower
#    perplexity than relu or gelu MLPs at the same cost.
# 3. **Why silu.** Smooth (a non-zero gradient for negative inputs, unlike relu), close to the identity for large
#    inputs, and cheap. The MLP runs on each token alone, so it batches easily; at short contexts its 264M weights
#    are about a third of the 752M every token is multiplied by in the 0.8B.
#
# ## Files
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── tokenizer.py    (chapter 2)
# ├── embedding.py    (chapter 2)
# ├── norm.py         (chapter 3)
# ├── rope.py         (chapter 4)
# └── mlp.py          + MLP
# book/
# └── ch05.py         + this chapter's figures
# chapters/
# └── ch05_mlp.py     + this chapter's script
# notebooks/
# └── ch05_mlp.ipynb  + this notebook, written from the script
# practice/
# └── 207_swiglu/     + exercise 207
#
# + new in this chapter · unmarked: from an earlier chapter
# ```
