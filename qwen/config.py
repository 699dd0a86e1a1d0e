"""The numbers a checkpoint's config.json gives: the text model's (`Config`), the vision tower's (`VisionConfig`),
and the one map from a dtype's name to torch's dtype.

config.json holds no tensors, only the numbers that decide every shape: widths, head counts, the layer pattern.
Its layout is known here and nowhere else: multimodal (`model_type` "qwen3_5", the text numbers under `text_config`,
the tower's under `vision_config`) or flat text ("qwen3_5_text"). `read_config` is the one reader of the file;
qwen/checkpoint.py calls it once when a checkpoint is opened. Everything else in qwen/ takes the numbers from
here, so this file imports nothing from qwen/ but qwen/lang.py (its errors speak both languages).
"""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from qwen.lang import tr

DEFAULT_MODEL = "Qwen/Qwen3.5-0.8B"  # the real model the course is about: its hub id, typed here once
IM_END, END_OF_TEXT = 248046, 248044  # stop on both: a chat turn ends with the first, a plain text with the second
DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32,
          "fp16": torch.float16, "float16": torch.float16}
VISION_ACTS = ("gelu_pytorch_tanh", "gelu")  # the activations the vision tower's MLP knows (qwen/vision.py)
WIDTHS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
          "linear_value_head_dim", "linear_conv_kernel_dim")  # Config's sizes: whole numbers of at least 1


def dtype_of(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """A dtype's name ("bf16", "bfloat16", "fp32", ...), a torch dtype or None -> the torch dtype, or None."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(tr(f"dtype {dtype!r}: use one of {', '.join(DTYPES)} or a torch dtype",
                        f"dtype {dtype!r} 无效：请用 {'、'.join(DTYPES)} 之一，或者直接给一个 torch dtype"))


def config_file(path: str | Path) -> Path:
    """config.json of a checkpoint folder, or the file itself."""
    return Path(path) / "config.json" if Path(path).is_dir() else Path(path)


def read_config(path: str | Path) -> dict:
    """config.json of a checkpoint folder (or the file itself) as a dict: the one place the file is read."""
    file = config_file(path)
    if not file.is_file():
        raise FileNotFoundError(tr(f"no config.json at {file}: point --model at a Qwen3.5 checkpoint folder",
                                   f"{file} 处没有 config.json：--model 应当指向一个 Qwen3.5 检查点文件夹"))
    return read_json(file)


def read_json(file: Path) -> Any:
    """One of a checkpoint's small JSON files (config, generation config, index, tokenizer config); a damaged one is
    one error, in the learner's language, that says to download it again. What it holds is the caller's to check."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(tr(f"{file} is not valid JSON ({e}): download the checkpoint again",
                            f"{file} 不是有效的 JSON（{e}）：请重新下载检查点")) from None


def weight_map(index: Path) -> dict[str, str]:
    """model.safetensors.index.json's map from each tensor to its weight file."""
    raw = read_json(index)
    raw = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(raw, dict):
        raise ValueError(tr(f"{index} has no weight_map: download the checkpoint again",
                            f"{index} 里没有 weight_map：请重新下载检查点"))
    return raw


