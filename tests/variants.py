"""Checkpoints the synthetic one does not cover, made from it: a copy with a rewritten config.json and some tensors
re-drawn or removed (written with safetensors), for running the chapters on checkpoints they have not seen.
A helper module, not a test module: test modules import its functions."""
import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def variant(synthetic, out, vision=None, redraw=None, drop=(), remove=()):
    """A copy of checkpoint folder `synthetic` at `out`: `vision` updates config.json's vision_config, `redraw`
    ({name: shape}) replaces those tensors by new random ones of that shape (bf16, std 1/√fan-in, seed fixed),
    every tensor whose name starts with one of `drop` is removed, and the files named in `remove` are left out."""
    synthetic, out = Path(synthetic), Path(out)
    shutil.copytree(synthetic, out, ignore=shutil.ignore_patterns(*remove) if remove else None)
    config = json.loads((out / "config.json").read_text())
    config["vision_config"].update(vision or {})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    g = torch.Generator().manual_seed(7)
    index_file = out / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    for file in sorted(out.glob("*.safetensors")):
        tensors = load_file(file)
        keep = {k: v for k, v in tensors.items() if not k.startswith(tuple(drop))}
        new = {name: (torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))).to(torch.bfloat16)
               for name, shape in (redraw or {}).items() if name in keep}
        if new or len(keep) < len(tensors):
            save_file({**keep, **new}, file, metadata={"format": "pt"})
    index["weight_map"] = {k: f for k, f in index["weight_map"].items() if not k.startswith(tuple(drop))}
    index_file.write_text(json.dumps(index, indent=2))
    return out


def four_pixel_patches(synthetic, out, depth=None):
    """The synthetic checkpoint with a tower that cuts 4 × 4-pixel patches (its patch embedding re-drawn to
    (C, 3, 2, 4, 4)) and no preprocessor_config.json: the image settings must then come from the vision config.
    `depth` keeps only the tower's first blocks (a 4-pixel tower reads 16 times the patches of a 16-pixel one)."""
    vision = json.loads((Path(synthetic) / "config.json").read_text())["vision_config"]
    depth = depth or vision["depth"]
    return variant(synthetic, out, vision={"patch_size": 4, "depth": depth},
                   redraw={"model.visual.patch_embed.proj.weight": (vision["hidden_size"], 3, 2, 4, 4)},
                   drop=[f"model.visual.blocks.{i}." for i in range(depth, vision["depth"])],
                   remove=("preprocessor_config.json",))


MTP_DROPPED = ("mtp.layers.0.mlp.", "mtp.fc.weight")


def incomplete_mtp(synthetic, out):
    """The synthetic checkpoint with part of its mtp.* block gone (the MTP layer's MLP and fc): as a download or a
    conversion that kept only some of the block would leave it."""
    return variant(synthetic, out, drop=MTP_DROPPED)
