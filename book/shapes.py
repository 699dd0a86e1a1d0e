"""The course's notation: one letter per size, the config field it comes from, and its value in the real
Qwen3.5-0.8B and in the checkpoint at hand. Every chapter, module comment and exercise uses these letters."""

from qwen.checkpoint import Checkpoint
from qwen.config import Config
from qwen.lang import columns, tr
from qwen.sizes import real_config


def symbols():
    """(letter, meaning, config field) of every size, in the language the course speaks now; the field is None when
    the input sets the size, not the model, and R is a product of two fields."""
    return (
        ("B", tr("sequences in a batch", "一个批次里的序列数"), None),
        ("T", tr("tokens in a sequence (new tokens, in a cached step)",
                 "一个序列里的 token 数（用缓存的一步里是新 token 数）"), None),
        ("V", tr("vocabulary: rows of the embedding and of the head", "词表大小：嵌入表和输出头的行数"), "vocab_size"),
        ("d", tr("width of the residual stream (hidden size)", "残差流的宽度"), "hidden_size"),
        ("I", tr("width inside the MLP", "MLP 内部的宽度"), "intermediate_size"),
        ("H", tr("query heads of full attention", "全注意力的查询头数"), "num_attention_heads"),
        ("Hkv", tr("key/value heads of full attention (shared by H/Hkv query heads)",
                 "全注意力的键值头数（每个键值头由 H/Hkv 个查询头共用）"), "num_key_value_heads"),
        ("D", tr("size of one full-attention head", "全注意力每个头的维度"), "head_dim"),
        ("R", tr("rotated dims of a full-attention head (RoPE)", "全注意力每个头里参与旋转的维数（RoPE）"),
         "head_dim · partial_rotary_factor"),
        ("θ", tr("RoPE's base: frequency j is θ^(−2j/R)", "RoPE 的基数：第 j 个频率是 θ^(−2j/R)"), "rope_theta"),
        ("Hk", tr("query/key heads of Gated DeltaNet", "Gated DeltaNet 的键头数（查询头数与它相同）"),
         "linear_num_key_heads"),
        ("Hv", tr("value heads of Gated DeltaNet", "Gated DeltaNet 的值头数"), "linear_num_value_heads"),
        ("dk", tr("size of one DeltaNet query/key head", "DeltaNet 每个键头（查询头）的维度"), "linear_key_head_dim"),
        ("dv", tr("size of one DeltaNet value head", "DeltaNet 每个值头的维度"), "linear_value_head_dim"),
        ("K", tr("taps of DeltaNet's causal depthwise conv", "DeltaNet 逐通道因果卷积的抽头数（卷积核长度）"),
         "linear_conv_kernel_dim"),
    )


def _pad(text, width, right=False):
    """`text` padded with spaces to `width` columns, on the left when `right`."""
    space = " " * (width - columns(text))
    return space + text if right else text + space


def _value(cfg, field):
    """A config field's value, or the product of the fields a "·" joins (R = head_dim · partial_rotary_factor)."""
    value = 1
    for name in field.split(" · "):
        value *= getattr(cfg, name)
    return value


def notation(checkpoint: Checkpoint | Config) -> str:
    """Print the notation table with the real 0.8B's values and those of `checkpoint` (an opened checkpoint,
    qwen/checkpoint.py, or a Config); returns the table's text."""
    cfg = checkpoint if isinstance(checkpoint, Config) else checkpoint.config
    synthetic = not isinstance(checkpoint, Config) and checkpoint.synthetic
    ours = tr("synthetic checkpoint", "合成检查点") if synthetic else tr("this checkpoint", "本检查点")
    real = real_config()
    rows = [("", tr("meaning", "含义"), tr("config field", "config 字段"), tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B"),
             ours)]
    for letter, meaning, field in symbols():
        value = (lambda c, field=field: f"{_value(c, field):,g}") if field else \
            (lambda c: tr("your input", "由输入决定"))
        rows.append((letter, meaning, field or "-", value(real), value(cfg)))
    widths = [max(columns(r[i]) for r in rows) for i in range(5)]
    text = "\n".join("  ".join(_pad(cell, w, right=i >= 3) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip() for row in rows)
    print(text)
    return text
