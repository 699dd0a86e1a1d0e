"""Chapter 3: RMSNorm with a zero-centred weight, the gated RMSNorm, and l2norm.

Run: python chapters/ch03_norm.py [--model PATH|HUB_ID|synthetic]
Its notebook, notebooks/ch03_norm.ipynb, is written from this file by python notebooks/sync.py. Cells marked
active="ipynb" (figures, source listings) are commented out here: they run only in the notebook.
"""
# %% [markdown]
# # Chapter 3 · RMSNorm: zero-centred normalisation
#
# Every layer starts by normalising its input: divide the vector by its root mean square, then scale each dimension
# by a learned factor. Qwen3.5 stores that factor as an offset from 1 and applies (1 + w). This chapter writes the
# three normalisations the model uses — RMSNorm, the gated RMSNorm of linear attention, and l2norm — and checks them
# against the weights of every norm in the checkpoint.
#
# ```
# qwen/
# ├── weights.py      (chapter 1)
# ├── tokenizer.py    (chapter 2)
# ├── embedding.py    (chapter 2)
# └── norm.py         + RMSNorm, GatedRMSNorm, l2norm
# chapters/
# └── ch03_norm.py    + this chapter's script
# notebooks/
# └── ch03_norm.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch03_norm.py` (a few seconds). Both use the real
# Qwen3.5-0.8B when they find it (chapter 1 says where they look) and the synthetic checkpoint otherwise: the real
# layout with random weights. Figures made from it say "synthetic weights" in their title; the numbers this text
# quotes are the real model's.

# %%
import torch
import torch.nn.functional as F

from qwen.course import chapter_args
from qwen.norm import GatedRMSNorm, RMSNorm, l2norm, rms_normalize
from qwen.weights import Config, load, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
dev, d, eps = args.device, cfg.hidden_size, cfg.rms_norm_eps
torch.manual_seed(0)


def rms(t):
    """The root mean square of the first three vectors, as short strings."""
    return [f"{v:.2f}" for v in t.float().pow(2).mean(-1).sqrt().flatten()[:3].tolist()]


# %% active="ipynb"
# import matplotlib.pyplot as plt
# import numpy as np
#
# from qwen.synthetic import is_synthetic
#
# torch.set_grad_enabled(False)  # nothing is trained here: the plots want plain tensors
# gen = torch.Generator().manual_seed(1)  # the figures' own random numbers: the printed ones stay the script's
# SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""  # goes into every figure's title

# %% [markdown]
# ## The code: `qwen/norm.py`

# %% active="ipynb"
# import inspect
#
# from IPython.display import Code
#
# import qwen.norm
#
# Code(inspect.getsource(qwen.norm), language="python")

# %% [markdown]
# Three operations share one helper, `rms_normalize`: x / √(mean(x²) + ε) over the last dimension.
#
# | | divides by | then multiplies by | where the model uses it |
# |---|---|---|---|
# | `RMSNorm` | √(mean x² + ε) | 1 + w, per dimension | before every mixer and MLP, after the last layer, on q and k per head |
# | `GatedRMSNorm` | √(mean x² + ε) | w · silu(z), per dimension; z is a gate computed from the layer input | the output of each linear-attention head (chapter 7) |
# | `l2norm` | √(Σ x² + ε) | nothing | q and k of linear attention (chapter 7) |
#
# - **No mean, no bias.** LayerNorm subtracts the mean and adds a bias; RMSNorm only fixes the scale. It is cheaper
#   and trains as well, which is why Llama, Qwen and Gemma all use it.
# - **fp32 inside.** Squares of bf16 numbers lose digits (and in fp16, squares of large values overflow), so the
#   statistics are taken in fp32 and only the result is cast back to the input dtype — one rounding at the end.
# - **Two conventions for the weight.** `RMSNorm` starts at `zeros` and applies `1 + w`; `GatedRMSNorm` starts at
#   `ones` and applies `w`. Both start as "scale 1"; loading a checkpoint into the wrong one is off by exactly 1
#   everywhere, so the class must match the tensor.

# %% [markdown]
# ## 1. What it does
# With the weight at 0 (a scale of exactly 1) every vector comes out with a root mean square of 1, whatever its
# size going in. The trained weights then move the scale: the final norm blows it up to the scale the head expects.

