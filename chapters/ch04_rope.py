"""Chapter 4: rotary position embedding — partial, rotate-half, and Qwen3.5's interleaved M-RoPE.

Run: python chapters/ch04_rope.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch04_rope.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 4 · Rotary position embedding
#
# Attention compares a query with keys by a dot product, and a dot product cannot tell where the two tokens sit.
# Qwen3.5 tells it by **rotating** query and key: each pair of dimensions turns by an angle proportional to the
# token's position, so the score q·k ends up depending on how far apart the tokens are, and on nothing else about
# their positions. This chapter writes `qwen/rope.py`: the angle tables, the rotation, and the M-RoPE layout that
# Qwen3.5 inherited from its vision-language training — which, for text, is exactly ordinary RoPE.
#
# RoPE has no weights. Everything in this chapter follows from four numbers of the config (head_dim,
# partial_rotary_factor, rope_theta, mrope_section), so the numbers printed for the real Qwen3.5-0.8B are the real
# model's, whatever checkpoint the chapter runs on.

# %%
import math

import torch

import book
from book import ch04
from qwen.config import Config
from qwen.course import chapter_args
from qwen.rope import RotaryEmbedding
from qwen.sizes import REAL_NAME, REAL_TEXT_CONFIG, real_config

args = chapter_args(__doc__)
cfg = Config.load(args.path)  # the config is all RoPE needs: no tensor is read in this chapter
real = real_config()
dev = args.device
torch.manual_seed(0)
rope, rope_real = RotaryEmbedding(cfg), RotaryEmbedding(real)

# %% [markdown]
# Where it sits: in the full-attention layers only (6 of the 0.8B's 24), on the queries and keys after q_norm and
# k_norm (chapter 3) and before the scores (chapter 6). The linear-attention layers (chapter 7) use no position
# embedding at all.

# %%
book.show("ch04-map", book.model_map.draw, "rope")

# %% [markdown]
# ## 1. Which dims turn, and how fast
# A head has D dims, but only the first **R = D · partial_rotary_factor** of them rotate: 64 of 256 in
# Qwen3.5-0.8B (R and θ join the notation table at the end of the chapter). They form R/2 = 32 pairs, and pair j
# turns by angle p · inv_freq_j at position p, with
#
# inv_freq_j = θ^(−2j/R),  j = 0 … R/2 − 1,  θ = rope_theta = 10,000,000.
#
# Pair 0 turns by 1 radian per token (a full turn every 2π ≈ 6.3 tokens); each next pair is slower by the same
# factor θ^(2/R), down to one turn in about 38 million tokens. The other D − R dims carry no position at all.

# %%
for name, c, r in (("this checkpoint", cfg, rope), (REAL_NAME, real, rope_real)):
    lam = 2 * math.pi / r.inv_freq.double()
    print(f"{name:20s} D = {c.head_dim}, R = {r.R} ({c.head_dim - r.R} dims pass through), θ = {c.rope_theta:g}, "
          f"{r.R // 2} frequencies;\n{'':20s} wavelength of j = 0: {lam[0]:.2f} tokens, of j = {r.R // 2 - 1}: "
          f"{lam[-1]:,.0f} tokens")
lam = 2 * math.pi / rope_real.inv_freq.double()
ctx = real.max_position_embeddings
print(f"{REAL_NAME}: {int((lam > ctx).sum())} of 32 frequencies never finish a turn within its "
      f"{ctx:,}-token context; the slowest turns {2 * math.pi * ctx / lam[-1]:.3f} radians over all of it")

# %% [markdown]
# ### Check it by hand
# With θ = 1e7 and R = 64, inv_freq_1 = 1e7^(−2/64) = 10^(−7/32) ≈ 0.6043. At position 2 pair 0 has turned by 2
# radians and pair 1 by 1.2086: cos 2 = −0.4161, cos 1.2086 ≈ 0.3543. The table `RotaryEmbedding` returns holds
# exactly these, written twice (dims i and i + 32 share angle i).

# %%
cos, sin = rope_real(torch.tensor([[0, 1, 2, 100]]), torch.float32)
print(f"inv_freq_1 = {rope_real.inv_freq[1]:.4f} (by hand 10^(-7/32) = {10 ** (-7 / 32):.4f})")
for i, p in enumerate((0, 1, 2, 100)):
    print(f"position {p:3d}: cos of pairs 0, 1, 31 = {cos[0, i, 0]:+.4f} {cos[0, i, 1]:+.4f} {cos[0, i, 31]:+.4f}"
          f"   by hand cos({p}) = {math.cos(p):+.4f}, cos({p} · 0.6043) = {math.cos(p * 10 ** (-7 / 32)):+.4f}"
          f"   same angle in dim 32: {bool(cos[0, i, 0] == cos[0, i, 32])}")

# %% [markdown]
# The fast pairs wind round many times within a sentence; the slow ones barely move in a whole book. The right
# panel shows the angle itself: a dot marks where a pair completes its first turn, at its wavelength, and the
# dotted line the 262,144-token context: the slowest frequencies never finish a turn inside it.

# %%
book.show("ch04-angles", ch04.angle_vs_position, real, REAL_NAME + " config")

# %% [markdown]
# ## 2. The rotation
# Pair j is (x_j, x_{j+R/2}) — dim j with dim j + R/2, the "rotate half" pairing, not the adjacent dims (2j, 2j+1)
# of the original RoPE paper and of GPT-J. Turning it by angle a is
#
# x_j → x_j cos a − x_{j+R/2} sin a,   x_{j+R/2} → x_{j+R/2} cos a + x_j sin a,
#
# which for the whole rotated block is `x·cos + rotate_half(x)·sin` with rotate_half(x1, x2) = (−x2, x1). Both
# pairings turn each pair by its angle; they differ only in which dims form a pair. They are the same model up to a
# permutation of each head's rotated dims (j → 2j, j + R/2 → 2j + 1), applied to the rows of q_proj and k_proj —
# which is how Llama checkpoints are converted between the two layouts. So a checkpoint trained with one is wrong
# under the other unless its weights are permuted.
#
# **Try it first:** exercise 206 asks for the frequencies, the tables and the rotation. Start it with
# `python practice/judge.py start 206`, or write the three functions in the cell below (in the notebook) and run
# it: the judge grades them.


# %%
def inv_frequencies(head_dim: int, partial_rotary_factor: float, rope_theta: float) -> torch.Tensor:
    raise NotImplementedError  # your code here


def rope_tables(positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype) -> tuple:
    raise NotImplementedError  # your code here


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(206, inv_frequencies, rope_tables, apply_rope)

# %% [markdown]
# ### The finished module: `qwen/rope.py`

# %%
from qwen.rope import apply_rope, mrope_axes  # noqa: E402  (the module's, in place of the attempt above)

book.listing("qwen/rope.py")

# %% [markdown]
# - `RotaryEmbedding` holds no weights: `inv_freq` and the axis of each frequency follow from the config. They are
#   plain attributes, not buffers, so that `model.to(torch.bfloat16)` cannot round the frequencies.
# - `forward(positions, dtype)` computes the angles in fp32 and only then rounds cos and sin to the model dtype —
#   transformers does the same, and a bf16 model must, to give the same bits.
# - `apply_rope(x, cos, sin)` turns the first R dims of every head of x (B, H, T, D) and passes the rest through.
#
# A rotation keeps a vector's length. On a single pair at position 1 the turn is easy to see: (1, 0) goes to
# (cos 1, sin 1) = (0.5403, 0.8415).

# %%
x = torch.zeros(1, 1, 1, real.head_dim)
x[..., 0] = 1.0
c1, s1 = rope_real(torch.tensor([[1]]), torch.float32)
y = apply_rope(x, c1, s1)
print(f"(x_0, x_32) = (1, 0) at position 1 -> ({y[0, 0, 0, 0]:.4f}, {y[0, 0, 0, 32]:.4f}); every other dim stays 0: "
      f"{bool(y[..., 1:32].eq(0).all() and y[..., 33:].eq(0).all())}")
q = torch.randn(2, real.num_attention_heads, 50, real.head_dim, device=dev)
cos, sin = rope_real(torch.arange(0, 5000, 100, device=dev).expand(2, -1), torch.float32)
print(f"50 positions, 8 heads, batch 2: largest change of a length under rotation "
      f"{(apply_rope(q, cos, sin).norm(dim=-1) - q.norm(dim=-1)).abs().max():.1e} (fp32 rounding)")

# %% [markdown]
# ## 3. Why it works: the score sees only the distance
# Rotate q by the angles m·ω_j and k by n·ω_j. Pair j of each is a 2-vector, q_j and k_j, at an angle φ_j to each
# other before the turn; the D − R dims that do not rotate (192 in the 0.8B) form q_pass and k_pass. The score is
#
# q·k = Σ_j |q_j| |k_j| cos(φ_j + (m − n)·ω_j) + q_pass·k_pass,
#
# so only the difference m − n is left, and the unrotated part does not depend on position at all. Moving a query
# and a key together along the text changes nothing — up to fp32 rounding of the angles, which grows with the
# position (an angle near 50,000 radians is only good to about 0.004).

# %%
qv, kv = torch.randn(1, 1, 1, real.head_dim), torch.randn(1, 1, 1, real.head_dim)


def score(m, n):
    """q at position m, k at position n, both rotated: their dot product."""
    cq, sq = rope_real(torch.tensor([[m]]), torch.float32)
    ck, sk = rope_real(torch.tensor([[n]]), torch.float32)
    return (apply_rope(qv, cq, sq) * apply_rope(kv, ck, sk)).sum().item()


for m, n in ((10, 3), (1010, 1003), (50007, 50000), (3, 10)):
    print(f"q at {m:6d}, k at {n:6d} (distance {m - n:+d}): score {score(m, n):+.4f}")

# %% [markdown]
# The same for a whole range of distances, starting from three places in the text: the three curves lie on top
# of each other (random q and k; the right panel uses q = k = all ones, the curve usually drawn to show that
# scores shrink, on average, with distance).

# %%
book.show("ch04-score", ch04.score_vs_distance, real, REAL_NAME + " config")

# %% [markdown]
# ## 4. M-RoPE: three position axes, and why text does not notice
# Qwen3.5 was trained on images and video too. An image patch has a time, a row and a column, so the rotary module
# takes three positions per token — t (time), h (height), w (width); lower case, since T and H already name the
# tokens and the heads — and lets each frequency read its angle from one of them. Which one is fixed by
# `mrope_section` = [11, 11, 10] and an **interleaved** pattern: frequency j reads h when j mod 3 = 1 (below 3·11),
# w when j mod 3 = 2 (below 3·10), and t otherwise. Interleaving gives every axis fast and slow frequencies alike.
# Qwen2-VL used contiguous blocks instead: of its 64 frequencies (head_dim 128, all rotated), `mrope_section`
# [16, 24, 24] gave t the 16 fastest, h the next 24 and w the 24 slowest.
#
# For text all three positions are the same number, so it does not matter which axis a frequency reads: the table
# is exactly that of plain RoPE. The module therefore takes (B, T) positions for text and (3, B, T) for images.

# %%
for name, c, r in (("this checkpoint", cfg, rope), (REAL_NAME, real, rope_real)):
    axis = mrope_axes(r.R // 2, c.mrope_section)
    print(f"{name:20s} mrope_section {c.mrope_section}: axis per frequency "
          f"{''.join('thw'[a] for a in axis.tolist())}")
p = torch.arange(0, 40000, 1000)[None]  # text: one position per token
angle = p[..., None].float() * rope_real.inv_freq  # plain RoPE, no axes at all
plain = torch.cat((angle, angle), dim=-1)
cos, sin = rope_real(p, torch.float32)
same = torch.equal(cos, plain.cos()) and torch.equal(sin, plain.sin())
print(f"text through M-RoPE == plain RoPE, bit for bit: {same}")
image = torch.stack([p, p + 1, p])  # a token whose row differs from its time: h reads another position
print(f"with h != t the tables differ: max |Δcos| = {(rope_real(image, torch.float32)[0] - cos).abs().max():.3f}")

# %%
book.show("ch04-mrope", ch04.interleave_map, real, REAL_NAME + " config")

# %% [markdown]
# ## 5. cos and sin are rounded to the model dtype
# The angles are computed in fp32; cos and sin are then rounded to the model's dtype before they touch q and k.
# In bf16 that rounding is up to 2⁻⁹ ≈ 0.002 — large next to fp32, and part of the model: transformers does it, so
# a bf16 implementation that keeps fp32 tables gives different outputs from the reference.

# %%
cos32, _ = rope_real(torch.tensor([[1000]]), torch.float32)
cos16, _ = rope_real(torch.tensor([[1000]]), torch.bfloat16)
print(f"position 1000, pair 0: cos in fp32 {cos32[0, 0, 0]:.7f}, in bf16 {cos16[0, 0, 0].float():.7f}; "
      f"largest rounding over the 64 dims {(cos16.float() - cos32).abs().max():.1e}")

# %% [markdown]
# ## Try this
#
# - Set θ to 10,000 (the RoPE paper's and Llama 2's value, and transformers' default when a config has no
#   rope_theta; Llama 3 uses 500,000): `RotaryEmbedding(Config(rope_theta=1e4))`. How long is the slowest
#   wavelength now, against a 262,144-token context?
# - Replace `rotate_half` by the adjacent-pair turn, `torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)`,
#   and measure a length and the score at one distance from two places. With the tables as they are, neither is
#   kept: dims 2j and 2j + 1 now get the angles of two different frequencies, so it is not a rotation. Lay the
#   tables out per pair, `cos[..., :32].repeat_interleave(2, -1)` (and sin), and both hold again. The numbers still
#   differ from transformers' — wrong for this checkpoint unless each head's q and k rows are permuted
#   (tests/test_book_ch04.py measures all three).
# - Give a token t = h = w = 7 and another t = 7, h = 3, w = 5: which of the 32 frequencies change?
#
# ## Show the proof
# The same positions through transformers' `Qwen3_5TextRotaryEmbedding` and `apply_rotary_pos_emb`: text positions
# with this checkpoint's config, and image-like positions — a distinct (t, h, w) for every token — with the real
# 0.8B's config, so every frequency's axis is exercised at the real R, θ and mrope_section. The same fp32
# operations in the same order, so the difference is exactly 0, in fp32 and in bf16.


# %%
def compare(transformers, path):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    real_text = transformers.Qwen3_5TextConfig(**{k: v for k, v in REAL_TEXT_CONFIG.items()
                                                   if k not in ("model_type", "dtype")})
    for name, ours, config, positions in (
            ("this checkpoint, text", rope, transformers.AutoConfig.from_pretrained(path).text_config,
             torch.randint(0, 30000, (2, 16), generator=g)),
            (f"{REAL_NAME}, distinct (t, h, w)", rope_real, real_text,
             torch.randint(0, 30000, (3, 2, 16), generator=g))):
        theirs = Qwen3_5TextRotaryEmbedding(config)
        x = torch.randn(2, config.num_attention_heads, 16, config.head_dim, generator=g)
        for dtype in (torch.float32, torch.bfloat16):
            cos, sin = ours(positions, dtype)
            hf_cos, hf_sin = theirs(x.to(dtype), positions)
            book.oracle.difference(f"{name}: cos/sin tables, {dtype}", torch.cat((cos, sin)),
                                   torch.cat((hf_cos, hf_sin)))
            hf_x, _ = apply_rotary_pos_emb(x.to(dtype), x.to(dtype), hf_cos, hf_sin)
            book.oracle.difference(f"{name}: rotated q, {dtype}", apply_rope(x.to(dtype), cos, sin), hf_x)


book.proof(compare, args.path)

# %% [markdown]
# ## Summary
#
# - RoPE turns pairs of query/key dims by position · frequency, so q·k depends only on the distance between the
#   tokens. It has no weights.
# - Qwen3.5 rotates only the first R = 64 of each head's 256 dims, pairs dim i with dim i + 32 (rotate half), and
#   uses 32 frequencies θ^(−2j/64) with θ = 1e7: wavelengths from 6.3 tokens to about 38 million.
# - M-RoPE gives each frequency one of three position axes (t, h, w: time, height, width), interleaved; for text
#   the three are equal and the tables are exactly plain RoPE.
# - Angles in fp32; cos and sin rounded to the model dtype, as transformers does.
#
# ### Shapes
#
# B, T, H, Hkv, D, R as in the notation table below (T: tokens, H: query heads; the M-RoPE axes are t, h, w).
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | positions, text / image (t, h, w) | (B, T) / (3, B, T) | |
# | inv_freq | (R/2,) | (32,) |
# | cos, sin | (B, T, R) | (B, T, 64) |
# | q after q_norm, k after k_norm | (B, H, T, D), (B, Hkv, T, D) | (B, 8, T, 256), (B, 2, T, 256) |
# | apply_rope(q, cos, sin) | (B, H, T, D): dims 0 … R − 1 turned, the rest unchanged | (B, 8, T, 256) |

# %%
book.notation(args.path)

# %% [markdown]
# ### Exercises
# 206 · rotary position embedding: the frequencies, the tables and the rotation, with hints for the usual mistakes
# (all 256 dims rotated, adjacent pairs, the wrong θ, cos and sin kept in fp32).

# %%
book.attempt(206)

# %% [markdown]
# ## How to explain it
#
# 1. **The problem.** Attention is a set operation: q·k does not know where the tokens are. Absolute position
#    embeddings add a position vector to the input; RoPE instead rotates q and k by position-dependent angles, so
#    that the score depends on the relative position m − n — exactly what attention needs — with no parameters.
# 2. **The mechanics.** Split the rotated dims into pairs, give pair j the frequency θ^(−2j/R), turn it by p times
#    that frequency. Fast pairs resolve nearby order; slow pairs still change over very long distances. A bigger θ
#    (Qwen3.5: 1e7 instead of 1e4) stretches the slow end, which is what long contexts need.
# 3. **Qwen3.5's details.** Partial rotation (64 of 256 dims: the rest of each head can match on content alone),
#    rotate-half pairing (i with i + R/2), and M-RoPE for images with an interleaved t/h/w layout that reduces to
#    plain RoPE for text. cos/sin are rounded to bf16 before use, and a faithful re-implementation has to do the
#    same.
#
# ## Files
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── tokenizer.py    (chapter 2)
# ├── embedding.py    (chapter 2)
# ├── norm.py         (chapter 3)
# └── rope.py         + RotaryEmbedding, apply_rope, mrope_axes
# book/
# └── ch04.py         + this chapter's figures
# chapters/
# └── ch04_rope.py    + this chapter's script
# notebooks/
# └── ch04_rope.ipynb + this notebook, written from the script
# practice/
# └── 206_rope/       + exercise 206
#
# + new in this chapter · unmarked: from an earlier chapter
# ```
