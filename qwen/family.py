"""The dense Qwen3.5 family: the numbers of each size that fix its cache, and the bytes that cache keeps.

A full-attention layer keeps a key and a value (Hkv heads of D) for every token of the context; a Gated DeltaNet
layer keeps an (Hv, dk, dv) state in fp32 and the last K − 1 inputs of its conv, whatever the length. Every function
takes a `Config` (a checkpoint's, or qwen.sizes.real_config()) or a `Size`: they share config.json's names. Chapters
6, 7 and 9 print this arithmetic; tests/test_book_ch06.py, ch07 and ch09 hold it to the bytes a real cache holds.
"""
from dataclasses import dataclass, fields

from qwen.sizes import REAL_TEXT_CONFIG

# The DeltaNet state is fp32 whatever config.json's `mamba_ssm_dtype` says: neither transformers 5.24 nor this course
# reads that key; both kernels compute and keep the state in fp32. K, V and the conv inputs are in the model dtype.
STATE_BYTES = 4


@dataclass(frozen=True)
class Size:
    """The numbers of one dense size that fix its cache, under config.json's names, and where they come from."""
    num_hidden_layers: int
    hidden_size: int  # d
    num_attention_heads: int  # H
    num_key_value_heads: int  # Hkv
    head_dim: int  # D
    linear_num_key_heads: int  # Hk
    linear_num_value_heads: int  # Hv
    linear_key_head_dim: int  # dk
    linear_value_head_dim: int  # dv
    linear_conv_kernel_dim: int  # K
    source: str

    @property
    def layer_types(self):
        """[L, L, L, F] repeated: every size puts full attention in every 4th layer."""
        return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(self.num_hidden_layers)]


# The 0.8B is REAL_TEXT_CONFIG. The others come from public sources, named in `source`, not from the hub's own
# config.json of each size. Their DeltaNet numbers (Hk, Hv,
# dk, dv, K) are the "Model Overview" of each published model card (Qwen/Qwen3.5-2B … 27B), read from public copies.
SIZES = {
    "0.8B": Size(**{f.name: REAL_TEXT_CONFIG[f.name] for f in fields(Size) if f.name != "source"},  # type: ignore[arg-type]
                 source="qwen/sizes.py REAL_TEXT_CONFIG: the published config.json, from public copies of it; "
                        "THUDM/slime's qwen3.5-0.8B.sh"),
    #          layers  d     H   Hkv D    Hk  Hv  dk   dv   K
    "2B": Size(24, 2048, 8, 2, 256, 16, 16, 128, 128, 4,
               source="fitmygpu.com's Qwen 3.5 2B page (layers, heads, KV heads); head_dim 256 assumed, as in every "
                      "other size"),
    "4B": Size(32, 2560, 16, 4, 256, 16, 32, 128, 128, 4,
               source="fitmygpu.com's Qwen 3.5 4B page; the model card of a model built from Qwen3.5-4B's weights"),
    "9B": Size(32, 4096, 16, 4, 256, 16, 32, 128, 128, 4,
               source="fitmygpu.com's Qwen 3.5 9B page; aprender's Qwen3.5-9B notes (16 heads, 4 KV heads, D 256)"),
    "27B": Size(64, 5120, 24, 4, 256, 16, 48, 128, 128, 4,
                source="THUDM/slime's qwen3.5-27B.sh (64 layers, 24 heads, 4 query groups, kv-channels 256)"),
}


def kv_bytes_per_token(cfg, dtype_bytes=2):
    """One full-attention layer's cache grows by a key and a value, Hkv heads of D each, per token."""
    return 2 * cfg.num_key_value_heads * cfg.head_dim * dtype_bytes


def linear_layer_bytes(cfg, dtype_bytes=2):
    """One Gated DeltaNet layer's cache, whatever the context: the (Hv, dk, dv) state in fp32 and the last K − 1
    inputs of the conv (2·Hk·dk + Hv·dv channels) in the model dtype."""
    state = cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim * STATE_BYTES
    channels = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + \
        cfg.linear_num_value_heads * cfg.linear_value_head_dim
    return state + (cfg.linear_conv_kernel_dim - 1) * channels * dtype_bytes


def cache_bytes(cfg, tokens, dtype_bytes=2):
    """(kv, deltanet): the whole model's cache for one sequence of `tokens`. The full-attention layers' part grows
    with every token; the DeltaNet layers' part is fixed."""
    full = cfg.layer_types.count("full_attention")
    linear = len(cfg.layer_types) - full
    return full * tokens * kv_bytes_per_token(cfg, dtype_bytes), linear * linear_layer_bytes(cfg, dtype_bytes)


def all_attention_bytes(cfg, tokens, dtype_bytes=2):
    """The same model's cache if every layer were full attention (what the hybrid design saves)."""
    return cfg.num_hidden_layers * tokens * kv_bytes_per_token(cfg, dtype_bytes)