# %%
x = torch.randn(2, 3, d, device=dev) * 5
print("RMS before:", rms(x), " after RMSNorm with weight 0:", rms(RMSNorm(d, eps).to(dev)(x)))
norm0 = load(RMSNorm(d, eps), W, "layers.0.input_layernorm.").to(dev)
final = load(RMSNorm(d, eps), W, "norm.").to(dev)
print("after layer 0's input norm:", rms(norm0(x)), " after the final norm:", rms(final(x)))
for name in ("layers.0.input_layernorm.weight", "norm.weight"):
    w = W[name].float()
    print(f"{name:32s} stored w: mean {w.mean():+.3f}, range [{w.min():+.2f}, {w.max():+.2f}]  "
          f"-> scale 1 + w: mean {1 + w.mean():.3f}")

# %% [markdown]
# The same with 2,000 vectors whose sizes spread over four decades. Before: anything from 0.01 to 100. After: one
# value per norm — 1 with the weight at 0, and whatever scale the trained weight chose. The small width of each
# spike comes from the per-dimension scale: a vector that puts its energy where 1 + w is large comes out a little
# larger.

# %% tags=["fig-rms"] active="ipynb"
# sizes = 10 ** (4 * torch.rand(2000, 1, generator=gen) - 2)  # from 0.01 to 100
# vecs = (torch.randn(2000, d, generator=gen) * sizes).to(dev)
#
#
# def rms_all(t):
#     return t.float().pow(2).mean(-1).sqrt().cpu().numpy()
#
#
# fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4))
# ax0.hist(rms_all(vecs), bins=np.logspace(-2.5, 2.5, 61), color="gray")
# ax0.set(xscale="log", xlabel="RMS of a vector (log scale)", ylabel="number of vectors",
#         title="before normalisation")
# after = {"RMSNorm, weight 0": RMSNorm(d, eps).to(dev)(vecs), "layer 0 input_layernorm": norm0(vecs),
#          "final norm": final(vecs)}
# top = max(rms_all(y).max() for y in after.values()) * 1.1
# for (label, y), color in zip(after.items(), ("C2", "C0", "C3")):
#     ax1.hist(rms_all(y), bins=np.linspace(0, top, 150), color=color, label=f"{label}: mean {rms_all(y).mean():.2f}")
# ax1.set(xlabel="RMS of a vector", ylabel="number of vectors", title="after normalisation")
# ax1.legend()
# fig.suptitle(f"RMS of 2,000 random vectors before and after RMSNorm{SYNTHETIC}")
# fig.tight_layout()
# plt.show()

# %% [markdown]
# ### Where the trained weights put the scale
# Every norm of the model, as its effective scale (one box per norm: the spread of its per-dimension scales; the
# dashed line is a scale of 1). In the real model layer 0's input norm scales by about 1.24 on average and the final
# norm by about 4.3: the tied head compares the last hidden vector with embedding rows (chapter 2), so it has to
# come out at their scale. Look also at how the scales change with depth. In the lower panel, q_norm and k_norm
# set the temperature of full attention (chapter 6), and the gated norm's plain weight multiplies silu(gate)
# (chapter 7).

# %% tags=["fig-scales"] active="ipynb"
# L = cfg.num_hidden_layers
# letters = ["F" if t == "full_attention" else "L" for t in cfg.layer_types]
#
#
# def boxes(ax, data, positions, color, width=0.35):
#     ax.boxplot([t.float().numpy() for t in data], positions=positions, widths=width, patch_artist=True,
#                boxprops=dict(facecolor=color, alpha=0.8), medianprops=dict(color="black"),
#                flierprops=dict(marker=".", markersize=2, alpha=0.4), whiskerprops=dict(color=color),
#                capprops=dict(color=color))
#
#
# fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(13, 7.5), sharex=True)
# for k, (kind, color) in enumerate((("input_layernorm", "C0"), ("post_attention_layernorm", "C1"))):
#     boxes(ax0, [1 + W[f"layers.{i}.{kind}.weight"] for i in range(L)], np.arange(L) + (k - 0.5) * 0.4, color)
# boxes(ax0, [1 + W["norm.weight"]], [L + 0.5], "C3", width=0.6)
# ax0.axhline(1, color="gray", ls="--", lw=1)
# ax0.set(ylabel="scale 1 + w", title="the 49 RMSNorms of the residual stream")
# ax0.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C3")],
#            labels=["input_layernorm (before the mixer)", "post_attention_layernorm (before the MLP)", "final norm"],
#            loc="upper center", ncol=3)
# full = [i for i in range(L) if letters[i] == "F"]
# linear = [i for i in range(L) if letters[i] == "L"]
# boxes(ax1, [1 + W[f"layers.{i}.self_attn.q_norm.weight"] for i in full], np.array(full) - 0.2, "C4")
# boxes(ax1, [1 + W[f"layers.{i}.self_attn.k_norm.weight"] for i in full], np.array(full) + 0.2, "C5")
# boxes(ax1, [W[f"layers.{i}.linear_attn.norm.weight"] for i in linear], linear, "C7", width=0.5)
# ax1.axhline(1, color="gray", ls="--", lw=1)
# ax1.set(ylabel="scale", xlabel="layer (L = linear attention, F = full attention)",
#         title="per-head norms: q_norm and k_norm (1 + w) in full attention, "
#               "the gated norm (plain w) in linear attention")
# ax1.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C4", "C5", "C7")],
#            labels=["q_norm: 1 + w", "k_norm: 1 + w", "linear_attn.norm: w"], loc="upper center", ncol=3)
# for ax in (ax0, ax1):  # head room for the legend
#     lo, hi = ax.get_ylim()
#     ax.set_ylim(lo, hi + 0.2 * (hi - lo))
# ax1.set_xticks(list(range(L)) + [L + 0.5], [f"{i}\n{letters[i]}" for i in range(L)] + ["final"])
# fig.suptitle(f"The effective scale of every norm in the model{SYNTHETIC}")
# fig.tight_layout()
# plt.show()

