"""Small random Qwen3.5 checkpoints written by transformers itself (save_pretrained), for tests that need configs the
synthetic checkpoint does not have. Every parameter is randomised (norm weights, dt_bias and A_log included), so a
wrong convention anywhere shows up in the logits."""
import json
import math

import torch
from safetensors.torch import save_file

from qwen.config import Config
from qwen.mtp import MTP

VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16, temporal_patch_size=2,
              spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=64)


def text_config(**overrides):
    """A tiny text config in the real layout; keyword arguments replace fields. layer_types=None drops the list."""
    cfg = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
               num_attention_heads=4, num_key_value_heads=2, head_dim=32,
               linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
               linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
               rope_parameters=dict(rope_type="default", rope_theta=10_000_000, partial_rotary_factor=0.25,
                                    mrope_section=[2, 1, 1], mrope_interleaved=True))
    cfg.update(overrides)
    return cfg


def randomize(model, seed):
    """Replace every parameter by random numbers at a scale that keeps activations near 1 through the layers."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 15 + 1))
            elif name.endswith("dt_bias") or name.endswith("linear_attn.norm.weight"):  # plain weights around 1
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:  # zero-centred norm weights (scale 1 + w) and biases
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("conv1d.weight"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):  # the residual stream starts near the layers' write size
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
                # small writes into the residual stream, as in trained models: without this the random layers
                # amplify every rounding difference (fp32 chunk alignment, bf16 ulps) a hundredfold
                p.copy_(0.3 * torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1] if p.dim() == 2 else p[0].numel()))
    return model


def save_checkpoint(folder, text=None, tied=True, dtype=torch.float32, max_shard_size=None, seed=0,
                    drop_layer_types=False):
    """A random Qwen3_5ForConditionalGeneration saved to `folder`. drop_layer_types: remove the list from config.json
    (keeping any full_attention_interval), so both loaders must derive the pattern. Returns the folder."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    text = dict(text or text_config())
    cfg = Qwen3_5Config(text_config=text, vision_config=VISION, tie_word_embeddings=tied)
    model = randomize(Qwen3_5ForConditionalGeneration(cfg), seed).to(dtype)
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(folder, **kwargs)
    if drop_layer_types:
        file = folder / "config.json"
        raw = json.loads(file.read_text())
        del raw["text_config"]["layer_types"]
        if "full_attention_interval" in text:  # transformers reads it but does not save it
            raw["text_config"]["full_attention_interval"] = text["full_attention_interval"]
        file.write_text(json.dumps(raw, indent=2))
    return folder


def hf_load(folder, dtype=torch.float32):
    """transformers' own model on the same folder, eager attention: the oracle."""
    from transformers import Qwen3_5ForConditionalGeneration

    return Qwen3_5ForConditionalGeneration.from_pretrained(folder, dtype=dtype, attn_implementation="eager").eval()


# The small checkpoints of the model and fast-path tests (conftest's `folders`), configs the synthetic one does not
# have: name -> (text config, tied head, drop layer_types from config.json)
CONFIGS = {
    "Hv=Hk, GQA 1, tied": (text_config(linear_num_key_heads=2, linear_num_value_heads=2, num_attention_heads=4,
                                       num_key_value_heads=4), True, False),
    "Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3": (
        text_config(linear_value_head_dim=48, num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-5,
                    num_hidden_layers=6, full_attention_interval=3), False, True),
    "Hv=3Hk, dk!=dv, GQA 4, no layer_types": (
        text_config(linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=64,
                    linear_value_head_dim=32, num_attention_heads=8, num_key_value_heads=2, num_hidden_layers=5),
        True, True),
}

# The small checkpoints given an MTP block (conftest's `small`, add_mtp): name -> (text config, tied head)
SMALL = {"Hv=2Hk, GQA 2, tied": (text_config(), True),
         "Hv=3Hk, GQA 4, untied, 5 layers": (text_config(linear_num_key_heads=1, linear_num_value_heads=3,
                                                         num_attention_heads=8, num_key_value_heads=2,
                                                         num_hidden_layers=5, rms_norm_eps=1e-5), False)}


def add_mtp(folder, seed):
    """Random mtp.* tensors in the real layout, written beside the checkpoint as their own safetensors file."""
    mtp = randomize(MTP(Config.load(folder)), seed)
    save_file({"mtp." + n: p.detach().contiguous() for n, p in mtp.state_dict().items()}, folder / "mtp.safetensors")
    return folder
