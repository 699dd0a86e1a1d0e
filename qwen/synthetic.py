"""A synthetic Qwen3.5 checkpoint: the real layout with random weights, so the whole course runs offline.

Real: the config.json layout (the multimodal composite config), tensor names, dtypes (bf16, except the two
DeltaNet tensors the real checkpoints keep in fp32), depth and the [L,L,L,F]x6 pattern, and the vocabulary (the
tokenizer files are the course's own, rebuilt from Qwen's published vocabulary by qwen/make_tokenizer.py). Not real:
the widths (d = 64, not 1024), so every shape and parameter count, and every value. Value heads are twice the key
heads (Hv = 2·Hk, as in the 4B and 9B sizes; the 0.8B and 2B have Hv = Hk, the 27B Hv = 3·Hk, qwen/family.py) so
that the grouping of value heads onto key heads is exercised. The multi-token-prediction block (`mtp.*`, chapter
11) and the vision tower (`model.visual.*`, with preprocessor_config.json; the real 0.8B's depth) have the real
layout with narrow widths. Every name and shape comes from qwen/sizes.py (checkpoint_shapes), each value from
_value below.

Honest by construction: each value is drawn independently around the value training starts from (transformers'
init: 0 for the zero-centred norm weights, 1 for the gated norm's and dt_bias), with a spread so that a wrong
convention shows; projections have std 1/sqrt(fan_in) so activations keep unit scale. Nothing changes with depth and
nothing is tuned to resemble the trained model: no pattern in these numbers is a finding. Run: python -m qwen.synthetic
"""
import json
import math
import os
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from qwen.config import DEFAULT_MODEL
from qwen.hub import DATA_DIR
from qwen.lang import tr
from qwen.sizes import CHECKPOINT_PREFIXES, REAL_FP32, REAL_VISION_CONFIG, checkpoint_shapes

VERSION = 5  # bump when the layout or the numbers change: an older data/synthetic is then rebuilt
MARKER = "qwen_by_hand_synthetic"  # key in config.json that says "these weights are random"


def banner(notebook: bool) -> str:
    """What a run on this checkpoint prints first, and how to get the real model instead: a script takes --model; a
    notebook has no command line, so it reads the environment variable QWEN_MODEL, set where Jupyter starts."""
    real = DEFAULT_MODEL
    if notebook:
        how = tr(f"QWEN_MODEL={real} in the environment Jupyter starts from (QWEN_MODEL={real} bash course.sh lab); "
                 "a download of about 1.7 GB",
                 f"在启动 Jupyter 的环境里设 QWEN_MODEL={real}（QWEN_MODEL={real} bash course.sh lab），"
                 "需下载约 1.7 GB")
    else:
        how = tr(f"--model {real} (a download of about 1.7 GB)", f"加上 --model {real}（需下载约 1.7 GB）")
    return tr("*** SYNTHETIC WEIGHTS: random numbers in the real Qwen3.5 layout. Real: tensor names, dtypes, depth and "
              "layer pattern, vocabulary (Qwen's published table; the tokenizer files are the course's rebuild of it), "
              "config layout. Not real: widths, so shapes and parameter counts, and every value. ***\n"
              f"*** For the real model: {how}. ***",
              "*** 合成权重：按真实 Qwen3.5 的布局生成的随机数。与真实模型一致的：张量名、数据类型、层数与各层类型的"
              "排列、词表（Qwen 公开的词表，分词器文件由本课程据此重建）、config 的结构；与真实模型不同的：各层宽度"
              "（因此形状和参数量也不同），以及每一个数值。***\n"
              f"*** 要用真实模型：{how}。***")


TEXT = dict(  # the real 0.8B text config with narrow widths
    vocab_size=248320, hidden_size=64, intermediate_size=192, num_hidden_layers=24,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_conv_kernel_dim=4, hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=262144,
    rope_parameters=dict(rope_type="default", rope_theta=10_000_000, partial_rotary_factor=0.25,
                         mrope_section=[3, 3, 2], mrope_interleaved=True),  # 8 rotary frequencies: 3 + 3 + 2
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)],
    full_attention_interval=4, attn_output_gate=True, mamba_ssm_dtype="float32",
    mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False, attention_bias=False, attention_dropout=0.0,
    initializer_range=0.02, use_cache=True, tie_word_embeddings=True, eos_token_id=248044, dtype="bfloat16",
    model_type="qwen3_5_text",
)
VISION = dict(  # the real 0.8B vision_config (qwen/sizes.py) with narrow widths: 768 -> 32
    dict(model_type="qwen3_5", deepstack_visual_indexes=[], **REAL_VISION_CONFIG),
    hidden_size=32, intermediate_size=128, num_heads=2, out_hidden_size=64,
)
PREPROCESSOR = dict(  # preprocessor_config.json as published with Qwen3.5 (from public copies of the published file)
    size=dict(longest_edge=16777216, shortest_edge=65536), patch_size=16, temporal_patch_size=2, merge_size=2,
    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5], processor_class="Qwen3VLProcessor",
    image_processor_type="Qwen2VLImageProcessorFast",
)


