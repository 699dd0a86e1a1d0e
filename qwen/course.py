"""What every chapter script and notebook does first: pick a checkpoint and a device, and say so.

`--model` takes a folder, a hub id (or a size such as 2B), or `synthetic`. Without it the real Qwen3.5-0.8B is
found (or downloaded) with `find_model()`; when that is impossible, the synthetic checkpoint stands in and every run
says, in a banner, that its weights are random. The folder is opened once (qwen/checkpoint.py): a chapter reads
`args.checkpoint.config` and hands `args.checkpoint` to the loaders.
"""
import argparse
import os
import sys
from typing import Any

import torch

from qwen import lang
from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.config import DEFAULT_MODEL
from qwen.hub import ModelNotFound, find_model
from qwen.synthetic import banner, synthetic_path


def pick_device() -> torch.device:
    """The fastest device this machine has: CUDA, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def open_model(name: str | None = None) -> Checkpoint:
    """Resolve --model to a checkpoint folder and open it (qwen/checkpoint.py); fall back to the synthetic one only
    when no model was asked for."""
    if name == "synthetic" or (not name and os.environ.get("QWEN_MODEL") == "synthetic"):  # a notebook's --model
        folder = synthetic_path()
    elif name:
        folder = find_model(name)  # an explicit request that fails is an error, not a silent fallback
    else:
        try:
            folder = find_model()
        except ModelNotFound as e:
            print(lang.tr(f"(no real model: {e.reason}; using the synthetic checkpoint)",
                          f"（找不到真实模型：{e.reason}；改用合成检查点）"))
            folder = synthetic_path()
    checkpoint = open_checkpoint(folder)
    if checkpoint.synthetic:
        print(banner(notebook="ipykernel" in sys.modules))  # a notebook has no --model: it reads QWEN_MODEL
    return checkpoint


def summary(doc: str) -> str:
    """A script's description for --help: its docstring's first paragraph; in Chinese, the paragraph after it when
    that one is Chinese (whole sentences, on one line)."""
    paragraphs = [" ".join(p.split()) for p in doc.strip().split("\n\n")]
    chinese = len(paragraphs) > 1 and any("\u4e00" <= ch <= "\u9fff" for ch in paragraphs[1])
    return paragraphs[1] if chinese and lang.language() == "zh" else paragraphs[0]


def chapter_parser(doc: str, every_chapter: bool = False, **kwargs: Any) -> argparse.ArgumentParser:
    """The options every chapter takes (main.py passes them on to each): --model, --device, --figures and --proof
    (read by book.show and book.proof: save the figures to data/figures/, compare with transformers), and --lang.
    The language is set from --lang before the parser exists, so that argparse's own words and every help text speak
    it. every_chapter: the help of main.py, which runs them all (its --figures draws every chapter's figures)."""
    if "ipykernel" not in sys.modules:
        lang.use(lang.from_command_line(sys.argv[1:]))
    tr = lang.tr
    parser = argparse.ArgumentParser(description=summary(doc), **kwargs)
    parser.add_argument("--model", help=tr(f"checkpoint folder, hub id (default {DEFAULT_MODEL}), size or 'synthetic'",
                                           f"检查点文件夹、Hugging Face 模型名（默认 {DEFAULT_MODEL}）、"
                                           "尺寸或 'synthetic'"))
    parser.add_argument("--device", help=tr("cpu, cuda or mps (default: the fastest available)",
                                            "cpu、cuda 或 mps（默认：可用设备中最快的）"))
    if every_chapter:
        figures = tr("draw every chapter's figures into data/figures/", "把每一章的图都画到 data/figures/")
        proof = tr("compare each chapter's module with transformers", "把每一章的模块都与 transformers 对照")
    else:
        figures = tr("draw the chapter's figures into data/figures/", "把本章的图画到 data/figures/")
        proof = tr("compare the chapter's module with transformers", "把本章的模块与 transformers 对照")
    parser.add_argument("--figures", action="store_true", help=figures)
    parser.add_argument("--proof", action="store_true", help=proof)
    parser.add_argument("--lang", choices=lang.LANGUAGES,
                        help=tr("the language it speaks: en or zh (default: QWEN_LANG, else the locale)",
                                "输出语言：en 或 zh（默认取 QWEN_LANG，没有则按系统 locale）"))
    return parser


def chapter_args(doc: str) -> argparse.Namespace:
    """Parse the chapter's command line (chapter_parser) and open the checkpoint it names: args.checkpoint."""
    parser = chapter_parser(doc)
    args = parser.parse_args([] if "ipykernel" in sys.modules else None)  # a notebook's argv is the kernel's
    lang.use(args.lang)
    try:
        args.checkpoint = open_model(args.model)
    except (FileNotFoundError, ValueError) as e:  # bad input: one clear line, no traceback
        sys.exit(lang.tr(f"error: {e}", f"错误：{e}"))
    args.device = torch.device(args.device) if args.device else pick_device()
    return args
