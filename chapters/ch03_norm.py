"""Chapter 3: RMSNorm with a zero-centred weight, the gated RMSNorm, and l2norm.

Run: python chapters/ch03_norm.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch03_norm.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 3 · RMSNorm: zero-centred normalisation
#
# Every layer starts by normalising its input: divide the vector by its root mean square, then scale each dimension
# by a learned factor. This chapter writes the three normalisations the model uses — RMSNorm, the gated RMSNorm of
# linear attention, and l2norm — and checks them against the weights of every norm in the checkpoint.
#
# **Notation.** In this chapter w is always the tensor the checkpoint stores under a norm's `weight`. RMSNorm
# applies the scale 1 + w (so w = 0 means "scale 1"); the gated norm applies w itself. x̂ = x / √(mean(x²) + ε).
#
# ```
# qwen/
# ├── weights.py, hub.py, ...   (chapter 1)
# ├── tokenizer.py, bpe.py, embedding.py   (chapter 2)
# └── norm.py         + RMSNorm, GatedRMSNorm, l2norm
# chapters/
# └── ch03_norm.py    + this chapter's script
# notebooks/
# └── ch03_norm.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch03_norm.py` (add `--figures` to save the figures,
# `--proof` to compare with transformers). Both use the real Qwen3.5-0.8B when they find it and the synthetic
# checkpoint otherwise: the real layout with random weights. What is drawn or printed from it says "synthetic";
# beside it, marked "real Qwen3.5-0.8B", are the values the real weights give (printed by the source tutorial's
# chapter 3).

# %%
import torch
import torch.nn.functional as F

import book
from book import ch03
from book.ch03 import REAL, REAL_LABEL
from qwen.config import Config
from qwen.course import chapter_args
from qwen.norm import (
    GatedRMSNorm,
    RMSNorm,
    l2norm as qwen_l2norm,  # the name l2norm is left for your attempt in section 2
    rms_normalize,
)
from qwen.synthetic import is_synthetic
from qwen.weights import fill, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
dev, d, eps = args.device, cfg.hidden_size, cfg.rms_norm_eps
SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""  # goes into every figure drawn from them
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here


def rms(t):
    """The root mean square of the first three vectors, as short strings."""
    return [f"{v:.2f}" for v in t.float().pow(2).mean(-1).sqrt().flatten()[:3].tolist()]


# %%
book.show("ch03-map", book.model_map.draw, "norm")

# %% [markdown]
# ## 1. What it does
# With w = 0 (a scale of exactly 1) a vector comes out with a root mean square of 1 — as long as mean(x²) is much
# larger than ε. The ε inside the root matters for tiny vectors: at RMS 10⁻³, mean(x²) = 10⁻⁶ = ε, and the output
# RMS is √(1/2) ≈ 0.707. The trained weights then move the scale. On the synthetic checkpoint the weights are
# random draws around their initial values (`qwen/synthetic.py`); only the real values printed beside them are
# findings.

# %%
x = torch.randn(2, 3, d, device=dev) * 5
unit = RMSNorm(d, eps).to(dev)
print("RMS before:", rms(x), " after RMSNorm with w = 0:", rms(unit(x)))
for size in (1e-2, 1e-3, 1e-4):
    tiny = torch.full((1, d), size, device=dev)
    print(f"  a vector of RMS {size:g} (mean(x²) = {size ** 2:g}, ε = {eps:g}) comes out with RMS "
          f"{unit(tiny).pow(2).mean().sqrt():.3f}")
norm0 = fill(RMSNorm(d, eps), W, "layers.0.input_layernorm.").to(dev)
final = fill(RMSNorm(d, eps), W, "norm.").to(dev)
print(f"after layer 0's input norm: {rms(norm0(x))}, after the final norm: {rms(final(x))}{SYNTHETIC}")
print(f"  {REAL_LABEL}: {REAL['layer0_rms']} and {REAL['final_rms']}")
for name, key in (("layers.0.input_layernorm.weight", "layer0_w"), ("norm.weight", "final_w")):
    w = W[name].float()
    r = REAL[key]
    print(f"{name:32s} w: mean {w.mean():+.3f}, range [{w.min():+.2f}, {w.max():+.2f}]{SYNTHETIC}; "
          f"{REAL_LABEL}: mean {r['mean']:+.3f}, range [{r['min']:+.2f}, {r['max']:+.2f}]")

# %% [markdown]
# The same with 2,000 vectors whose sizes spread over four decades, both panels on one scale. Before: anything from
# 0.01 to 100. After: one narrow spike per norm — at 1 with w = 0, and wherever the trained weight puts it. The
# width of a spike comes from the per-dimension scale: a vector that puts its energy where 1 + w is large comes out
# a little larger. The dashed lines are the real model's.

# %%
gen = torch.Generator().manual_seed(1)  # the figures' own random numbers
sizes = 10 ** (4 * torch.rand(2000, 1, generator=gen) - 2)  # from 0.01 to 100
vecs = (torch.randn(2000, d, generator=gen) * sizes).to(dev)
book.show("ch03-rms", ch03.rms_before_after, vecs,
          {"RMSNorm, w = 0": unit, "layer 0 input_layernorm": norm0, "final norm": final}, SYNTHETIC)

# %% [markdown]
# ### Where the trained weights put the scale
# Every norm of the model as its effective scale: one box per norm, the spread of its per-dimension scales; the
# dashed line is a scale of 1. In the real model layer 0's input norm scales by about 1.24 on average and the
# final norm by about 4.3 (the black diamonds: the real means and ranges). On the synthetic checkpoint each box is
# a random draw around the weight's initial value (0 for w, so a scale of 1; 1 for the gated norm): the boxes show
# random spread, nothing learned.
#
# Why would the final norm scale by 4.3? Its output goes straight into the head: logits = h · Eᵀ (chapter 2). The
# gain sets the size of h and so the size of the logits — how peaked the softmax over the next token is. Nothing
# in the product asks h to be as long as the rows of E.

# %%
book.show("ch03-scales", ch03.scales, W, cfg.layer_types, SYNTHETIC)

# %% [markdown]
# ## 2. Write it yourself, then read ours
# **Try it first**: exercise 204 asks for the three functions of this chapter — `rms_norm`, `gated_rms_norm`,
# `l2norm` — and tests them on real shapes, in fp32, bf16 and fp16, with inputs so small that ε matters. Start it
# with `python practice/judge.py start 204`, or write them in the next cell and run it: the judge grades them here.

# %%
def rms_norm(x, weight, eps=1e-6):
    raise NotImplementedError  # x̂ · (1 + weight), statistics in fp32, result in x's dtype


def gated_rms_norm(x, gate, weight, eps=1e-6):
    raise NotImplementedError  # x̂ · weight · silu(gate)


def l2norm(x, eps=1e-6):
    raise NotImplementedError  # x / sqrt(sum(x²) + eps)


book.attempt(204, rms_norm, gated_rms_norm, l2norm)

# %% [markdown]
# ## The code: `qwen/norm.py`

# %%
book.listing("qwen/norm.py")

# %% [markdown]
# Three operations share one helper, `rms_normalize`: x̂ = x / √(mean(x²) + ε) over the last dimension.
#
# | | divides by | then multiplies by | where the model uses it |
# |---|---|---|---|
# |`RMSNorm`|√(mean x² + ε)|1 + w, per dimension|before every mixer and MLP, after the last layer, on q and k per head|
# |`GatedRMSNorm`|√(mean x² + ε)|w · silu(z), per dimension|the output of each linear-attention head (chapter 7)|
# |`l2norm`|√(Σ x² + ε)|nothing|q and k of linear attention (chapter 7)|
#
# In `GatedRMSNorm`, z is a gate computed from the layer input.
#
# - **No mean, no bias.** LayerNorm subtracts the mean and adds a bias; RMSNorm only fixes the scale. It is cheaper
#   and trains as well, which is why Llama, Qwen and Gemma all use it.
# - **fp32 inside.** Squares of bf16 numbers lose digits (and in fp16, squares of large values overflow), so the
#   statistics are taken in fp32 and only the result is cast back to the input dtype — one rounding at the end for
#   `RMSNorm` (the cell below measures what a sum kept in bf16 would do). `GatedRMSNorm` rounds where
#   transformers does: x̂ to the input dtype, w · x̂ in it, then the fp32 gate and a last rounding (the proof at the
#   end of the chapter shows what one rounding would change).
# - **Two conventions for the weight.** `RMSNorm` starts at `zeros` and applies `1 + w`; `GatedRMSNorm` starts at
#   `ones` and applies `w`. Both start as "scale 1"; loading a checkpoint into the wrong one is off by exactly 1
#   everywhere, so the class must match the tensor.
#
# How much does bf16 lose in mean(x²)? Less than one might fear when PyTorch computes it: its bf16 `mean` adds the
# bf16 squares in fp32 and rounds once, so the error stays about one bf16 rounding (≤ 2⁻⁸ relative) at every d. A
# sum *kept* in bf16, one addition at a time as a naive kernel would, is another matter: once the sum is large, each
# new square is smaller than half a step of the sum's grid and is rounded away.

# %%
gen = torch.Generator().manual_seed(4)
for n in (256, 1024, 4096):
    v = (torch.randn(n, generator=gen, dtype=torch.float64) * 3).bfloat16()  # bf16 inputs
    exact = v.double().pow(2).mean()  # their mean square, in fp64
    running = torch.zeros((), dtype=torch.bfloat16)
    for square in v.pow(2):  # a running sum in bf16: every addition rounds to bf16
        running += square
    print(f"d = {n:5,}: torch's bf16 mean of x² off by {v.pow(2).mean().double() / exact - 1:+.1e}; a bf16 running "
          f"sum off by {running.double() / n / exact - 1:+.0%}")
# %% [markdown]
# ## 3. Why store the offset w, not the scale 1 + w
# Two reasons are usually given.
#
# - **bf16 is coarse near 1 and fine near 0.** bf16 keeps 8 significant bits: near 1 the gap between neighbours is
#   2⁻⁷ ≈ 0.0078, near 0 it is far smaller. A weight that is *stored and updated in bf16* loses an update of 0.001
#   when it is 1.0, and keeps it when it is 0. (Mixed-precision training usually updates an fp32 master copy, where
#   1 + 0.001 is fine; the offset still comes out closer when that copy is rounded to bf16 for the checkpoint.)
#   How much closer depends on w. Near 0 it is a large factor; the synthetic weights sit there by construction
#   (drawn around 0), so their lines below show the best case. Trained weights move away: the real final norm's w
#   is about 3.3, layer 0's up to 1.0. For |w| between 1 and 5, w and 1 + w are at most one binade apart, so storing
#   w halves the rounding error (2×) — or changes nothing, where both fall in the same binade.
# - **Weight decay pulls towards 0.** Where decay is applied to norm weights, it pulls w towards 0 — a scale of 1,
#   "leave the vector alone" — rather than pulling the scale itself towards 0.

# %%
print(f"bf16(1 + 0.001) = {torch.tensor(1.001).bfloat16().item():.4f} (the update is lost); "
      f"bf16(0.001) = {torch.tensor(0.001).bfloat16().item():.6f} (kept)")
g = torch.Generator().manual_seed(2)
w0 = W["layers.0.input_layernorm.weight"].float()
updates = 1e-3 * torch.randn(d, generator=g)
for label, w32 in ((f"layer 0's w{SYNTHETIC} plus fp32 updates of size 1e-3", w0 + updates),
                   ("a young norm: w of size 1e-3 in fp32", 1e-3 * torch.randn(d, generator=g))):
    as_offset = (w32.bfloat16().float() + 1 - (1 + w32)).abs().max()
    as_scale = ((1 + w32).bfloat16().float() - (1 + w32)).abs().max()
    print(f"{label}: rounded to bf16, the scale moves by up to {as_offset:.1e} when w is stored, "
          f"{as_scale:.1e} when 1 + w is stored")


def bf16_step(value):
    """The gap from bf16(value) to the next bf16 number up."""
    v = torch.tensor(value).bfloat16()
    return (torch.nextafter(v, torch.tensor(float("inf")).bfloat16()) - v).item()


for label, w in ((f"{REAL_LABEL}, layer 0's mean w", REAL["layer0_w"]["mean"]),
                 (f"{REAL_LABEL}, layer 0's largest w", REAL["layer0_w"]["max"]),
                 (f"{REAL_LABEL}, final norm's mean w", REAL["final_w"]["mean"]),
                 (f"{REAL_LABEL}, final norm's largest w", REAL["final_w"]["max"])):
    ratio = bf16_step(1 + w) / bf16_step(w)
    print(f"{label} ({w:.3f}): bf16 step {bf16_step(w):.2g} at w, {bf16_step(1 + w):.2g} at 1 + w: "
          + (f"storing w rounds {ratio:g}x finer" if ratio > 1 else "the same step: storing w gains nothing"))
y = unit(x.bfloat16())
print(f"input bfloat16 -> output {y.dtype}; the statistics were computed in {rms_normalize(x.bfloat16(), eps).dtype}")

# %% [markdown]
# The grid itself. Adding 1 to the bit pattern of a number gives its next neighbour, so the gap between
# representable numbers can be read off the bits. It doubles with every power of two: a floating-point format is
# dense near 0 and sparse far from it, with the same *relative* precision everywhere. bf16 has the range of fp32
# (8 exponent bits) and only 7 bits of fraction; fp16 trades range for 3 more bits.

# %%
book.show("ch03-bf16", ch03.bf16_grid)

# %% [markdown]
# ## 4. Conventions: the same operation, written three ways
# Llama and Qwen3 store the scale itself (a plain weight p, initialised to 1); Gemma 3 and Qwen3.5 store the offset
# (applied as 1 + w, initialised to 0); some norms have no scale. They are one function: p = 1 + w. PyTorch's own
# `F.rms_norm` takes a plain weight, so it is an independent check of our RMSNorm with the converted weight.
#
# **Try it**: exercise 205 converts every norm weight of a whole state dict between the two conventions, and must
# leave the gated norm alone. Start it with `python practice/judge.py start 205`, or write the two functions in
# the next cell and run it.

# %%
def centred_to_plain(state):
    raise NotImplementedError  # a new dict: 1 + w (in fp32) for every zero-centred norm weight, the rest unchanged


def plain_to_centred(state):
    raise NotImplementedError  # the way back: p - 1


book.attempt(205, centred_to_plain, plain_to_centred)

# %%
theirs = F.rms_norm(x.float(), (d,), weight=(1 + w0).to(dev), eps=eps)
print(f"F.rms_norm with p = 1 + w vs our RMSNorm with w: max |diff| = {(theirs - norm0(x)).abs().max():.1e} "
      f"(PyTorch's implementation against ours)")

# %% [markdown]
# ## 5. The gated RMSNorm and l2norm (used by linear attention, chapter 7)
# The DeltaNet output is normalised per head and multiplied by silu(z), where z is a gate computed from the layer
# input: a closed gate (z very negative) silences the head, an open one lets it through amplified. Its weight is
# plain (initialised to 1). l2norm scales a vector to length 1 (sum of squares, not mean).

# %%
gated = fill(GatedRMSNorm(cfg.linear_value_head_dim, eps), W, "layers.0.linear_attn.norm.").to(dev)
h = torch.randn(4, cfg.linear_value_head_dim, device=dev)
for z in (-6.0, 0.0, 6.0):
    out = gated(h, torch.full_like(h, z))
    print(f"  gate {z:+.0f}: output RMS {out.pow(2).mean(-1).sqrt().mean():.3f}{SYNTHETIC}, {REAL_LABEL} "
          f"{REAL['gate_rms'][z]:.3f};  silu({z:+.0f}) = {F.silu(torch.tensor(z)):+.3f}")
print("lengths after l2norm:", [f"{v:.3f}" for v in qwen_l2norm(x).norm(dim=-1).flatten()[:3].tolist()])

# %% [markdown]
# Sweeping the gate. silu(z) = z · sigmoid(z) (left) is negative for every z < 0, with its minimum −0.278 at
# z ≈ −1.278, and tends to 0 as z → −∞. So a half-closed gate lets a little of the head through *with its sign
# flipped*: the middle panel plots every output element against its ungated value w · x̂ for five gate values —
# each a line of slope silu(z), falling for z < 0 — and a shut gate (z below about −6) lets almost nothing through.
# The RMS (right) only shows the size, |silu(z)| times the head's size; the diamonds are the real model's layer 0
# on its own heads.

# %%
book.show("ch03-gate", ch03.gate, gated, h, SYNTHETIC)

# %% [markdown]
# ## 6. How many norms the model has
# Counted from the config: two RMSNorms per layer plus the final one, a q_norm and a k_norm in each full-attention
# layer (applied per head), and one gated norm in each linear-attention layer.

# %%
n_full, n_linear = cfg.layer_types.count("full_attention"), cfg.layer_types.count("linear_attention")
print(f"the model has {2 * cfg.num_hidden_layers + 1} RMSNorms, {2 * n_full} per-head QK-norms and "
      f"{n_linear} gated RMSNorms: all of them are these two classes")

# %% [markdown]
# ## Try this
#
# - **ε = 1e-2**: `RMSNorm(d, eps=1e-2)(torch.full((1, d), 0.1))`. mean(x²) = ε: what RMS comes out, and why?
# - **The wrong class**: load the gated norm's weight into a plain RMSNorm,
#   `fill(RMSNorm(cfg.linear_value_head_dim), W, "layers.0.linear_attn.norm.")`, and compare its output on `h` with
#   `gated(h, torch.full_like(h, 20.0)) / F.silu(torch.tensor(20.0))`. Off by how much, everywhere?
# - **Statistics in bf16**: the cell after the code listing compares torch's bf16 mean of x² (a few 1e-3 off at
#   every d: it accumulates in fp32) with a sum kept in bf16 (about −54 % at d = 4,096). Try d = 16,384, or
#   `v.bfloat16().pow(2).sum()` — which of the two is it? `rms_normalize` calls `.float()` first so that no kernel's
#   accumulator can matter.
#
# ## Show the proof
# When transformers is installed, its Qwen3.5 norms get the same weights. In bf16 both must agree exactly: the
# RMSNorms compute in fp32 and round once; the gated norms round in the same three places. Those three roundings
# are a choice, not a law. Rounding once, at the end, would be on the whole closer to the exact value:
# transformers rounds twice before the gate (x̂ to bf16, then w · x̂ in bf16), each by up to half a step, so its
# value can be a full step from the one-rounding value before the last rounding, which can add one more — up to
# 2 bf16 steps apart. The course's module follows transformers anyway, because its promise is transformers'
# output: in a whole bf16 model such steps, carried through the layers, can change the top-1 token. The last
# lines measure the alternative (tests/test_norm.py checks both claims).

# %%
def compare(transformers, W):
    from transformers.models.qwen3_5 import modeling_qwen3_5 as hf

    x = torch.randn(64, d, generator=torch.Generator().manual_seed(3)).bfloat16() * 3
    ours, theirs = fill(RMSNorm(d, eps), W, "norm."), hf.Qwen3_5RMSNorm(d, eps)
    theirs.weight.copy_(W["norm.weight"])
    book.oracle.difference("final norm, bf16", ours.bfloat16()(x), theirs.bfloat16()(x))
    dv = cfg.linear_value_head_dim
    hh, z = torch.randn(4096, dv).bfloat16() * 3, torch.randn(4096, dv).bfloat16()
    ours, theirs = fill(GatedRMSNorm(dv, eps), W, "layers.0.linear_attn.norm."), hf.Qwen3_5RMSNormGated(dv, eps=eps)
    theirs.weight.copy_(W["layers.0.linear_attn.norm.weight"])
    want = theirs.bfloat16()(hh, z)
    book.oracle.difference("gated norm of layer 0, bf16", ours.bfloat16()(hh, z), want)
    once = (rms_normalize(hh, eps) * ours.weight.float() * F.silu(z.float())).bfloat16()  # one rounding, at the end
    h64 = hh.double()
    exact = h64 * torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + eps) * ours.weight.double() * F.silu(z.double())
    print(f"the gated norm rounded once instead: up to {book.oracle.bf16_steps(once, want):g} bf16 steps from "
          f"transformers; mean distance to the exact value {(once.double() - exact).abs().mean():.3g}, "
          f"transformers' order {(want.double() - exact).abs().mean():.3g}")
    book.oracle.difference("l2norm, fp32", qwen_l2norm(hh.float()), hf.l2norm(hh.float(), dim=-1, eps=1e-6))


book.proof(compare, W)

# %% [markdown]
# ## Summary
#
# - RMSNorm divides a vector by its root mean square and scales each dimension by 1 + w, w initialised to 0. The
#   output RMS is 1 (with w = 0) only when mean(x²) ≫ ε: at RMS 10⁻³ and ε = 10⁻⁶ it is 0.707.
# - The statistics are computed in fp32 and the result is rounded back to the input dtype: once for RMSNorm, in
#   transformers' three places for the gated norm (rounding once would be closer to exact, up to 2 bf16 steps
#   away, but the course matches transformers bit for bit).
# - Storing the offset w rather than the scale: bf16's grid is fine near 0 and coarse near 1 (1.001 is stored as
#   1.0), which matters where the weight is held in bf16 and stays near 0; for trained weights of 1 to 5 (the real
#   final norm's w ≈ 3.3) it is at most one binade, 2× finer. Weight decay then pulls towards a scale of 1.
# - The trained scales are not 1: the real final norm scales by about 4.3, setting the size of the logits.
# - `GatedRMSNorm` (plain w, times silu(z), negative for every z < 0) and `l2norm` are parts of linear attention
#   (chapter 7); the model has 49 RMSNorms, 12 per-head QK-norms and 18 gated norms, all made of these classes.
#
# Shapes: every norm works on the last dimension — d for the residual stream, D per head for q_norm and k_norm, dv
# per head for the gated norm:

# %%
book.notation(args.path)

# %% [markdown]
# File added in this chapter: `qwen/norm.py`.
#
# **Exercises**: 204 · Zero-centred RMSNorm and gated RMSNorm (`python practice/judge.py start 204`, or the cell in
# section 2) · 205 · Convert norm weights between conventions (`python practice/judge.py start 205`, or the cell
# in section 4).
#
# ## How to explain it
#
# An interviewer asking about RMSNorm wants three things, in this order.
#
# 1. **What it is, against LayerNorm.** LayerNorm centres (subtracts the mean), scales to unit variance, and adds a
#    learned scale and bias. RMSNorm keeps only the scaling: divide by √(mean x² + ε), multiply by a learned
#    per-dimension scale. It is cheaper — one statistic instead of two — and works as well in practice.
# 2. **The engineering details.** The statistics are computed in fp32 (squares of bf16 numbers lose precision) and
#    the result is cast back once. Qwen3.5, like Gemma, parameterises the scale as 1 + w with w initialised to 0:
#    bf16 resolves small offsets around 0 far better than around 1 (once trained weights reach 1 to 5, the gain is
#    one binade at most), and weight decay, where it is applied to norms, pulls w towards "scale 1" instead of
#    "scale 0".
# 3. **Where it sits.** Pre-norm: each sublayer sees normalised input, and its output is added to a residual
#    stream that is never normalised, so gradients flow along the stream undisturbed — that is why pre-norm
#    trains deep stacks more stably than post-norm. A final norm before the head, whose gain sets the scale of the
#    logits; QK-norm on queries and keys keeps the attention logits bounded. In Qwen3.5's linear-attention layers
#    the head output goes through an RMSNorm multiplied by silu(gate), so each head can be switched off by its
#    input.
