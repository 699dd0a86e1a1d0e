"""Problem 201: cases and oracle (the known mistakes are in mistakes.toml).

Oracle: the files are written here, so the answer is known by construction (hand math). Most are written byte by
byte (write_safetensors below) so that header order, data order, padding and metadata vary; one is written by the
safetensors library itself. tests/test_practice.py opens every file with safetensors.safe_open and checks that it
reads the same names, dtypes, shapes and values.
"""
import json
import random
import struct

import torch
from safetensors.torch import save_file

from practice.grading import EXACT, Case
from qwen.lang import tr

CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def write_safetensors(path, tensors, metadata=None, data_order=None, header_order=None, metadata_first=True):
    """The format: 8 bytes little-endian length n, n bytes of JSON (padded with spaces to a multiple of 8), then
    the tensors' bytes; each tensor's data_offsets [begin, end) count from the first byte after the header."""
    data_order = list(data_order or tensors)
    entries, blobs, offset = {}, [], 0
    for name in data_order:
        blob = raw_bytes(tensors[name])
        entries[name] = {"dtype": CODES[tensors[name].dtype], "shape": list(tensors[name].shape),
                         "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = {}
    if metadata is not None and metadata_first:
        header["__metadata__"] = metadata
    for name in header_order or data_order:
        header[name] = entries[name]
    if metadata is not None and not metadata_first:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


def random_tensor(g, dtype, shape):
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    high = 256 if dtype == torch.uint8 else 2 ** 20
    return torch.randint(0 if dtype == torch.uint8 else -high, high, shape, generator=g, dtype=dtype)


def header_of(tensors):
    return {name: (CODES[t.dtype], tuple(t.shape)) for name, t in tensors.items()}


def checkpoint_like(g, rng, n_layers):
    """Tensors named and shaped like a (tiny) Qwen3.5 checkpoint, in bf16, with an fp32 A_log."""
    t = {"model.language_model.embed_tokens.weight": random_tensor(g, torch.bfloat16, (50, 8)),
         "model.language_model.norm.weight": random_tensor(g, torch.bfloat16, (8,))}
    for i in range(n_layers):
        p = f"model.language_model.layers.{i}."
        t[p + "input_layernorm.weight"] = random_tensor(g, torch.bfloat16, (8,))
        t[p + "linear_attn.A_log"] = random_tensor(g, torch.float32, (2,))
        t[p + "linear_attn.conv1d.weight"] = random_tensor(g, torch.bfloat16, (12, 1, 4))
        t[p + "mlp.up_proj.weight"] = random_tensor(g, torch.bfloat16, (rng.choice([16, 24]), 8))
    return t


def make_cases(tmp):
    tmp.mkdir(parents=True, exist_ok=True)
    cases = []

    def add(label, fn, path, expected, name=None, seed=None, note=""):
        args = [("path", str(path))] + ([("name", name)] if name is not None else [])
        cases.append(Case(label, fn, args, expected, EXACT, seed, note))

    example = {"embed.weight": torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
               "norm.weight": torch.tensor([0.5, -1.0]).bfloat16()}
    path = write_safetensors(tmp / "example.safetensors", example, metadata={"format": "pt"})
    add("example 1", "read_header", path, header_of(example))
    add("example 2", "read_tensor", path, example["embed.weight"].clone(), "embed.weight")
    add("example 3", "read_tensor", path, example["norm.weight"].clone(), "norm.weight")

    k = 0
    for seed in range(20101, 20107):
        g, rng = torch.Generator().manual_seed(seed), random.Random(seed)
        tensors = {}
        for _ in range(rng.randint(2, 6)):
            dtype = rng.choice([torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8])
            shape = tuple(rng.randint(1, 5) for _ in range(rng.randint(0, 3)))  # rank 0 (a scalar) to 3
            tensors[f"layers.{rng.randint(0, 30)}.{rng.choice(['mlp', 'attn', 'norm'])}.{len(tensors)}"] = \
                random_tensor(g, dtype, shape)
        names = list(tensors)
        data_order = rng.sample(names, len(names))  # the bytes need not follow the header's order
        header_order = rng.sample(names, len(names))
        meta = rng.choice([None, {"format": "pt"}, {"format": "pt", "note": "x" * rng.randint(0, 40)}])
        path = write_safetensors(tmp / f"hidden{seed}.safetensors", tensors, meta, data_order, header_order,
                                 metadata_first=rng.random() < 0.5)
        k += 1
        add(f"hidden {k}", "read_header", path, header_of(tensors), seed=seed,
            note=tr("metadata", "带元数据") if meta else tr("no metadata", "不带元数据"))
        for name in rng.sample(names, min(2, len(names))):
            k += 1
            add(f"hidden {k}", "read_tensor", path, tensors[name].clone(), name, seed,
                note=f"{CODES[tensors[name].dtype]} {list(tensors[name].shape)}")

    seed = 20110  # a checkpoint-like file with a long header (many names): the length needs more than one byte
    g, rng = torch.Generator().manual_seed(seed), random.Random(seed)
    tensors = checkpoint_like(g, rng, n_layers=40)
    path = write_safetensors(tmp / "checkpoint.safetensors", tensors, {"format": "pt"})
    k += 1
    add(f"hidden {k}", "read_header", path, header_of(tensors), seed=seed,
        note=tr("160 tensors, long header", "160 个张量，头部很长"))
    for name in ("model.language_model.layers.39.mlp.up_proj.weight",
                 "model.language_model.layers.7.linear_attn.A_log"):
        k += 1
        add(f"hidden {k}", "read_tensor", path, tensors[name].clone(), name, seed)

    seed = 20111  # written by the safetensors library itself
    g = torch.Generator().manual_seed(seed)
    tensors = {"a.weight": random_tensor(g, torch.bfloat16, (3, 4)), "b.bias": random_tensor(g, torch.float32, (5,)),
               "c.ids": random_tensor(g, torch.int64, (2, 2))}
    path = tmp / "library.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt"})
    k += 1
    library = tr("written by safetensors", "由 safetensors 库写出")
    add(f"hidden {k}", "read_header", path, header_of(tensors), seed=seed, note=library)
    k += 1
    add(f"hidden {k}", "read_tensor", path, tensors["b.bias"].clone(), "b.bias", seed, note=library)
    return cases
