"""Chapter 1: what is in a Qwen3.5 checkpoint — the config, the tensors, how many parameters, and the file format.

Run: python chapters/ch01_weights.py [--model PATH|HUB_ID|synthetic]
Its notebook, notebooks/ch01_weights.ipynb, is written from this file by python notebooks/sync.py. Cells marked
active="ipynb" (figures, source listings) are commented out here: they run only in the notebook.
"""
# %% [markdown]
# # Chapter 1 · What is in a checkpoint
#
# Before writing any layer we open the checkpoint and look: `config.json` gives the numbers, the `.safetensors`
# files give named tensors. This chapter adds `qwen/weights.py`, which every later chapter uses to get tensors by
# name, and reads a safetensors header by hand to show there is no magic in the format.
#
# ```
# qwen/
# ├── weights.py          + Config.load, find_model, load_weights, load
# ├── synthetic.py        + the offline checkpoint: the real layout with random weights
# ├── make_tokenizer.py   + writes the synthetic checkpoint's tokenizer files
# └── course.py           + --model, the device and the banner, for every chapter
# chapters/
# └── ch01_weights.py     + this chapter's script
# notebooks/
# ├── ch01_weights.ipynb  + this notebook, written from the script
# └── sync.py             + writes every notebook from its chapter script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch01_weights.py` (a few seconds). Both look for the real
# Qwen3.5-0.8B — `--model` (in a notebook: the environment variable `QWEN_MODEL`), then `data/Qwen3.5-0.8B/`, then
# the Hugging Face cache, then a 1.7 GB download — and use the synthetic checkpoint when none of that works: the
# real names, shapes, dtypes and tokenizer with narrow widths and random numbers. Everything made from it says so:
# a banner in the output, "synthetic weights" in the figure titles.

# %%
import json
import struct
import time
from collections import Counter

import torch
from safetensors import safe_open

from qwen.course import chapter_args
from qwen.weights import Config, load_weights, read_header

args = chapter_args(__doc__)
path = args.path
cfg = Config.load(path)
started = time.perf_counter()
W = load_weights(path)  # reads the headers only: no tensor data yet
opened_ms = (time.perf_counter() - started) * 1000

# %% active="ipynb"
# import matplotlib.pyplot as plt
# import numpy as np
# from matplotlib.colors import LogNorm
#
# from qwen.synthetic import is_synthetic
#
# SYNTHETIC = " (synthetic weights)" if is_synthetic(path) else ""  # goes into every figure's title

# %% [markdown]
# ## The code: `qwen/weights.py`
# Four things, used by every later chapter: `Config.load` reads `config.json` into a dataclass, `find_model`
# finds a checkpoint folder, `load_weights` maps names to tensors, and `load` copies tensors into a module. Here
# are the last two and the header reader under them.

# %% active="ipynb"
# import inspect
#
# from IPython.display import Code
#
# import qwen.weights
#
# Code("\n\n".join(inspect.getsource(f) for f in (qwen.weights.read_header, qwen.weights.Weights, qwen.weights.load)),
#      language="python")

# %% [markdown]
# - **`read_header`** reads the 8-byte length and the JSON header of a `.safetensors` file, and checks that the
#   file is long enough for the data the header promises: a half-downloaded file fails here, with a message that
#   says what to do, instead of deep inside a later chapter.
# - **`Weights`** is a read-only `Mapping` from the text model's names to tensors. Opening it reads only headers;
#   a tensor is read when someone indexes it. It strips the `model.language_model.` prefix, skips the vision tower
#   and the multi-token-prediction block, and, when the head is tied, answers `lm_head.weight` with the embedding.
# - **`load`** copies `W[prefix + name]` into each parameter of a module, and refuses a missing, an unexpected or a
#   wrongly shaped tensor, naming it. Because our parameter names are the checkpoint's names, this loop is the
#   whole loader: no mapping table.

# %% [markdown]
# ## 1. The config
# The real `config.json` describes the multimodal model (`Qwen3_5ForConditionalGeneration`); the text model's
# numbers sit under `text_config`. The layer pattern is the heart of Qwen3.5: three Gated DeltaNet (linear
# attention) layers, then one full-attention layer, six times over.

# %%
raw = json.loads((path / "config.json").read_text())
pattern = "".join("F" if t == "full_attention" else "L" for t in cfg.layer_types)
print(f"config.json: {raw.get('architectures', ['?'])[0]}, model_type {raw['model_type']!r}; "
      f"text numbers under {'text_config' if 'text_config' in raw else 'the top level'}")
print(f"width d = {cfg.hidden_size}, {cfg.num_hidden_layers} layers, vocabulary {cfg.vocab_size:,}, "
      f"MLP width {cfg.intermediate_size}, saved as {cfg.dtype}, tied head: {cfg.tie_word_embeddings}")
