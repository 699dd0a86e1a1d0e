"""Find a Qwen3.5 checkpoint, read its config, and hand out its tensors by name.

A hub checkpoint is a folder: config.json (the multimodal Qwen3_5ForConditionalGeneration layout, text fields under
`text_config`), one or more .safetensors files, and the tokenizer. Everything else in the course asks this file for
three things: `Config.load` (the numbers), `load_weights` (name -> tensor, read from disk only when asked for) and
`load` (copy tensors into a module, checking every name and shape). Weights are only ever read through safetensors.
Finding the folder (`find_model`: a path, data/, the hub cache, a download) is qwen/hub.py's job.
"""
import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open

from qwen.hub import DATA_DIR, DEFAULT_MODEL, DENSE_SIZES, SKIPPED, find_model, text_shards  # noqa: F401 (the seed's)

TEXT_PREFIXES = ("model.language_model.", "model.")  # multimodal layout first: "model.visual." must not match


@dataclass
class Config:
    """The text-model numbers. Defaults are transformers' Qwen3_5TextConfig defaults, used when a key is absent."""
    vocab_size: int = 248320  # V
    hidden_size: int = 4096  # d, the width of the residual stream
    intermediate_size: int = 12288  # I, the SwiGLU width
    num_hidden_layers: int = 32
    num_attention_heads: int = 16  # H, query heads of full attention
    num_key_value_heads: int = 4  # Hkv, shared K/V heads (GQA)
    head_dim: int = 256  # D of full attention
    linear_num_key_heads: int = 16  # Hk, DeltaNet q/k heads
    linear_num_value_heads: int = 32  # Hv, DeltaNet v heads (a multiple of Hk)
    linear_key_head_dim: int = 128  # dk
    linear_value_head_dim: int = 128  # dv
    linear_conv_kernel_dim: int = 4  # K, taps of the causal depthwise conv
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0  # transformers' fallback; the real checkpoints say 1e7
    partial_rotary_factor: float = 0.25  # only this share of each head's dims rotates
    mrope_section: list = field(default_factory=lambda: [11, 11, 10])
    layer_types: list = field(default_factory=list)  # "linear_attention" | "full_attention", one per layer
    tie_word_embeddings: bool = False
    eos_token_id: int | list | None = None
    max_position_embeddings: int = 32768
    dtype: str | None = None  # the dtype the checkpoint was saved in ("bfloat16")

    @classmethod
    def load(cls, path):
        """Read config.json from a checkpoint folder (or the file itself); multimodal or flat text layout."""
        file = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"no config.json at {file}: point --model at a Qwen3.5 checkpoint folder")
        try:
            raw = json.loads(file.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{file} is not valid JSON ({e}): download the checkpoint again") from None
        return cls.from_dict(raw, file)

    @classmethod
    def from_dict(cls, raw, file="config"):
        """The same from config.json's contents (`file` names it in error messages)."""
        kind = raw.get("model_type") if isinstance(raw, dict) else None
        if kind == "qwen3_5" and isinstance(raw.get("text_config"), dict):
            text = dict(raw["text_config"])
            text["tie_word_embeddings"] = raw.get("tie_word_embeddings", False)  # the top-level flag decides here
            text.setdefault("eos_token_id", raw.get("eos_token_id"))
            text.setdefault("dtype", raw.get("dtype") or raw.get("torch_dtype"))
        elif kind == "qwen3_5_text":
            text = dict(raw)
        else:
            raise ValueError(f"{file} is a {kind or 'non-model'} config, not a dense Qwen3.5 one (model_type "
                             f"'qwen3_5' or 'qwen3_5_text'): use a Qwen3.5 checkpoint such as {DEFAULT_MODEL}")
        rope = dict(text.get("rope_parameters") or {})
        for key in ("rope_theta", "partial_rotary_factor"):  # old configs keep these at the top level
            if key in text:
                rope.setdefault(key, text[key])
        known = {f for f in cls.__dataclass_fields__} - {"rope_theta", "partial_rotary_factor", "mrope_section"}
        cfg = cls(**{k: v for k, v in text.items() if k in known and v is not None},
                  **{k: rope[k] for k in ("rope_theta", "partial_rotary_factor", "mrope_section") if k in rope})
        if not text.get("dtype") and text.get("torch_dtype"):
            cfg.dtype = text["torch_dtype"]
        if not cfg.layer_types:  # absent: every `full_attention_interval`-th layer is full attention
            every = text.get("full_attention_interval", 4)
            cfg.layer_types = ["full_attention" if (i + 1) % every == 0 else "linear_attention"
                               for i in range(cfg.num_hidden_layers)]
        bad = set(cfg.layer_types) - {"linear_attention", "full_attention"}
        if len(cfg.layer_types) != cfg.num_hidden_layers or bad:
            raise ValueError(f"{file}: layer_types must list {cfg.num_hidden_layers} entries of 'linear_attention' or "
                             f"'full_attention', got {len(cfg.layer_types)}{' with ' + str(bad) if bad else ''}")
        return cfg


def read_header(file):
    """The safetensors header by hand: 8 bytes little-endian length n, then n bytes of JSON, then raw data.
    Returns {name: {"dtype", "shape", "data_offsets"}} and checks that the file holds all the data it promises."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else size
        if 8 + n > size:
            raise ValueError(f"{file} is truncated or not a safetensors file ({size} bytes, the header alone needs "
                             f"{8 + n}): delete it and download it again")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"{file} has a corrupt safetensors header: delete it and download it again") from None
    header.pop("__metadata__", None)
    end = 8 + n + max((t["data_offsets"][1] for t in header.values()), default=0)
    if end > size:
        raise ValueError(f"{file} is truncated: its header promises {end:,} bytes, the file has {size:,}. "
                         f"Delete it and download it again")
    return header


def text_name(key):
    """Checkpoint key -> text-model name, or None for tensors the text model does not use."""
    if key.startswith(SKIPPED):
        return None
    for prefix in TEXT_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key  # lm_head.weight


class Weights(Mapping):
    """name -> tensor for a checkpoint folder. Only headers are read up front; a tensor is read when asked for."""

    def __init__(self, folder):
        folder = Path(folder)
        index = folder / "model.safetensors.index.json"  # with one, only the files that hold text tensors are read:
        files = (text_shards(folder) if index.is_file()  # a download may lack those of the vision tower or MTP
                 else sorted(p.name for p in folder.glob("*.safetensors")))
        if not files:
            raise FileNotFoundError(f"no .safetensors files in {folder}")
        self.where = {}  # name -> (file, key in that file)
        for f in files:
            for key in read_header(folder / f):
                if (name := text_name(key)) is not None:
                    self.where[name] = (folder / f, key)
        # Tied head: the file stores E once and the head reuses it. A stored lm_head wins (as in transformers).
        if "lm_head.weight" not in self.where and Config.load(folder).tie_word_embeddings:
            self.where["lm_head.weight"] = self.where["embed_tokens.weight"]
        self.files = {}  # open safetensors handles, one per file

    def __getitem__(self, name):
        if name not in self.where:
            raise KeyError(f"no tensor {name!r} in this checkpoint")
        file, key = self.where[name]
        if file not in self.files:
            self.files[file] = safe_open(file, framework="pt")
        return self.files[file].get_tensor(key)

    def __iter__(self):
        return iter(self.where)

    def __len__(self):
        return len(self.where)


def load_weights(path):
    """All text-model tensors of the checkpoint at `path`, by prefix-stripped name, read lazily."""
    return Weights(path)


def load(module, W, prefix=""):
    """Copy W[prefix + name] into each parameter of `module`; every name must exist and every shape must match."""
    params = dict(module.named_parameters())
    missing = [prefix + n for n in params if prefix + n not in W]
    unexpected = [k for k in W if k.startswith(prefix) and k[len(prefix):] not in params]
    if missing or unexpected:
        what = "; ".join(f"{kind} {keys[:3]}{' …' if len(keys) > 3 else ''}"
                         for kind, keys in (("missing", missing), ("unexpected", unexpected)) if keys)
        raise ValueError(f"loading {type(module).__name__} from {prefix!r}: {what} (the module has "
                         f"{sorted(params)[:4]}{' …' if len(params) > 4 else ''})")
    for name, p in params.items():
        t = W[prefix + name]
        if t.shape != p.shape:
            raise ValueError(f"{prefix + name}: the checkpoint has shape {tuple(t.shape)}, "
                             f"{type(module).__name__}.{name} expects {tuple(p.shape)}")
        with torch.no_grad():
            p.copy_(t)  # keeps the module's dtype and device; bf16 -> fp32 is exact
    return module