# %% [markdown]
# ## 2. Why store w − 1: bf16 is coarse near 1 and fine near 0
# bf16 keeps 8 significant bits. Near 1 the gap between neighbours is 2⁻⁷ ≈ 0.0078, so a small update to a weight
# stored as 1.0 disappears; near 0 the grid is far finer, so the same update survives when 0 is stored instead.
# Whatever the input dtype, the statistics are taken in fp32 and the output is cast back.

# %%
print(f"bf16(1 + 0.001) = {torch.tensor(1.001).bfloat16().item():.4f} (the update is lost); "
      f"bf16(0.001) = {torch.tensor(0.001).bfloat16().item():.6f} (kept)")
y = RMSNorm(d, eps).to(dev)(x.bfloat16())
print(f"input bfloat16 -> output {y.dtype}; the statistics were computed in {rms_normalize(x.bfloat16(), eps).dtype}")

# %% [markdown]
# The grid itself. Adding 1 to the bit pattern of a number gives its next neighbour, so the gap between
# representable numbers can be read off the bits. It doubles with every power of two: a floating-point format is
# dense near 0 and sparse far from it, with the same *relative* precision everywhere. bf16 has the range of fp32
# (8 exponent bits) and only 7 bits of fraction; fp16 trades range for 3 more bits.

# %% tags=["fig-bf16"] active="ipynb"
# def gap(values, dtype):
#     """Distance from each value (rounded to dtype) to the next representable number: add 1 to its bits."""
#     bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[dtype]
#     v = values.to(dtype)
#     return ((v.view(bits) + 1).view(dtype).double() - v.double()).numpy()
#
#
# xs = torch.logspace(-4, 1, 3000, dtype=torch.float64)
# fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw=dict(width_ratios=[1.3, 1]))
# for dtype, color in ((torch.bfloat16, "C3"), (torch.float16, "C1"), (torch.float32, "C0")):
#     ax0.step(xs.numpy(), gap(xs, dtype), where="post", color=color, label=str(dtype).replace("torch.", ""))
# ax0.axhline(2e-3, color="gray", ls=":", lw=1)
# ax0.text(1.2e-4, 2.4e-3, "gap 0.002: an update of 0.001 is rounded away above this line", fontsize=9, color="gray")
# for value, shown, align in ((1.0, "1 + 0.001 → 1.0\n(gap 2⁻⁷ ≈ 0.0078)", "right"),
#                             (1e-3, "0.001 → 0.000999\n(gap ≈ 7.6e-6)", "left")):
#     g = gap(torch.tensor([value], dtype=torch.float64), torch.bfloat16)[0]
#     ax0.plot(value, g, "o", color="black", zorder=3)
#     ax0.annotate(shown, (value, g), xytext=(-10 if align == "right" else 10, 12), textcoords="offset points",
#                  ha=align, fontsize=9)
# ax0.set(xscale="log", yscale="log", xlabel="magnitude of the stored number (log scale)",
#         ylabel="gap to the next representable number (log scale)", title="spacing of representable numbers")
# ax0.legend(loc="lower right")
#
# grid = torch.arange(0x3F79, 0x3F85, dtype=torch.int16).view(torch.bfloat16).float().numpy()  # bf16 around 1
# ax1.vlines(grid, 0, 1, color="C3", lw=1.5, label="a bf16 number")
# ax1.axvspan(1 - 2 ** -9, 1 + 2 ** -8, color="C3", alpha=0.15, label="rounds to 1.0")
# ax1.plot([1.001], [0.5], "o", color="black", label="1.001")
# ax1.annotate("", xy=(1.0, 0.5), xytext=(1.001, 0.5), arrowprops=dict(arrowstyle="->", color="black", lw=1.5))
# ax1.text(1.0015, 0.56, "1.001 → 1.0", fontsize=10)
# ax1.set(xlim=(grid[0] - 0.002, grid[-1] + 0.002), ylim=(0, 1), yticks=[], xlabel="value",
#         title="the bf16 numbers around 1: gaps of 2⁻⁸ below, 2⁻⁷ above")
# ax1.legend(loc="upper right", fontsize=9)
# fig.suptitle("The bf16 grid: fine near 0, coarse near 1 — why Qwen3.5 stores w, not 1 + w")
# fig.tight_layout()
# plt.show()

