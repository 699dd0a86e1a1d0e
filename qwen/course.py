"""What every chapter script and notebook does first: pick a checkpoint and a device, and say so.

`--model` takes a folder, a hub id (or a size such as 2B), or `synthetic`. Without it the real Qwen3.5-0.8B is
found (or downloaded) with `find_model()`; when that is impossible, the synthetic checkpoint stands in and every run
says, in a banner, that its weights are random.
"""
import argparse
import os
import sys

import torch

from qwen.hub import ModelNotFound, find_model
from qwen.synthetic import BANNER, is_synthetic, synthetic_path


def pick_device():
    """The fastest device this machine has: CUDA, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def open_model(name=None):
    """Resolve --model to a checkpoint folder; fall back to the synthetic one only when no model was asked for."""
    if name == "synthetic" or (not name and os.environ.get("QWEN_MODEL") == "synthetic"):  # a notebook's --model
        path = synthetic_path()
    elif name:
        path = find_model(name)  # an explicit request that fails is an error, not a silent fallback
    else:
        try:
            path = find_model()
        except ModelNotFound as e:
            print(f"(no real model: {e.reason}; using the synthetic checkpoint)")
            path = synthetic_path()
    if is_synthetic(path):
        print(BANNER)
    return path


def chapter_parser(doc, **kwargs):
    """The options every chapter takes (main.py passes them on to each): --model, --device, and --figures and
    --proof (read by book.show and book.proof: save the figures to data/figures/, compare with transformers)."""
    summary = " ".join(doc.strip().split("\n\n")[0].split())  # the docstring's first paragraph, whole sentences
    parser = argparse.ArgumentParser(description=summary, **kwargs)
    parser.add_argument("--model", help="checkpoint folder, hub id (default Qwen/Qwen3.5-0.8B), size or 'synthetic'")
    parser.add_argument("--device", help="cpu, cuda or mps (default: the fastest available)")
    parser.add_argument("--figures", action="store_true", help="draw the chapter's figures into data/figures/")
    parser.add_argument("--proof", action="store_true", help="compare the chapter's module with transformers")
    return parser


def chapter_args(doc):
    """Parse the chapter's command line (chapter_parser) and open the model it names."""
    parser = chapter_parser(doc)
    args = parser.parse_args([] if "ipykernel" in sys.modules else None)  # a notebook's argv is the kernel's
    try:
        args.path = open_model(args.model)
    except (FileNotFoundError, ValueError) as e:  # bad input: one clear line, no traceback
        sys.exit(f"error: {e}")
    args.device = torch.device(args.device) if args.device else pick_device()
    return args
