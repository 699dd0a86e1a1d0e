"""The course's notation: one letter per size, the config field it comes from, and its value in the real
Qwen3.5-0.8B and in the checkpoint at hand. Every chapter, module comment and exercise uses these letters."""
from pathlib import Path

from qwen.config import Config
from qwen.sizes import REAL_NAME as NAME, real_config

# letter, meaning, config field (None: set by the input, not the model; R is a product of two fields)
SYMBOLS = (
    ("B", "sequences in a batch", None),
    ("T", "tokens in a sequence (new tokens, in a cached step)", None),
    ("V", "vocabulary: rows of the embedding and of the head", "vocab_size"),
    ("d", "width of the residual stream (hidden size)", "hidden_size"),
    ("I", "width inside the MLP", "intermediate_size"),
    ("H", "query heads of full attention", "num_attention_heads"),
    ("Hkv", "key/value heads of full attention (shared by H/Hkv query heads)", "num_key_value_heads"),
    ("D", "size of one full-attention head", "head_dim"),
    ("R", "rotated dims of a full-attention head (RoPE)", "head_dim · partial_rotary_factor"),
    ("θ", "RoPE's base: frequency j is θ^(−2j/R)", "rope_theta"),
    ("Hk", "query/key heads of Gated DeltaNet", "linear_num_key_heads"),
    ("Hv", "value heads of Gated DeltaNet", "linear_num_value_heads"),
    ("dk", "size of one DeltaNet query/key head", "linear_key_head_dim"),
    ("dv", "size of one DeltaNet value head", "linear_value_head_dim"),
    ("K", "taps of DeltaNet's causal depthwise conv", "linear_conv_kernel_dim"),
)


def _value(cfg, field):
    """A config field's value, or the product of the fields a "·" joins (R = head_dim · partial_rotary_factor)."""
    value = 1
    for name in field.split(" · "):
        value *= getattr(cfg, name)
    return value


def notation(checkpoint):
    """Print the notation table with the real 0.8B's values and those of `checkpoint` (a folder or a Config);
    returns the table's text."""
    from qwen.synthetic import is_synthetic  # here: qwen.synthetic is only needed to label the column

    cfg = checkpoint if isinstance(checkpoint, Config) else Config.load(checkpoint)
    synthetic = not isinstance(checkpoint, Config) and is_synthetic(Path(checkpoint))
    ours = "synthetic checkpoint" if synthetic else "this checkpoint"
    real = real_config()
    rows = [("", "meaning", "config field", NAME, ours)]
    for letter, meaning, field in SYMBOLS:
        value = (lambda c, field=field: f"{_value(c, field):,g}") if field else (lambda c: "your input")
        rows.append((letter, meaning, field or "-", value(real), value(cfg)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    text = "\n".join("  ".join(cell.rjust(w) if i >= 3 else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip() for row in rows)
    print(text)
    return text