# %% [markdown]
# ## 3. Three conventions for the same operation
# Llama and Qwen3 store the scale itself (plain w, initialised to 1); Gemma 3 and Qwen3.5 store the offset
# (1 + w, initialised to 0); some norms have no scale at all. They are one function: a checkpoint converts between
# them by adding or subtracting 1, and the outputs stay equal.

# %%
w = W["layers.0.input_layernorm.weight"].float()
x_hat = rms_normalize(x, eps)  # the shared part: x / RMS(x)
plain = x_hat * (1 + w).to(dev)  # Llama/Qwen3 style, with the converted weight w_plain = 1 + w
print(f"plain w_plain = 1 + w vs Qwen3.5's (1 + w): max |diff| = {(plain - norm0(x)).abs().max():.1e}")
print(f"no scale vs weight 0: max |diff| = {(x_hat - RMSNorm(d, eps).to(dev)(x)).abs().max():.1e}")
lost = ((1 + w).bfloat16().float() - 1 - w).abs().max()
print(f"storing w_plain in bf16 moves the scale by up to {lost:.1e}; storing w in bf16 moves it by 0 "
      f"(w came from a bf16 file)")

# %% [markdown]
# ## 4. The gated RMSNorm and l2norm (used by linear attention, chapter 7)
# The DeltaNet output is normalised per head and multiplied by silu(z), where z is a gate computed from the layer
# input: a closed gate (z very negative) silences the head, an open one lets it through amplified. Its weight is
# plain (initialised to 1). l2norm scales a vector to length 1 (sum of squares, not mean).

# %%
gated = load(GatedRMSNorm(cfg.linear_value_head_dim, eps), W, "layers.0.linear_attn.norm.").to(dev)
h = torch.randn(4, cfg.linear_value_head_dim, device=dev)
for g in (-6.0, 0.0, 6.0):
    out = gated(h, torch.full_like(h, g))
    print(f"  gate {g:+.0f}: output RMS {out.pow(2).mean(-1).sqrt().mean():.3f}   silu({g:+.0f}) = "
          f"{F.silu(torch.tensor(g)):+.3f}")
print("lengths after l2norm:", [f"{v:.3f}" for v in l2norm(x).norm(dim=-1).flatten()[:3].tolist()])

# %% [markdown]
# Sweeping the gate: the normalised head has a fixed size, so the output RMS is |silu(z)| times that size. Below
# about −4 the head is shut; between −4 and 0 silu dips below zero (its minimum, −0.28, is at z ≈ −1.28), so a
# half-closed gate lets a little through *with its sign flipped*; above 0 the output grows almost linearly with z.