print(f"layer pattern: {' '.join(pattern[i:i + 4] for i in range(0, len(pattern), 4))}  "
      f"(L = linear attention, F = full attention)")
print(f"full attention: {cfg.num_attention_heads} query heads, {cfg.num_key_value_heads} KV heads, "
      f"{cfg.head_dim} dims each; rope_theta {cfg.rope_theta:g}, {cfg.partial_rotary_factor:.0%} of dims rotate")
print(f"linear attention: {cfg.linear_num_key_heads} key heads x {cfg.linear_key_head_dim}, "
      f"{cfg.linear_num_value_heads} value heads x {cfg.linear_value_head_dim}, conv width {cfg.linear_conv_kernel_dim}")

# %% [markdown]
# ## 2. The tensors of one layer of each kind
# Every layer has two norms and an MLP; the mixer differs. Names are the checkpoint keys with the
# `model.language_model.` prefix stripped — the same names our modules will use for their parameters.

# %%
def shape_of(name):
    file, key = W.where[name]
    return tuple(read_header(file)[key]["shape"])  # from the header: no data read


first_full = cfg.layer_types.index("full_attention")
for i in (0, first_full):
    print(f"layers.{i} ({cfg.layer_types[i]}):")
    for name in sorted(n for n in W if n.startswith(f"layers.{i}.")):
        print(f"   {name[len(f'layers.{i}.'):]:36s} {shape_of(name)}")
headers = {}
for file in sorted({f for f, _ in W.where.values()}):
    headers.update(read_header(file))
skipped = Counter(k.split(".")[0] if k.startswith("mtp.") else "model.visual" for k in headers
                  if k.startswith(("mtp.", "model.visual.")))
print(f"also in the files, skipped by load_weights: {skipped.get('mtp', 0)} mtp.* tensors (multi-token prediction)"
      f" and {skipped.get('model.visual', 0)} model.visual.* tensors (the vision tower)")

# %% [markdown]
# All 24 layers at once: one row per tensor name, one column per layer, coloured by the tensor's size (empty: the
# layer has no such tensor). The [L, L, L, F] pattern is the checkerboard in the middle: `linear_attn.*` rows are
# filled in three layers out of four, `self_attn.*` rows in the fourth. The norms and the MLP are the same in every
# layer. The bars on top add up each layer's parameters.

# %% tags=["fig-layers"] active="ipynb"
# L = cfg.num_hidden_layers
# letters = ["F" if t == "full_attention" else "L" for t in cfg.layer_types]
# per_layer = {}  # (layer, name inside the layer) -> number of parameters
# for n in W:
#     if n.startswith("layers."):
#         _, i, rest = n.split(".", 2)
#         per_layer[int(i), rest] = torch.Size(shape_of(n)).numel()
# order = ("input_layernorm", "linear_attn", "self_attn", "post_attention_layernorm", "mlp")
# rows = sorted({rest for _, rest in per_layer}, key=lambda r: (order.index(r.split(".")[0]), r))
# sizes = np.full((len(rows), L), np.nan)
# for (i, rest), n in per_layer.items():
#     sizes[rows.index(rest), i] = n
#
# fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(13, 9.5), sharex=True, gridspec_kw=dict(height_ratios=[1, 3.2]),
#                                layout="constrained")
# mixer = np.array([sum(n for (j, r), n in per_layer.items() if j == i and r.startswith(("linear_attn", "self_attn")))
#                   for i in range(L)])
# mlp = np.array([sum(n for (j, r), n in per_layer.items() if j == i and r.startswith("mlp")) for i in range(L)])
# ax0.bar(range(L), mixer, color=["C1" if c == "F" else "C0" for c in letters])
# ax0.bar(range(L), mlp, bottom=mixer, color="C7")
# ax0.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in ("C0", "C1", "C7")],
#            labels=["linear attention (Gated DeltaNet)", "full attention", "MLP"], ncol=3, loc="upper center")
# ax0.set(ylabel="parameters", ylim=(0, (mixer + mlp).max() * 1.35),
#         title="parameters per layer (the two norms are too small to see)")
# ax0.yaxis.set_major_formatter("{x:,.0f}")
# image = ax1.imshow(sizes, aspect="auto", cmap="viridis", norm=LogNorm(), interpolation="nearest")
# ax1.set_yticks(range(len(rows)), rows, fontsize=9)
# ax1.set_xticks(range(L), [f"{i}\n{c}" for i, c in enumerate(letters)])
# ax1.set(xlabel="layer (L = linear attention, F = full attention)",
#         title="one row per tensor name: its size in each layer")
# fig.colorbar(image, ax=[ax0, ax1], label="parameters in the tensor (log scale)", fraction=0.03, pad=0.01)
# fig.suptitle(f"The tensors of the {L} layers: the [L, L, L, F] pattern{SYNTHETIC}")
# plt.show()

