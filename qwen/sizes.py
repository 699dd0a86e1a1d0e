"""How big a Qwen3.5 is, from its config alone: every tensor by name and shape (text model, vision tower, MTP block;
so every parameter count), the real 0.8B's config. The dense sizes of the family and their caches: qwen/family.py.

Model knowledge, in one place for everything that uses it: chapter 1 counts with `tensor_shapes` (it is also the
oracle of problem 202 and builds problem 205's state dicts), chapter 10 counts the tower with `vision_shapes`,
chapter 11 lists the MTP block with `mtp_shapes`, the synthetic checkpoint (qwen/synthetic.py) draws a value for
each name `checkpoint_shapes` lists, and every chapter prints the
real 0.8B's numbers beside the checkpoint's own, marked "real Qwen3.5-0.8B". tests/test_practice.py proves the
shapes equal, name by name and shape by shape, to transformers' modules built on the meta device (the text model,
the vision tower, the MTP layer), and to the tensors of the synthetic checkpoint. Each part's names are its own
module's parameter names; CHECKPOINT_PREFIXES says where each part sits in a checkpoint's keys.
"""
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from qwen.config import Config
from qwen.lang import tr

# ---------------------------------------------------------------- the real Qwen3.5-0.8B

REAL_NAME = "real Qwen3.5-0.8B"
# The `text_config` of the published config.json (Qwen/Qwen3.5-0.8B on the Hugging Face hub), as public copies of that
# file give it. Everything else about the real model is computed from it.
REAL_TEXT_CONFIG = dict(
    model_type="qwen3_5_text", vocab_size=248320, hidden_size=1024, intermediate_size=3584, num_hidden_layers=24,
    num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
    linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=262144, attention_bias=False,
    rope_parameters=dict(rope_type="default", rope_theta=10_000_000, partial_rotary_factor=0.25,
                         mrope_section=[11, 11, 10], mrope_interleaved=True),
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)],
    full_attention_interval=4, attn_output_gate=True, mamba_ssm_dtype="float32", tie_word_embeddings=True,
    eos_token_id=248044, dtype="bfloat16",
)
# Its `vision_config`, from the same public copies of config.json. The tower it implies has 100,592,896 parameters
# (about 100.6 M), as transformers' own tower built from it on the meta device counts them.
REAL_VISION_CONFIG = dict(
    depth=12, hidden_size=768, intermediate_size=3072, num_heads=12, in_channels=3, patch_size=16,
    temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=1024, num_position_embeddings=2304,
    hidden_act="gelu_pytorch_tanh",
)


def real_config():
    """The real 0.8B's text config as the `Config` every module takes, read exactly as a config.json is read."""
    return Config.from_dict(dict(REAL_TEXT_CONFIG), "the real Qwen3.5-0.8B config")


# ---------------------------------------------------------------- every tensor, so every parameter

PARAM_GROUPS = ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total")  # counted apart
ZERO_CENTRED = ("input_layernorm", "post_attention_layernorm", "q_norm", "k_norm")  # plus the final `norm`
# Where each part's tensors sit in a checkpoint: the text model's and the tower's under `model.`, the MTP block's
# beside them.
CHECKPOINT_PREFIXES = dict(text="model.language_model.", mtp="mtp.", vision="model.visual.")
# The tensors the published checkpoints store in fp32, every other one in bf16 (public reports of the published
# files: Qwen3.5-0.8B has 36 F32 tensors, these two in each of its 18 DeltaNet layers).
REAL_FP32 = ("linear_attn.A_log", "linear_attn.norm.weight")

Shapes = dict[str, tuple[int, ...]]
AnyConfig = Mapping[str, Any] | Any  # config.json's names as a dict, or a dataclass holding them (Config, VisionConfig)


def _fields(cfg: AnyConfig) -> Mapping[str, Any]:
    return cfg if isinstance(cfg, Mapping) else asdict(cfg)


def layer_shapes(cfg: AnyConfig, kind: str) -> Shapes:
    """{name within the layer: shape} for one decoder layer of `kind`: its two norms, the SwiGLU MLP, and the mixer,
    a Gated DeltaNet ("linear_attention") or gated attention ("full_attention"). The MTP block's one layer is of the
    full-attention kind."""
    c = _fields(cfg)
    d, I = c["hidden_size"], c["intermediate_size"]  # noqa: E741 (I: the notation table's letter)
    shapes = {"input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,),
              "mlp.gate_proj.weight": (I, d), "mlp.up_proj.weight": (I, d), "mlp.down_proj.weight": (d, I)}
    if kind == "linear_attention":
        Hk, Hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
        dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
        conv = 2 * Hk * dk + Hv * dv  # q, k and v channels all pass through the depthwise conv
        shapes.update({
            "linear_attn.in_proj_qkv.weight": (conv, d),  # [q | k | v], head-major in each
            "linear_attn.in_proj_z.weight": (Hv * dv, d),  # the output gate
            "linear_attn.in_proj_b.weight": (Hv, d),  # β, one per value head
            "linear_attn.in_proj_a.weight": (Hv, d),  # decay input, one per value head
            "linear_attn.conv1d.weight": (conv, 1, K),  # depthwise, no bias
            "linear_attn.dt_bias": (Hv,),
            "linear_attn.A_log": (Hv,),
            "linear_attn.norm.weight": (dv,),  # gated RMSNorm, shared by all value heads
            "linear_attn.out_proj.weight": (d, Hv * dv),
        })
    elif kind == "full_attention":
        H, Hkv, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        shapes.update({
            "self_attn.q_proj.weight": (2 * H * D, d),  # query and output gate, interleaved per head
            "self_attn.k_proj.weight": (Hkv * D, d),
            "self_attn.v_proj.weight": (Hkv * D, d),
            "self_attn.o_proj.weight": (d, H * D),
            "self_attn.q_norm.weight": (D,),  # per head, shared by all heads
            "self_attn.k_norm.weight": (D,),
        })
    else:
        raise ValueError(tr(f"unknown layer type {kind!r}: expected 'linear_attention' or 'full_attention'",
                            f"未知的层类型 {kind!r}：应为 'linear_attention' 或 'full_attention'"))
    return shapes


