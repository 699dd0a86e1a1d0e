"""Chapter 3: RMSNorm with a zero-centred weight, the gated RMSNorm, and l2norm.

Run: python chapters/ch03_norm.py [--model PATH|HUB_ID|synthetic]
"""
# %% [markdown]
# # Chapter 3 · RMSNorm: zero-centred normalisation
#
# Every layer starts by normalising its input: divide the vector by its root mean square, then scale each dimension
# by a learned factor. Qwen3.5 stores that factor as an offset from 1 and applies (1 + w). This chapter writes the
# three normalisations the model uses and replaces all of its norms at once.
#
# ```
# qwen/
# ├── weights.py     (chapter 1)
# ├── tokenizer.py   (chapter 2)
# ├── embedding.py   (chapter 2)
# └── norm.py        + new: RMSNorm, GatedRMSNorm, l2norm
# chapters/ch03_norm.py   + this chapter's script
# ```

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
# ## 5. How many norms the model has
# Counted from the config: two RMSNorms per layer plus the final one, a q_norm and a k_norm in each full-attention
# layer (applied per head), and one gated norm in each linear-attention layer.

# %%
n_full, n_linear = cfg.layer_types.count("full_attention"), cfg.layer_types.count("linear_attention")
print(f"the model has {2 * cfg.num_hidden_layers + 1} RMSNorms, {2 * n_full} per-head QK-norms and "
      f"{n_linear} gated RMSNorms: all of them are these two classes")