# %% [markdown]
# ## 3. Parameters by part
# Counting needs only the shapes, and the shapes follow from the config. We count from the file, then from
# the config alone, and check they agree; the same formula with the real 0.8B numbers gives its size.

# %%
def part(name):
    if name.startswith(("embed_tokens", "lm_head")):
        return "embedding"
    if name.endswith("layernorm.weight") or name == "norm.weight":
        return "norms"  # the 2 per layer + the final one; q/k norms count with attention, the gated norm with DeltaNet
    return {"linear_attn": "linear attention", "self_attn": "full attention", "mlp": "MLP"}[name.split(".")[2]]


def count_from_config(c):
    """Parameters by part from the config alone (the tied head adds none)."""
    d, Hk, Hv, dk, dv = (c.hidden_size, c.linear_num_key_heads, c.linear_num_value_heads,
                         c.linear_key_head_dim, c.linear_value_head_dim)
    conv = 2 * Hk * dk + Hv * dv
    n_lin = c.layer_types.count("linear_attention")
    n_full = c.num_hidden_layers - n_lin
    linear = conv * d + Hv * dv * d + 2 * Hv * d + conv * c.linear_conv_kernel_dim + 2 * Hv + dv + d * Hv * dv
    H, Hkv, D = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    full = 2 * H * D * d + 2 * Hkv * D * d + d * H * D + 2 * D
    return {"embedding": c.vocab_size * d * (1 if c.tie_word_embeddings else 2),
            "linear attention": n_lin * linear, "full attention": n_full * full,
            "MLP": c.num_hidden_layers * 3 * c.intermediate_size * d, "norms": (2 * c.num_hidden_layers + 1) * d}


from_file = Counter()
for name in W:
    if name != "lm_head.weight" or not cfg.tie_word_embeddings:  # the tied head is the embedding again
        from_file[part(name)] += torch.Size(shape_of(name)).numel()
total = sum(from_file.values())
for k in ("embedding", "linear attention", "full attention", "MLP", "norms"):
    n = from_file[k]
    print(f"   {k:18s} {n:>14,}  {n / total:6.1%}")
print(f"   {'total':18s} {total:>14,}   counted from the file; from the config alone: "
      f"{sum(count_from_config(cfg).values()):,} ({'equal' if count_from_config(cfg) == dict(from_file) else 'DIFFERENT'})")
real_08b = Config(hidden_size=1024, intermediate_size=3584, num_hidden_layers=24, num_attention_heads=8,
                  num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16,
                  tie_word_embeddings=True, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 6)
n = count_from_config(real_08b)
print(f"the same formula with the real Qwen3.5-0.8B numbers: {sum(n.values()):,} text parameters, "
      f"{n['embedding']:,} of them ({n['embedding'] / sum(n.values()):.0%}) in the embedding")

# %% [markdown]
# The same counts as bars, for the checkpoint at hand and for the real 0.8B computed from its config. In the real
# model a third of the parameters is the embedding table (248,320 rows of 1,024), the MLPs are the largest part of
# the layers, and the 49 norms are a rounding error. The synthetic checkpoint keeps the real vocabulary with a
# width of 64, so its embedding takes almost everything: its proportions are not the real ones.

# %% tags=["fig-params"] active="ipynb"
# parts = ("embedding", "linear attention", "full attention", "MLP", "norms")
# n_linear, n_full = cfg.layer_types.count("linear_attention"), cfg.layer_types.count("full_attention")
# labels = ["embedding", f"linear attention\n({n_linear} layers)", f"full attention\n({n_full} layers)",
#           f"MLP\n({L} layers)", f"norms\n({2 * L + 1})"]
# fig, axes = plt.subplots(1, 2, figsize=(13, 4))
# for ax, counts, title in ((axes[0], from_file, f"this checkpoint{SYNTHETIC}"),
#                           (axes[1], count_from_config(real_08b), "the real Qwen3.5-0.8B, from its config")):
#     values = np.array([counts[k] for k in parts])
#     ax.barh(labels, values / 1e6, color=["C2", "C0", "C1", "C7", "C3"])
#     for y, v in enumerate(values):
#         ax.text(v / 1e6, y, f"  {v:,} ({v / values.sum():.1%})", va="center", fontsize=9)
#     ax.set_xlim(0, values.max() / 1e6 * 1.6)
#     ax.invert_yaxis()
#     ax.set(xlabel="parameters (millions)", title=f"{title}: {values.sum() / 1e6:,.1f} M")
# fig.suptitle("Parameters by part of the model (the tied head reuses the embedding and adds none)")
# fig.tight_layout()
# plt.show()

