"""Chapter 1: what is in a Qwen3.5 checkpoint — the config, the tensors, how many parameters, and the file format.

Run: python chapters/ch01_weights.py [--model PATH|HUB_ID|synthetic]
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
# ├── weights.py     + new: Config.load, find_model, load_weights, load
# ├── synthetic.py   + new: the offline checkpoint with the real layout
# └── course.py      + new: --model, device, banner (shared by every chapter)
# chapters/ch01_weights.py   + this chapter's script
# ```

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
