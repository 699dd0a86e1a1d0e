"""Hand out a checkpoint's tensors by name, and put them into a module: the one loader.

A hub checkpoint is a folder: config.json (read once when it is opened, qwen/checkpoint.py), one or more
.safetensors files, and the tokenizer. Everything else in the course asks this file for two things: `Weights`
(name -> tensor, read from disk only when asked for, for the text model, the vision tower or the MTP head) and
`fill` (each parameter of a module becomes its tensor, every name and shape checked). The text model, the vision
tower, the MTP head, the fast path and every chapter's single layer load through `fill`. Weights are only ever read
through safetensors. Finding the folder (`find_model`: a path, data/, the hub cache, a download) is qwen/hub.py's job.
"""
import json
import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.nn as nn
from safetensors import safe_open

from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.hub import CHECKPOINT_PARTS, MTP, SKIPPED, VISION, part_files
from qwen.lang import tr

TEXT_PREFIXES = ("model.language_model.", "model.")  # multimodal layout first: "model.visual." must not match
STRIPPED_PREFIXES = {"vision": VISION, "mtp": MTP}  # the other parts' key prefixes, stripped to their modules' names


def fix() -> str:
    """What to do when the tensors do not fit the model built from config.json."""
    return tr("download the checkpoint again (the files are incomplete, or belong to another model than its "
              "config.json)",
              "重新下载检查点（文件不完整，或者和 config.json 不是同一个模型的）")


def read_header(file: str | Path) -> dict[str, dict[str, Any]]:
    """The safetensors header by hand: 8 bytes little-endian length n, then n bytes of JSON, then raw data.
    Returns {name: {"dtype", "shape", "data_offsets"}} and checks that the file holds all the data it promises."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else size
        if 8 + n > size:
            raise ValueError(tr(f"{file} is truncated or not a safetensors file ({size} bytes, the header alone "
                                f"needs {8 + n}): delete it and download it again",
                                f"{file} 不完整，或者不是 safetensors 文件（文件只有 {size} 字节，仅头部就需要 "
                                f"{8 + n} 字节）：删掉它重新下载"))
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(tr(f"{file} has a corrupt safetensors header: delete it and download it again",
                                f"{file} 的 safetensors 头部已损坏：删掉它重新下载")) from None
    header.pop("__metadata__", None)
    end = 8 + n + max((t["data_offsets"][1] for t in header.values()), default=0)
    if end > size:
        raise ValueError(tr(f"{file} is truncated: its header promises {end:,} bytes, the file has {size:,}. "
                            f"Delete it and download it again",
                            f"{file} 不完整：头部声明 {end:,} 字节，文件只有 {size:,}。删掉它重新下载"))
    return header


def text_name(key):
    """Checkpoint key -> text-model name, or None for tensors the text model does not use."""
    if key.startswith(SKIPPED):
        return None
    for prefix in TEXT_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key  # lm_head.weight


class Weights(Mapping[str, torch.Tensor]):
    """name -> tensor for one part of a checkpoint ("text", "vision" or "mtp"), names stripped of the part's prefix.
    Only headers are read up front; a tensor is read when asked for. With an index, only the files that hold the part
    are read: a download may lack those of the vision tower or MTP (qwen/hub.py part_files says so). `checkpoint`: an
    opened one (qwen/checkpoint.py), or its folder, opened here."""

    def __init__(self, checkpoint: Checkpoint | str | Path, part: str = "text") -> None:
        if part not in CHECKPOINT_PARTS:
            raise ValueError(tr(f"part must be one of {', '.join(CHECKPOINT_PARTS)}, got {part!r}",
                                f"part 只能是 {'、'.join(CHECKPOINT_PARTS)} 之一，收到的是 {part!r}"))
        checkpoint = open_checkpoint(checkpoint)
        self.folder, self.part = checkpoint.folder, part
        files = part_files(self.folder, part)
        if not files and part == "text":
            raise FileNotFoundError(tr(f"no .safetensors files in {self.folder}",
                                       f"{self.folder} 里没有 .safetensors 文件"))
        self.where = {}  # name -> (file, key in that file)
        for f in files:
            for key in read_header(f):
                if (name := self.name(key)) is not None:
                    self.where[name] = (f, key)
        # Tied head (decided when the checkpoint was opened): the file stores E once and the head reuses it.
        if part == "text" and checkpoint.tied:
            self.where["lm_head.weight"] = self.where["embed_tokens.weight"]
        self.files: dict[Path, Any] = {}  # open safetensors handles, one per file

    def name(self, key: str) -> str | None:
        """Checkpoint key -> this part's name for it, or None for a tensor of another part."""
        if self.part == "text":
            return text_name(key)
        prefix = STRIPPED_PREFIXES[self.part]
        return key[len(prefix):] if key.startswith(prefix) else None

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.where:
            raise KeyError(tr(f"no tensor {name!r} in this checkpoint", f"这个检查点里没有张量 {name!r}"))
        file, key = self.where[name]
        if file not in self.files:
            self.files[file] = safe_open(file, framework="pt")
        return self.files[file].get_tensor(key)

    def alone(self, name: str) -> torch.Tensor:
        """The same tensor through a handle of its own. safetensors maps a file into memory per handle, and every
        tensor read through it keeps that whole mapping alive, with each page ever read. A tensor read alone, used
        and dropped gives its pages back at once: fill reads the parts of a joined weight so (qwen/fast.py)."""
        file, key = self.where[name]
        with safe_open(file, framework="pt") as f:
            return f.get_tensor(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.where)

    def __len__(self) -> int:
        return len(self.where)