def eos_ids(raw: dict) -> set[int]:
    """Every end-of-sequence id a config names: its own eos_token_id and, in the multimodal layout, its
    text_config's (a generation_config.json has only the first)."""
    ids = set()
    for eos in (raw.get("eos_token_id"), (raw.get("text_config") or {}).get("eos_token_id")):
        ids.update(eos if isinstance(eos, list) else [] if eos is None else [eos])
    return ids


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
    mrope_section: list[int] = field(default_factory=lambda: [11, 11, 10])
    layer_types: list[str] = field(default_factory=list)  # "linear_attention" | "full_attention", one per layer
    tie_word_embeddings: bool = False
    eos_token_id: int | list[int] | None = None
    max_position_embeddings: int = 32768
    dtype: str | None = None  # the dtype the checkpoint was saved in ("bfloat16")

    @classmethod
    def load(cls, path: str | Path) -> "Config":
        """The text numbers of config.json in a checkpoint folder (or of the file itself), without opening the
        checkpoint: for a config alone. A checkpoint's own is qwen.checkpoint.open_checkpoint(path).config."""
        return cls.from_dict(read_config(path), config_file(path))

    @classmethod
    def from_dict(cls, raw: dict, file: str | Path = "config") -> "Config":
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
            raise ValueError(tr(f"{file} is a {kind or 'non-model'} config, not a dense Qwen3.5 one (model_type "
                                f"'qwen3_5' or 'qwen3_5_text'): use a Qwen3.5 checkpoint such as {DEFAULT_MODEL}",
                                f"{file} 是 {kind or '非模型'} 的 config，不是稠密 Qwen3.5 的（model_type 应为 "
                                f"'qwen3_5' 或 'qwen3_5_text'）：请换用 Qwen3.5 检查点，例如 {DEFAULT_MODEL}"))
        rope = dict(text.get("rope_parameters") or {})
        for key in ("rope_theta", "partial_rotary_factor"):  # old configs keep these at the top level
            if key in text:
                rope.setdefault(key, text[key])
        known = {f for f in cls.__dataclass_fields__} - {"rope_theta", "partial_rotary_factor", "mrope_section"}
        cfg = cls(**{k: v for k, v in text.items() if k in known and v is not None},
                  **{k: rope[k] for k in ("rope_theta", "partial_rotary_factor", "mrope_section") if k in rope})
        cfg.check_widths(file)
        if not text.get("dtype") and text.get("torch_dtype"):
            cfg.dtype = text["torch_dtype"]
        if not cfg.layer_types:  # absent: every `full_attention_interval`-th layer is full attention
            every = text.get("full_attention_interval", 4)
            cfg.layer_types = ["full_attention" if (i + 1) % every == 0 else "linear_attention"
                               for i in range(cfg.num_hidden_layers)]
        bad = set(cfg.layer_types) - {"linear_attention", "full_attention"}
        if len(cfg.layer_types) != cfg.num_hidden_layers or bad:
            raise ValueError(tr(f"{file}: layer_types must list {cfg.num_hidden_layers} entries of 'linear_attention' "
                                f"or 'full_attention', got {len(cfg.layer_types)}{' with ' + str(bad) if bad else ''}",
                                f"{file}：layer_types 应当列出 {cfg.num_hidden_layers} 项，每项是 'linear_attention' "
                                f"或 'full_attention'，实际有 {len(cfg.layer_types)} 项"
                                f"{'，其中有 ' + str(bad) if bad else ''}"))
        return cfg

    def check_widths(self, file: str | Path = "config") -> None:
        """The numbers every shape is built from, checked where config.json is read: whole numbers of at least 1, and
        head counts that share out evenly (GQA: H/Hkv query heads per key/value head; DeltaNet: Hv/Hk value heads per
        query/key head). A damaged or hand-edited config stops here, naming the field, not deep inside a layer."""
        for name in WIDTHS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(tr(f"{file}: {name} is {value!r}; it must be a whole number of at least 1",
                                    f"{file}：{name} 的值是 {value!r}，应为不小于 1 的整数"))
        for many, few, why in (("num_attention_heads", "num_key_value_heads",
                                tr("each key/value head serves the same number of query heads (GQA)",
                                   "每个键值头要分到同样多的查询头（GQA）")),
                               ("linear_num_value_heads", "linear_num_key_heads",
                                tr("each DeltaNet query/key head serves the same number of value heads",
                                   "DeltaNet 的每个键头要分到同样多的值头"))):
            n, m = getattr(self, many), getattr(self, few)
            if n % m:
                raise ValueError(tr(f"{file}: {many} {n} is not a multiple of {few} {m}: {why}",
                                    f"{file}：{many}（{n}）不是 {few}（{m}）的整数倍：{why}"))


@dataclass
class VisionConfig:
    """config.json's vision_config (defaults: transformers' Qwen3_5VisionConfig) and the placeholder token ids."""
    depth: int = 27  # blocks; 12 in the 0.8B
    hidden_size: int = 1152  # C, the tower's width; 768 in the 0.8B
    intermediate_size: int = 4304  # MLP width; 3072 in the 0.8B
    num_heads: int = 16  # 12 in the 0.8B: head size 64
    in_channels: int = 3
    patch_size: int = 16  # P
    temporal_patch_size: int = 2  # Tp
    spatial_merge_size: int = 2  # m
    out_hidden_size: int = 3584  # the text width d; 1024 in the 0.8B
    num_position_embeddings: int = 2304  # a 48 × 48 learned grid
    hidden_act: str = "gelu_pytorch_tanh"  # the blocks' MLP; the merger uses the exact GELU
    rope_theta: float = 10000.0
    image_token_id: int = 248056  # <|image_pad|>
    vision_start_token_id: int = 248053  # <|vision_start|>
    vision_end_token_id: int = 248054  # <|vision_end|>

    @classmethod
    def from_dict(cls, raw: dict, file: str | Path = "config") -> "VisionConfig | None":
        """The tower's numbers from config.json's contents, or None when it describes no vision tower (a text-only
        checkpoint; `file` names it in error messages)."""
        if not isinstance(raw.get("vision_config"), dict):
            return None
        v = raw["vision_config"]
        fields = {k: v[k] for k in cls.__dataclass_fields__ if k in v}
        ids = ("image_token_id", "vision_start_token_id", "vision_end_token_id")  # top-level keys
        fields.update({k: raw[k] for k in ids if k in raw})
        if "rope_theta" in (v.get("rope_parameters") or {}):
            fields["rope_theta"] = v["rope_parameters"]["rope_theta"]
        if fields.get("hidden_act", cls.hidden_act) not in VISION_ACTS:
            raise ValueError(tr(f"{file}: vision hidden_act {fields['hidden_act']!r} is not one of "
                                f"{sorted(VISION_ACTS)}",
                                f"{file}：vision_config 的 hidden_act 是 {fields['hidden_act']!r}，"
                                f"不在视觉塔支持的 {sorted(VISION_ACTS)} 之中"))
        return cls(**fields)
