"""Problem 201: cases, oracle and known mistakes.

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

from practice.grading import EXACT, Case, Mistake

CODES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}
DTYPES = {v: k for k, v in CODES.items()}


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
            note="metadata" if meta else "no metadata")
        for name in rng.sample(names, min(2, len(names))):
            k += 1
            add(f"hidden {k}", "read_tensor", path, tensors[name].clone(), name, seed,
                note=f"{CODES[tensors[name].dtype]} {list(tensors[name].shape)}")

    seed = 20110  # a checkpoint-like file with a long header (many names): the length needs more than one byte
    g, rng = torch.Generator().manual_seed(seed), random.Random(seed)
    tensors = checkpoint_like(g, rng, n_layers=40)
    path = write_safetensors(tmp / "checkpoint.safetensors", tensors, {"format": "pt"})
    k += 1
    add(f"hidden {k}", "read_header", path, header_of(tensors), seed=seed, note="160 tensors, long header")
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
    add(f"hidden {k}", "read_header", path, header_of(tensors), seed=seed, note="written by safetensors")
    k += 1
    add(f"hidden {k}", "read_tensor", path, tensors["b.bias"].clone(), "b.bias", seed, note="written by safetensors")
    return cases


# ---------------------------------------------------------------- known mistakes

def _read(path, name, where, dtypes=DTYPES, reshape=True):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        info = json.loads(f.read(n))[name]
        begin, end = info["data_offsets"]
        f.seek(where(n) + begin)
        data = bytearray(f.read(end - begin))
    t = torch.frombuffer(data, dtype=dtypes[info["dtype"]])
    return t.reshape(info["shape"]) if reshape else t


def _is_torch_dtype(v):
    return (isinstance(v, dict) and v.get("__unsupported__") == "torch.dtype") or (
        isinstance(v, str) and v.startswith("torch."))


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("from_file_start", "read_tensor", lambda path, name: _read(path, name, lambda n: 0),
            _hint("looks like data_offsets were counted from the start of the file: they count from the first byte "
                  "after the header, so seek to 8 + n + begin",
                  "看起来 data_offsets 是从文件开头数的：它们从头部之后的第一个字节数起，应 seek 到 8 + n + begin")),
    Mistake("forgot_header", "read_tensor", lambda path, name: _read(path, name, lambda n: 8),
            _hint("looks like the header's n bytes were not skipped: the data starts at 8 + n",
                  "看起来没有跳过 n 字节的头部：数据从 8 + n 开始")),
    Mistake("bf16_as_f16", "read_tensor",
            lambda path, name: _read(path, name, lambda n: 8 + n, dict(DTYPES, BF16=torch.float16)),
            _hint("looks like BF16 was read as float16: they are different formats of the same size; use "
                  "torch.bfloat16", "看起来把 BF16 当成 float16 读了：两者大小相同但格式不同，应使用 torch.bfloat16")),
    Mistake("not_reshaped", "read_tensor", lambda path, name: _read(path, name, lambda n: 8 + n, reshape=False),
            _hint("looks like the tensor was not reshaped: reshape it to the header's shape",
                  "看起来没有按头部里的 shape 重塑张量")),
    Mistake("kept_metadata", "read_header", None,
            _hint('looks like "__metadata__" was kept: it is a dict of strings about the file, not a tensor; skip it',
                  '看起来保留了 "__metadata__"：它是描述文件的字符串字典，不是张量，应跳过'),
            check=lambda got, case: isinstance(got, dict) and "__metadata__" in got),
    Mistake("torch_dtype", "read_header", None,
            _hint('looks like torch dtypes were returned: return the header\'s own dtype strings, such as "BF16"',
                  '看起来返回了 torch 的 dtype：应返回头部里原样的 dtype 字符串，如 "BF16"'),
            check=lambda got, case: isinstance(got, dict) and any(
                isinstance(v, (tuple, list)) and v and _is_torch_dtype(v[0]) for v in got.values())),
    Mistake("raw_entries", "read_header", None,
            _hint("looks like the header's entries were returned as they are: return (dtype, shape) for each name",
                  "看起来原样返回了头部的条目：每个名字应对应 (dtype, shape)"),
            check=lambda got, case: isinstance(got, dict) and any(
                isinstance(v, dict) and "data_offsets" in v for v in got.values())),
]

ERROR_HINTS = [
    (r"JSONDecodeError|UnicodeDecodeError|index-sized integer|MemoryError|Expecting value|Extra data"
     r"|Unterminated string", "header_length",
     _hint("the header did not parse as JSON: the first 8 bytes are its length n, an unsigned little-endian "
           "integer (struct.unpack('<Q', f.read(8))[0]); then read exactly n bytes",
           "头部没能按 JSON 解析：前 8 个字节是头部长度 n，无符号小端整数（struct.unpack('<Q', f.read(8))[0]），"
           "接着恰好读 n 个字节")),
    (r"buffer length|not divisible|shape '\[.*\]' is invalid for input of size", "byte_range",
     _hint("the bytes read do not match the tensor: read data_offsets[1] - data_offsets[0] bytes starting at "
           "8 + n + data_offsets[0]", "读到的字节数与张量不符：应从 8 + n + data_offsets[0] 开始读 "
           "data_offsets[1] - data_offsets[0] 个字节")),
]