def synthetic_path(root: str | Path = DATA_DIR) -> Path:
    """The synthetic checkpoint's folder, generated on first use (a few seconds) and reused afterwards."""
    out = Path(root) / "synthetic"
    if not is_synthetic(out) or json.loads((out / "config.json").read_text())[MARKER]["version"] != VERSION:
        print(tr(f"generating the synthetic checkpoint in {out} (first use only, a few seconds)...",
                 f"正在 {out} 生成合成检查点（只有第一次使用时才生成，几秒钟就好）……"), file=sys.stderr)
        generate(out)
    return out


def is_synthetic(path: str | Path) -> bool:
    file = Path(path) / "config.json"
    return file.is_file() and MARKER in json.loads(file.read_text())


def _value(name, shape, g):
    """A random value for the tensor `name` of `shape`, drawn around the value training starts from."""
    def normal(std, mean=0.0):
        return torch.randn(*shape, generator=g) * std + mean

    if name.endswith("A_log"):
        return torch.log(torch.rand(*shape, generator=g) * 15.99 + 0.01)  # as transformers' init
    if name.endswith("dt_bias"):
        return normal(0.5, mean=1.0)  # around its initial 1
    if name.endswith("embed_tokens.weight"):
        return normal(0.02)
    if name.endswith("pos_embed.weight"):  # large enough that a wrong resampling of the position grid shows
        return normal(0.5)
    if name.endswith(".bias"):  # the vision tower's
        return normal(0.02)
    if len(shape) == 1:  # a norm's weight: the zero-centred RMSNorms (scale 1 + w) around their initial 0; the
        plain = (name.endswith("linear_attn.norm.weight")  # the gated norm's and
                 or name.startswith(CHECKPOINT_PREFIXES["vision"]))
        return normal(0.1, mean=1.0 if plain else 0.0)  # the tower's LayerNorms' plain weights around 1
    return normal(1 / math.sqrt(math.prod(shape[1:])))  # a projection: std 1/sqrt(fan_in) keeps unit scale


def _tensors(seed=0, t=TEXT):
    """Every tensor of the checkpoint with text config t, keyed by its real name (qwen.sizes.checkpoint_shapes: the
    text model, the MTP block, the vision tower), in its real dtype. Deterministic for a given seed."""
    g = torch.Generator().manual_seed(seed)
    W = {name: _value(name, shape, g) for name, shape in checkpoint_shapes(t, VISION).items()}
    return {k: x.to(torch.float32 if k.endswith(REAL_FP32) else torch.bfloat16).contiguous() for k, x in W.items()}


def generate(out, seed=0, layers=None):
    """Write the checkpoint to `out`, atomically: built in a temporary folder, then renamed into place. `layers`
    keeps only the first `layers` decoder layers (the pattern unchanged), to test code on a shallower checkpoint."""
    from qwen.make_tokenizer import write_tokenizer_files

    out = Path(out)
    text = TEXT if layers is None else dict(TEXT, num_hidden_layers=layers, layer_types=TEXT["layer_types"][:layers])
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    W = _tensors(seed, text)
    # two shards, like the larger real checkpoints: the embedding (and vision tower) in one, the rest in the other
    first = {k: x for k, x in W.items() if k.startswith(("model.language_model.embed_tokens", "model.visual."))}
    shards = [first, {k: x for k, x in W.items() if k not in first}]
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        name = f"model.safetensors-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, tmp / name, metadata={"format": "pt"})
        weight_map.update({k: name for k in shard})
    total = sum(x.numel() * x.element_size() for x in W.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
              "text_config": text, "vision_config": VISION, "image_token_id": 248056, "video_token_id": 248057,
              "vision_start_token_id": 248053, "vision_end_token_id": 248054, "tie_word_embeddings": True,
              "transformers_version": "5.24.0",
              MARKER: {"version": VERSION, "seed": seed, "note": "random weights, real layout; see qwen/synthetic.py"}}
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    (tmp / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    write_tokenizer_files(tmp)
    if out.exists():  # an older version, or a half-written one from an interrupted run
        shutil.rmtree(out)
    try:
        tmp.rename(out)
    except OSError:  # another process finished first: keep its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    path = synthetic_path(sys.argv[1] if len(sys.argv) > 1 else DATA_DIR)
    print(tr(f"synthetic Qwen3.5 checkpoint at {path}", f"合成的 Qwen3.5 检查点位于 {path}"))