def sources(module, name):
    """The names a parameter is read from: its own, or, for a weight that joins projections (a module with a
    `joins` tuple, qwen/fast.py), each joined sibling's weight in order, their rows stacked."""
    owner, _, leaf = name.rpartition(".")
    joins = getattr(module.get_submodule(owner), "joins", None)
    if not joins:
        return [name]
    parent = owner.rpartition(".")[0]
    return [f"{parent}.{j}.{leaf}".lstrip(".") for j in joins]


def short(names):
    return f"{names[:3]}{' …' if len(names) > 3 else ''}" + tr(f" ({len(names)})", f"（共 {len(names)} 个）")


M = TypeVar("M", bound=nn.Module)  # fill returns the module it was given: a Qwen35 stays a Qwen35 to the type checker


def fill(module: M, W: Mapping[str, torch.Tensor], prefix: str = "", dtype: torch.dtype | None = None,
         device: str | torch.device | None = None, source: str | Path | None = None) -> M:
    """Make each parameter of `module` the tensor W[prefix + name]: THE loader, for a module built on the meta device
    (the whole model, the tower, the MTP head: no memory until a tensor is read) or with real tensors (a chapter's
    layer). Every name must exist, no name under `prefix` may be left over, every shape must match: otherwise one
    error that names the checkpoint (`source`, default W.folder) and the fix. dtype, device: None keeps a real
    parameter's own (a module built in fp32 stays fp32: bf16 widens exactly) and gives a meta one the tensor's own
    (as stored, on the cpu for a file). A tied parameter (the 0.8B's head is its embedding) is read once and stays
    tied; a joined one (qwen/fast.py) is its parts' rows stacked, built here so that no copy of the parts is kept."""
    where = source or getattr(W, "folder", None) or tr("the weights given", "传入的权重")
    kind = type(module).__name__
    names: dict[int, tuple[nn.Parameter, list[str]]] = {}  # id(parameter) -> every name it has (a tied one has two)
    for name, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), (p, []))[1].append(name)
    wanted = {n: [prefix + s for s in sources(module, n)] for _, group in names.values() for n in group}
    read = {s for group in wanted.values() for s in group}
    missing = sorted({s for s in read if s not in W})
    unexpected = sorted(k for k in W if k.startswith(prefix) and k not in read)
    if missing or unexpected:
        what = tr("; ", "；").join(f"{label} {short(keys)}" for label, keys in
                                   ((tr("missing", "缺少"), missing), (tr("unexpected", "多出"), unexpected)) if keys)
        raise ValueError(tr(f"{where}: the tensors under {prefix!r} do not fit {kind} ({what}). Fix: {fix()}",
                            f"{where}：{prefix!r} 下的张量和 {kind} 对不上（{what}）。解决办法：{fix()}"))
    for p, group in names.values():
        keys = wanted[group[0]]
        get = W.alone if len(keys) > 1 and hasattr(W, "alone") else W.__getitem__  # parts: copied, then dropped
        parts = [get(k) for k in keys]
        shape = (sum(x.shape[0] for x in parts), *parts[0].shape[1:])  # joined: the parts' rows stacked
        if shape != p.shape or any(x.shape[1:] != parts[0].shape[1:] for x in parts):
            shapes = " | ".join(str(tuple(x.shape)) for x in parts)
            raise ValueError(tr(f"{where}: {'|'.join(keys)} has shape {shapes} in the checkpoint, {kind}.{group[0]} "
                                f"expects {tuple(p.shape)}. Fix: {fix()}",
                                f"{where}：检查点里 {'|'.join(keys)} 的形状是 {shapes}，而 {kind}.{group[0]} 需要 "
                                f"{tuple(p.shape)}。解决办法：{fix()}"))
        t = parts[0] if len(parts) == 1 else torch.cat(parts)
        keep = not p.is_meta
        t = t.to(device=device or (p.device if keep else t.device), dtype=dtype or (p.dtype if keep else t.dtype))
        new = nn.Parameter(t, requires_grad=keep and p.requires_grad)
        for name in group:
            owner, _, leaf = name.rpartition(".")
            setattr(module.get_submodule(owner), leaf, new)
    return module
