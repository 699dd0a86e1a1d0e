"""Chapter 1: what is in a Qwen3.5 checkpoint — the config, the tensors, how many parameters, and the file format.

Run: python chapters/ch01_weights.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch01_weights.ipynb, is written from this file by python notebooks/sync.py.
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
# ├── config.py           + Config.load (and the vision tower's VisionConfig, the dtype names)
# ├── weights.py          + load_weights, fill, read_header
# ├── hub.py              + find_model: a folder, data/, the Hugging Face cache, or a download
# ├── synthetic.py        + the offline checkpoint: the real layout with random weights
# ├── make_tokenizer.py   + writes the synthetic checkpoint's tokenizer files
# └── course.py           + --model, the device and the banner, for every chapter
# book/                   + what the chapters show: figures, the model map, the notation table
# chapters/
# └── ch01_weights.py     + this chapter's script
# notebooks/
# ├── ch01_weights.ipynb  + this notebook, written from the script
# └── sync.py             + writes every notebook from its chapter script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch01_weights.py` (a few seconds; `--figures` saves the
# figures to `data/figures/`). Both look for the real Qwen3.5-0.8B — `--model` (in a notebook: the environment
# variable `QWEN_MODEL`, which also takes `synthetic`), then `data/Qwen3.5-0.8B/`, then the Hugging Face cache,
# then a download of about 1.7 GB — and use the synthetic checkpoint when none of that works. The synthetic
# checkpoint has the real tensor names, dtypes, depth and layer pattern, vocabulary (with the course's tokenizer
# files, rebuilt from it: chapter 2 says how they differ from the hub's) and config layout; its widths (so its
# shapes and counts) and all its values are not real. Everything made from it says so: a banner in the output,
# "synthetic weights" in the figure titles, and the real 0.8B's numbers printed beside its own.
#
# Where this chapter sits in the model: it reads every box of the map below that holds tensors.

# %%
import json
import struct
import time
from collections import Counter
from dataclasses import asdict

import torch
from safetensors import safe_open

import book
import qwen.weights
from book import ch01
from qwen.config import Config
from qwen.course import chapter_args
from qwen.sizes import REAL_FP32, REAL_NAME, REAL_TEXT_CONFIG, count_by_part, real_config, tensor_shapes
from qwen.synthetic import is_synthetic
from qwen.weights import load_weights

args = chapter_args(__doc__)
path = args.path
cfg = Config.load(path)
started = time.perf_counter()
W = load_weights(path)  # reads the headers only: no tensor data yet
opened_ms = (time.perf_counter() - started) * 1000
real = real_config()
REAL = REAL_NAME

# %%
book.show("ch01-map", book.model_map.draw, "weights")

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
print(f"{cfg.num_hidden_layers} layers, saved as {cfg.dtype}, tied head: {cfg.tie_word_embeddings}, "
      f"rope_theta {cfg.rope_theta:g}, {cfg.partial_rotary_factor:.0%} of each head's dims rotate")
print(f"layer pattern: {' '.join(pattern[i:i + 4] for i in range(0, len(pattern), 4))}  "
      f"(L = linear attention, F = full attention)")

# %% [markdown]
# The sizes get one letter each, used from here to the last chapter. The table gives each letter's config field,
# its value in the real 0.8B and in the checkpoint at hand.

# %%
notation = book.notation(path)

# %% [markdown]
# ## 2. The tensors of one layer of each kind
# Every layer has two norms and an MLP; the mixer differs. Names are the checkpoint keys with the
# `model.language_model.` prefix stripped — the same names our modules will use for their parameters. Each shape
# follows from the config by the formula beside it; the last column is the real 0.8B's shape.

# %%
def shape_of(name):
    file, key = W.where[name]
    return tuple(qwen.weights.read_header(file)[key]["shape"])  # from the header: no data read


real_shapes = tensor_shapes(REAL_TEXT_CONFIG)
first_full = cfg.layer_types.index("full_attention")
for i in (0, first_full):
    print(f"layers.{i} ({cfg.layer_types[i]}):")
    print(f"   {'':32s} {'this checkpoint':16s} {'formula':26s} {REAL}")
    for name in sorted(n for n in W if n.startswith(f"layers.{i}.")):
        rest = name[len(f"layers.{i}."):]
        formula, why = ch01.FORMULAS[rest]
        print(f"   {rest:32s} {str(shape_of(name)):16s} {formula:26s} {str(real_shapes[f'layers.{i}.{rest}']):16s}"
              f" {why}")
headers = {}
for file in sorted({f for f, _ in W.where.values()}):
    headers.update(qwen.weights.read_header(file))
skipped = Counter("mtp" if k.startswith("mtp.") else "model.visual" for k in headers
                  if k.startswith(("mtp.", "model.visual.")))
depth = raw.get("vision_config", {}).get("depth", "?")
print(f"also in the files, skipped by load_weights: {skipped['mtp']} mtp.* tensors (multi-token prediction)"
      f" and {skipped['model.visual']} model.visual.* tensors (the vision tower: {depth} block(s) in this config)")
if is_synthetic(path):
    print(f"   the synthetic vision tower has the {REAL}'s layout and depth at narrow widths; the text model skips "
          f"it, here as there (the vision tower is read on its own: qwen/vision.py)")

# %% [markdown]
# All 24 layers at once, this checkpoint on the left and the real 0.8B (its shapes from its config) on the right:
# one row per tensor name, one column per layer, coloured by the tensor's size on one scale for both. The
# [L, L, L, F] pattern is the checkerboard: `linear_attn.*` rows are filled in three layers out of four,
# `self_attn.*` rows in the fourth; the norms and the MLP are the same in every layer. The bars above add up each
# layer's parameters. The proportions differ: in the real model a linear-attention layer's mixer is the heavier
# one (`in_proj_qkv` is its largest tensor), while the synthetic checkpoint's narrow DeltaNet makes its
# full-attention layers look heavier.

# %%
file_shapes = {n: shape_of(n) for n in W if n != "lm_head.weight" or not cfg.tie_word_embeddings}
book.show("ch01-layers", ch01.layers_figure, file_shapes, cfg.layer_types, REAL_TEXT_CONFIG, is_synthetic(path))

# %% [markdown]
# ## 3. Parameters by part
# Counting needs only the shapes, and the shapes follow from the config. **Try it first:** exercise 202 asks for
# the count of each part from the config alone (`python practice/judge.py start 202`, or write it in the cell
# below and run it: the judge grades it here).

# %%
def count_parameters(config):
    raise NotImplementedError  # your code: {"embedding": ..., "lm_head": ..., ..., "total": ...} from the config


book.attempt(202, count_parameters)

# %% [markdown]
# The course's answer is `qwen/sizes.py`: every tensor's name and shape from the config (the formulas
# above), summed by part. It is the judge's oracle for exercise 202, and the tests prove it equal to transformers'
# model built from the same config. We count the file's tensors by part, check that the file holds exactly the
# shapes the config predicts, and count the real 0.8B from its config.

# %%
from_file = count_by_part(file_shapes)
predicted = tensor_shapes(asdict(cfg))
real_counts = count_by_part(real_shapes)
print(f"the file's {len(file_shapes)} tensors have exactly the names and shapes the config predicts: "
      f"{predicted == file_shapes}")
print(f"   {'part':18s} {'this checkpoint':>16s}         {REAL:>18s}")
for k in ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total"):
    print(f"   {k:18s} {from_file[k]:>16,} {from_file[k] / from_file['total']:6.1%}   "
          f"{real_counts[k]:>16,} {real_counts[k] / real_counts['total']:6.1%}")
largest_part = max(("embedding", "linear_attention", "full_attention", "mlp"), key=real_counts.get)
largest_tensor = max(real_shapes, key=lambda n: torch.Size(real_shapes[n]).numel())
print(f"{REAL}: the largest part is {largest_part} ({real_counts[largest_part] / real_counts['total']:.1%}); "
      f"the largest single tensor is {largest_tensor} ({real_counts['embedding'] / real_counts['total']:.1%})")
mixers = {}
for name, (shapes, types) in {"this checkpoint": (file_shapes, cfg.layer_types),
                              REAL: (real_shapes, real.layer_types)}.items():
    mixer, _ = ch01.per_layer(shapes, len(types))
    mixers[name] = [mixer[types.index(k)] for k in ("linear_attention", "full_attention")]
    print(f"one layer's mixer, {name}: Gated DeltaNet {mixers[name][0]:,}, full attention {mixers[name][1]:,}")
if is_synthetic(path):
    print(f"the synthetic checkpoint's shares and per-layer proportions are not the real ones (its width is "
          f"{cfg.hidden_size}, its vocabulary the real {cfg.vocab_size:,}): read the {REAL} column")

# %% [markdown]
# The same counts as bars, each part's share of its model, on one scale for both. In the real 0.8B the 24 MLPs
# are the largest part, the embedding table (248,320 rows of 1,024) a close second and the largest single
# tensor, and the 49 layer and final norms a rounding error. The synthetic checkpoint keeps the real vocabulary
# with a width of 64, so its embedding takes almost everything: its proportions are not the real ones.

# %%
book.show("ch01-params", ch01.parts_figure, from_file, real_counts, cfg.layer_types.count("linear_attention"),
          cfg.layer_types.count("full_attention"), is_synthetic(path))

# %% [markdown]
# ## 4. Dtypes, file size and memory
# Each header gives its tensor's dtype; bytes = parameters × the dtype's size. config.json's `dtype` (bfloat16)
# is what most tensors are saved in, not all: the published Qwen3.5 checkpoints keep each DeltaNet layer's `A_log`
# and gated-norm weight in fp32 (as reported by projects that load them; the synthetic checkpoint does the same).
# So count bytes from the headers, never as parameters × 2.

# %%
BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}  # safetensors dtype names -> bytes per number
dtypes = Counter(headers[W.where[n][1]]["dtype"] for n in file_shapes)
text_bytes = sum(torch.Size(s).numel() * BYTES[headers[W.where[n][1]]["dtype"]] for n, s in file_shapes.items())
on_disk = sum(f.stat().st_size for f in path.glob("*.safetensors"))
print(f"dtypes of the text tensors: {dict(sorted(dtypes.items()))} (config.json says {cfg.dtype}); in fp32: "
      f"{sorted({n.split('.', 2)[-1] for n in file_shapes if headers[W.where[n][1]]['dtype'] == 'F32'})}")
print(f"on disk: {on_disk / 1e6:,.1f} MB in {len(list(path.glob('*.safetensors')))} file(s) "
      f"(text, vision and MTP tensors plus headers)")
print(f"the text model in memory: {text_bytes / 1e6:,.1f} MB as stored, "
      f"{from_file['total'] * 4 / 1e6:,.1f} MB in fp32")
real_fp32 = sum(torch.Size(s).numel() for n, s in real_shapes.items() if n.endswith(REAL_FP32))
real_bytes = (real_counts["total"] - real_fp32) * torch.empty(0, dtype=getattr(torch, real.dtype)).element_size() \
    + real_fp32 * 4
print(f"{REAL}: {real_counts['total']:,} parameters, {real_fp32:,} of them in fp32 and the rest in {real.dtype}: "
      f"{real_bytes / 1e9:.2f} GB; {real_counts['total'] * 4 / 1e9:.2f} GB all in fp32")

# %% [markdown]
# ## 5. The safetensors format, read by hand
# A safetensors file is: 8 bytes (a little-endian unsigned length n), n bytes of JSON (name → dtype, shape and
# byte offsets into the data), then the raw data. Nothing is executed when reading it, unlike a pickle.
# **Try it first:** exercise 201 reads a header and a tensor by hand (`python practice/judge.py start 201`, or in
# the cell below).

# %%
def read_header(path):
    raise NotImplementedError  # your code: {tensor name: (dtype as in the header, shape as a tuple)}


def read_tensor(path, name):
    raise NotImplementedError  # your code: the tensor called name, from its byte range, with its dtype and shape


book.attempt(201, read_header, read_tensor)

# %% [markdown]
# Here it is done on one tensor of the checkpoint, and compared with the safetensors library.

# %%
name = "norm.weight"
file, key = W.where[name]
with open(file, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    start, end = header[key]["data_offsets"]
    f.seek(8 + n + start)
    raw_bytes = f.read(end - start)
print(f"{file.name}: first 8 bytes -> header length n = {n:,}; the JSON lists "
      f"{len(header) - ('__metadata__' in header)} tensors")
print(f"   {key!r}: {header[key]}")
by_hand = torch.frombuffer(bytearray(raw_bytes), dtype=torch.bfloat16).view(header[key]["shape"])
with safe_open(file, framework="pt") as lib:
    print(f"   the bytes at those offsets, as bf16: {by_hand[:4].tolist()} ...; equal to the library's tensor: "
          f"{torch.equal(by_hand, lib.get_tensor(key))}")
tied = " (the file's tensors, plus lm_head.weight: the tied head's name for the embedding)" \
    if cfg.tie_word_embeddings and len(W) > len(file_shapes) else ""
print(f"load_weights opened {len(W)} text names{tied} in {opened_ms:.1f} ms by reading headers only; "
      f"a tensor is read from disk when a chapter asks for it")

# %% [markdown]
# ## The code: `qwen/weights.py`
# Four things, used by every later chapter: `Config.load` (in `qwen/config.py`) reads `config.json` into a
# dataclass, `load_weights` maps names to tensors, `fill` puts tensors into a module, and `read_header` is the
# header reader under them (`find_model`, in `qwen/hub.py`, finds the folder). Here are the last three.

# %%
book.listing("qwen/weights.py", "read_header", "Weights", "fill")

# %% [markdown]
# - **`read_header`** reads the 8-byte length and the JSON header of a `.safetensors` file, and checks that the
#   file is long enough for the data the header promises: a half-downloaded file fails here, with a message that
#   says what to do, instead of deep inside a later chapter.
# - **`Weights`** is a read-only `Mapping` from the text model's names to tensors. Opening it reads only headers;
#   a tensor is read when someone indexes it. It strips the `model.language_model.` prefix, skips the vision tower
#   and the multi-token-prediction block (`Weights(path, "vision")` and `Weights(path, "mtp")` hand out those), and,
#   when the head is tied, answers `lm_head.weight` with the embedding.
# - **`fill`** makes each parameter of a module the tensor `W[prefix + name]`, and refuses a missing, an unexpected
#   or a wrongly shaped tensor, naming the checkpoint and the fix. Because our parameter names are the checkpoint's
#   names, this loop is the whole loader: no mapping table. The whole model (chapter 8), the vision tower
#   (chapter 10), the MTP head (chapter 11) and the fast path (chapter 9) all load through it.
#
# ## Show the proof
# transformers reads the same checkpoint into its own `Qwen3_5ForCausalLM`. Its tensors should be ours: the same
# names, and the same numbers to the bit, since both read the same bytes. We load it in fp32, which holds every bf16
# and fp32 number exactly (by default transformers would round the two fp32 tensors to the config's bf16).
# Skipped with one line when transformers is not installed.

# %%
def compare(transformers, path, W):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    theirs = {k.removeprefix("model."): v for k, v in model.state_dict().items()}
    worst = max(float((W[n].float() - theirs[n].float()).abs().max()) for n in W)
    print(f"transformers {transformers.__version__}: {len(theirs)} tensors, the same names as load_weights: "
          f"{sorted(theirs) == sorted(W)}; max |ours - theirs| over all of them: {worst} (the same bytes)")


book.proof(compare, path, W)

# %% [markdown]
# ## Try this
#
# - Untie the head of the real 0.8B and count again:
#   `count_by_part(tensor_shapes(dict(REAL_TEXT_CONFIG, tie_word_embeddings=False)))` — how many parameters
#   does a second (V, d) table add, and what share of the model becomes embedding and head?
# - Give the real config the class default of 32 value heads (`linear_num_value_heads=32`): which tensors change
#   shape, and by how much does a DeltaNet layer grow?
# - In section 5, read `layers.3.self_attn.q_norm.weight` instead of `norm.weight`, and read one tensor as
#   `torch.float16` instead of bf16: the same bytes give different numbers.
#
# ## Summary
#
# - A checkpoint is `config.json` (the numbers) plus `.safetensors` files (named tensors). The real one describes
#   the multimodal model; the text model's numbers sit under `text_config`, its tensors under
#   `model.language_model.`, and the vision tower and the multi-token-prediction block sit beside them, unused here.
# - The 24 layers follow the pattern [L, L, L, F] × 6: three Gated DeltaNet (linear attention) layers, then one
#   full-attention layer. Every layer has two norms and an MLP.
# - Shapes, and so parameter counts, follow from the config alone (table above). The real 0.8B has 752,393,024 text
#   parameters: the MLPs hold the most (35.1%), the embedding is the largest single tensor (33.8%), and the tied
#   head stores no second copy.
# - Bytes are parameters × the dtype's size, read from each header: the real 0.8B is saved in bf16, 2 bytes a
#   number, except A_log and the gated norm's weight in fp32 — about 1.5 GB for the text model; fp32 doubles that.
# - A safetensors file is an 8-byte length, a JSON header and raw bytes: reading it executes nothing, and a
#   tensor can be read alone.
#
# Shapes recap, in the notation of the table: the MLP is (I, d), (I, d), (d, I); full attention's `q_proj` is
# (2·H·D, d) — query and gate — and `k_proj`, `v_proj` are (Hkv·D, d); DeltaNet's `in_proj_qkv` is
# (2·Hk·dk + Hv·dv, d) and its depthwise conv (2·Hk·dk + Hv·dv, 1, K); the embedding is (V, d).
#
# Exercises: **201** read a safetensors header and tensor by hand; **202** count the parameters of each part from
# the config (`python practice/judge.py list`).
#
# Files added in this chapter: `qwen/config.py`, `qwen/weights.py`, `qwen/hub.py`, `qwen/synthetic.py`,
# `qwen/make_tokenizer.py`, `qwen/course.py`, `book/`.
#
# ## How to explain it
#
# Questions about checkpoints are really questions about what a model costs. Answer in numbers.
#
# 1. **What is in it.** A config (sizes, layer pattern, rope settings) and named tensors; the code that uses them
#    is separate, which is why parameter names matter: a loader is a loop over names with shape checks.
# 2. **How many parameters, and where.** Count from the config: the embedding V·d; per attention layer the q, k, v,
#    o projections; per MLP 3·d·I (gate, up, down); norms d each. In the 0.8B the MLPs are the largest part (35%)
#    and the embedding a close second (34%, the largest single tensor): with a vocabulary of 248k and d = 1,024, one
#    table is a third of the model, which is why tying the head to it (one table used at both ends) pays at this
#    size.
# 3. **Memory.** Parameters × bytes: 0.75 B × 2 bytes ≈ 1.5 GB in bf16. At inference add the cache: in Qwen3.5 only
#    the 6 full-attention layers keep a K/V cache that grows with the context; the 18 linear-attention layers keep
#    a fixed-size state. That is the point of the hybrid: long context at a fraction of the cache.
# 4. **The format.** safetensors is a JSON header plus raw bytes, so it is safe (a pickle can run code when
#    loaded), fast (the data can be memory-mapped) and lazy (one tensor can be read alone).