def tensor_shapes(cfg: AnyConfig) -> Shapes:
    """{name: shape} of the text model for a text config (a dict of the HF field names, or a Config); names are the
    checkpoint's minus CHECKPOINT_PREFIXES["text"]."""
    c = _fields(cfg)
    d, V = c["hidden_size"], c["vocab_size"]
    shapes: Shapes = {"embed_tokens.weight": (V, d)}
    for i, kind in enumerate(c["layer_types"]):
        shapes.update({f"layers.{i}.{name}": shape for name, shape in layer_shapes(c, kind).items()})
    shapes["norm.weight"] = (d,)
    if not c.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (V, d)
    return shapes


def mtp_shapes(cfg: AnyConfig) -> Shapes:
    """{name: shape} of the multi-token-prediction block for a text config; names are the checkpoint's minus "mtp.".
    Two norms before `fc` (2d -> d), the final `norm`, and one full-attention decoder layer (Qwen3.5's configs say
    mtp_num_hidden_layers = 1). No embedding and no head: the block borrows the main model's."""
    d = _fields(cfg)["hidden_size"]
    shapes = {"fc.weight": (d, 2 * d), "pre_fc_norm_embedding.weight": (d,), "pre_fc_norm_hidden.weight": (d,),
              "norm.weight": (d,)}
    shapes.update({"layers.0." + n: s for n, s in layer_shapes(cfg, "full_attention").items()})
    return shapes


def vision_shapes(vision_cfg: AnyConfig) -> Shapes:
    """{name: shape} of the vision tower for a vision config; names are the checkpoint's minus "model.visual.". Every
    Linear and LayerNorm has a bias; the patch embedding is stored as a Conv3d kernel (C, 3, Tp, P, P). The pieces
    around the blocks first, then the blocks (the order the synthetic checkpoint draws its values in)."""
    v = _fields(vision_cfg)
    C, I, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]  # noqa: E741 (as above)
    P, Tp, merged = v["patch_size"], v["temporal_patch_size"], C * v["spatial_merge_size"] ** 2  # m × m patches
    shapes = {"patch_embed.proj.weight": (C, v["in_channels"], Tp, P, P), "patch_embed.proj.bias": (C,),
              "pos_embed.weight": (v["num_position_embeddings"], C),  # a learned side × side grid
              "merger.norm.weight": (C,), "merger.norm.bias": (C,),  # on each patch, before the merge
              "merger.linear_fc1.weight": (merged, merged), "merger.linear_fc1.bias": (merged,),
              "merger.linear_fc2.weight": (out, merged), "merger.linear_fc2.bias": (out,)}  # to the text width
    for i in range(v["depth"]):
        for name, shape in (("norm1", (C,)), ("norm2", (C,)), ("attn.qkv", (3 * C, C)), ("attn.proj", (C, C)),
                            ("mlp.linear_fc1", (I, C)), ("mlp.linear_fc2", (C, I))):
            shapes[f"blocks.{i}.{name}.weight"], shapes[f"blocks.{i}.{name}.bias"] = shape, shape[:1]
    return shapes


def checkpoint_shapes(cfg: AnyConfig, vision_cfg: AnyConfig | None = None, mtp: bool = True) -> Shapes:
    """{checkpoint key: shape} of a whole checkpoint: the text model, the MTP block (unless `mtp` is False) and the
    vision tower (when `vision_cfg` is given), each part's names under its CHECKPOINT_PREFIXES entry."""
    parts = {"text": tensor_shapes(cfg)}
    if mtp:
        parts["mtp"] = mtp_shapes(cfg)
    if vision_cfg is not None:
        parts["vision"] = vision_shapes(vision_cfg)
    return {CHECKPOINT_PREFIXES[part] + name: shape for part, shapes in parts.items() for name, shape in shapes.items()}


def param_group(name):
    """Which of PARAM_GROUPS a text-model tensor is counted in."""
    if name == "embed_tokens.weight":
        return "embedding"
    if name == "lm_head.weight":
        return "lm_head"
    if ".linear_attn." in name:
        return "linear_attention"
    if ".self_attn." in name:
        return "full_attention"
    if ".mlp." in name:
        return "mlp"
    return "norms"  # input_layernorm, post_attention_layernorm, the final norm


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def count_by_part(shapes):
    counts = dict.fromkeys(PARAM_GROUPS, 0)
    for name, shape in shapes.items():
        counts[param_group(name)] += numel(shape)
    counts["total"] = sum(v for k, v in counts.items() if k != "total")
    return counts


def is_zero_centred(name):
    """True for the RMSNorm weights stored as w - 1: the per-layer norms, q/k norms and the final norm."""
    module = name.rsplit(".", 1)[0]
    return name == "norm.weight" or module.rsplit(".", 1)[-1] in ZERO_CENTRED