# %% tags=["fig-gate"] active="ipynb"
# zs = torch.linspace(-8, 8, 321, device=dev)
# heads = h.expand(len(zs), *h.shape)  # the same 4 head outputs under every gate value
# out = gated(heads, zs.view(-1, 1, 1).expand_as(heads))  # (321, 4, dv)
# out_rms = out.float().pow(2).mean(-1).sqrt().mean(-1).cpu().numpy()
# size = rms_normalize(h, eps) * gated.weight  # the gated norm's output before the gate
# fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4))
# ax0.plot(zs.cpu(), F.silu(zs).cpu(), color="C0", label="silu(z) = z · sigmoid(z)")
# ax0.plot(zs.cpu(), zs.cpu(), color="gray", ls=":", lw=1, label="z")
# ax0.axhline(0, color="black", lw=0.5)
# ax0.plot([-1.278], [F.silu(torch.tensor(-1.278)).item()], "o", color="C0")
# ax0.annotate("minimum −0.28 at z ≈ −1.28", (-1.278, -0.278), xytext=(-7.5, 2.5), fontsize=9,
#              arrowprops=dict(arrowstyle="->"))
# ax0.set(xlabel="gate value z", ylabel="silu(z)", ylim=(-1, 8.5), title="the silu curve")
# ax0.legend(loc="upper left")
# ax1.plot(zs.cpu(), out_rms, color="C3", lw=2, label="output RMS of GatedRMSNorm")
# ax1.plot(zs.cpu(), F.silu(zs).abs().cpu() * size.float().pow(2).mean(-1).sqrt().mean().item(), color="black",
#          ls="--", lw=1, label="|silu(z)| × RMS(w · x̂)")
# for g in (-6.0, 0.0, 6.0):
#     ax1.axvline(g, color="gray", ls=":", lw=1, label="the gates printed above" if g == 0 else None)
# ax1.set(xlabel="gate value z (the same for every dimension)", ylabel="RMS of the output",
#         title="GatedRMSNorm of layer 0, four head outputs")
# ax1.legend(loc="upper left")
# fig.suptitle(f"The gate of GatedRMSNorm: the output follows |silu(z)|{SYNTHETIC}")
# fig.tight_layout()
# plt.show()

# %% [markdown]
# ## 5. How many norms the model has
# Counted from the config: two RMSNorms per layer plus the final one, a q_norm and a k_norm in each full-attention
# layer (applied per head), and one gated norm in each linear-attention layer.

# %%
n_full, n_linear = cfg.layer_types.count("full_attention"), cfg.layer_types.count("linear_attention")
print(f"the model has {2 * cfg.num_hidden_layers + 1} RMSNorms, {2 * n_full} per-head QK-norms and "
      f"{n_linear} gated RMSNorms: all of them are these two classes")

# %% [markdown]
# ## Summary
#
# - RMSNorm divides a vector by its root mean square and scales each dimension. Qwen3.5 applies 1 + w and
#   initialises w to 0, so an untrained norm is the identity on scale.
# - The statistics are computed in fp32 and the result is rounded once, back to the input dtype.
# - bf16 has 8 significant bits: near 1 its gap is 2⁻⁷, so 1.001 is stored as 1.0; near 0 the grid is far finer.
#   Storing the offset w keeps small updates.
# - The trained scales are not 1: the final norm's 1 + w sits near 4.3 in the real model, to bring the last hidden
#   vector to the scale of the embedding rows the tied head compares it with.
# - `GatedRMSNorm` (plain weight, times silu(z)) and `l2norm` are parts of linear attention (chapter 7); the model
#   has 49 RMSNorms, 12 per-head QK-norms and 18 gated norms, all made of these classes.
#
# File added in this chapter: `qwen/norm.py`.
#
# ## How to explain it
#
# An interviewer asking about RMSNorm wants three things, in this order.
#
# 1. **What it is, against LayerNorm.** LayerNorm centres (subtracts the mean), scales to unit variance, and adds a
#    learned scale and bias. RMSNorm keeps only the scaling: divide by √(mean x²), multiply by a learned
#    per-dimension scale. It is cheaper — one statistic instead of two — and works as well in practice.
# 2. **The engineering details.** The statistics are computed in fp32 (squares of bf16 numbers lose precision) and
#    the result is cast back once. Qwen3.5, like Gemma, parameterises the scale as 1 + w with w initialised to 0:
#    bf16 resolves small offsets around 0 far better than around 1, and weight decay, where it is applied to norms,
#    pulls w towards "scale 1" instead of "scale 0".
# 3. **Where it sits.** Pre-norm: each sublayer sees normalised input, and its output is added to a residual
#    stream that is never normalised, so gradients flow along the stream undisturbed — that is why pre-norm
#    trains deep stacks more stably than post-norm. A final norm before the head; QK-norm on queries and keys keeps
#    the attention logits bounded. In Qwen3.5's linear-attention layers the head output goes through an RMSNorm
#    multiplied by silu(gate), so each head can be switched off by its input.
#
# A good closing detail: the final norm of the trained model scales by about 4.3, because the tied head takes
# dot products with embedding rows, and the hidden vector has to reach their size.