# %% [markdown]
# ## 4. Dtypes, file size and memory
# Checkpoints are stored in bf16: 2 bytes a number. In memory the model costs the same in bf16 and twice as much
# if you upcast to fp32.

# %%
dtypes = Counter(headers[W.where[n][1]]["dtype"] for n in W)
text_bytes = sum(torch.Size(shape_of(n)).numel() * 2 for n in W if n != "lm_head.weight" or not cfg.tie_word_embeddings)
on_disk = sum(f.stat().st_size for f in path.glob("*.safetensors"))
print(f"dtypes of the text tensors: {dict(dtypes)}")
print(f"on disk: {on_disk / 1e6:,.1f} MB in {len(list(path.glob('*.safetensors')))} file(s) "
      f"(text, vision and MTP tensors plus headers)")
print(f"the text model in memory: {text_bytes / 1e6:,.1f} MB in bf16, {2 * text_bytes / 1e6:,.1f} MB in fp32")

# %% [markdown]
# ## 5. The safetensors format, read by hand
# A safetensors file is: 8 bytes (a little-endian unsigned length n), n bytes of JSON (name → dtype, shape and
# byte offsets into the data), then the raw data. Nothing is executed when reading it, unlike a pickle.

# %%
name = "norm.weight"
file, key = W.where[name]
with open(file, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    start, end = header[key]["data_offsets"]
    f.seek(8 + n + start)
    raw_bytes = f.read(end - start)
print(f"{file.name}: first 8 bytes -> header length n = {n:,}; the JSON lists {len(header) - ('__metadata__' in header)} tensors")
print(f"   {key!r}: {header[key]}")
by_hand = torch.frombuffer(bytearray(raw_bytes), dtype=torch.bfloat16).view(header[key]["shape"])
with safe_open(file, framework="pt") as lib:
    print(f"   the bytes at those offsets, as bf16: {by_hand[:4].tolist()} ...; equal to the library's tensor: "
          f"{torch.equal(by_hand, lib.get_tensor(key))}")
print(f"load_weights opened {len(W)} text tensors in {opened_ms:.1f} ms by reading headers only; "
      f"a tensor is read from disk when a chapter asks for it")

# %% [markdown]
# ## Summary
#
# - A checkpoint is `config.json` (the numbers) plus `.safetensors` files (named tensors). The real one describes
#   the multimodal model; the text model's numbers sit under `text_config`, its tensors under
#   `model.language_model.`, and the vision tower and the multi-token-prediction block sit beside them, unused here.
# - The 24 layers follow the pattern [L, L, L, F] × 6: three Gated DeltaNet (linear attention) layers, then one
#   full-attention layer. Every layer has two norms and an MLP.
# - Parameter counts follow from the config alone. The real 0.8B has about 752 M text parameters, a third of them
#   in the embedding; the tied head stores no second copy.
# - Everything is bf16: 2 bytes a parameter on disk and in memory, twice that in fp32.
# - A safetensors file is an 8-byte length, a JSON header and raw bytes: reading it executes nothing, and a
#   tensor can be read alone.
#
# Files added in this chapter: `qwen/weights.py`, `qwen/synthetic.py`, `qwen/make_tokenizer.py`, `qwen/course.py`.
#
# ## How to explain it
#
# Questions about checkpoints are really questions about what a model costs. Answer in numbers.
#
# 1. **What is in it.** A config (sizes, layer pattern, rope settings) and named tensors; the code that uses them
#    is separate, which is why parameter names matter: a loader is a loop over names with shape checks.
# 2. **How many parameters, and where.** Count from the config: embedding V·d; per attention layer the q, k, v, o
#    projections; per MLP 3·d·d_ff (gate, up, down); norms d each. For small models with big vocabularies the
#    embedding dominates — a third of the 0.8B — which is why tying the head to it (one table, used at both ends)
#    is worth it there and not in larger models.
# 3. **Memory.** Parameters × bytes: 0.75 B × 2 bytes ≈ 1.5 GB in bf16. At inference add the cache: in Qwen3.5 only
#    the 6 full-attention layers keep a K/V cache that grows with the context; the 18 linear-attention layers keep
#    a fixed-size state. That is the point of the hybrid: long context at a fraction of the cache.
# 4. **The format.** safetensors is a JSON header plus raw bytes, so it is safe (a pickle can run code when
#    loaded), fast (the data can be memory-mapped) and lazy (one tensor can be read alone).
