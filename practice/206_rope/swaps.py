"""Where this exercise's functions go in the whole model (practice/plugin.py, `judge.py 206 --plug-in`): the rotary
tables every layer's attention reads, built from the learner's frequencies, and the rotation itself."""
import qwen.attention
import qwen.rope

PART = "RoPE"


def swaps(f, cfg):
    """(object, attribute, replacement) for each place the course's code gives way to the learner's `f`."""
    inv_freq = f["inv_frequencies"](cfg.head_dim, cfg.partial_rotary_factor, cfg.rope_theta)
    return [(qwen.rope.RotaryEmbedding, "forward",
             lambda self, positions, dtype: f["rope_tables"](positions, inv_freq.to(positions.device), dtype)),
            (qwen.attention, "apply_rope", f["apply_rope"])]
