"""The real Qwen3.5-0.8B, in one place: the numbers the chapters print beside the checkpoint's own, marked
"real Qwen3.5-0.8B".

TEXT_CONFIG is the `text_config` of the published config.json (read from public mirrors of the hub file; the build
machines have no hub access, see docs: qwen35-reference.md §1). Everything else here is computed from it, never
typed in: `config()` reads it exactly as a checkpoint's config.json is read.
"""
from qwen.synthetic import REAL_FP32 as FP32  # noqa: F401 (the tensors the real checkpoints store in fp32)
from qwen.weights import Config

NAME = "real Qwen3.5-0.8B"
HUB_ID = "Qwen/Qwen3.5-0.8B"
TEXT_CONFIG = dict(
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


def config():
    """The real 0.8B's text config as the `Config` every module takes."""
    return Config.from_dict(dict(TEXT_CONFIG), "the real Qwen3.5-0.8B config")
