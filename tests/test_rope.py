"""qwen/rope.py against transformers' Qwen3.5 rotary embedding (the oracle), plus the identities RoPE must obey."""
import json
import math

import pytest
import torch
from transformers import AutoConfig
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

from qwen.config import Config
from qwen.rope import RotaryEmbedding, apply_rope, mrope_axes

# Small configs that cover what the synthetic checkpoint (head_dim 64, factor 0.25, θ = 1e7) does not.
SMALL = {
    "real-0.8B-rope": {"head_dim": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                                                            "partial_rotary_factor": 0.25,
                                                            "mrope_section": [11, 11, 10]}},
    "head_dim-32-factor-0.5": {"head_dim": 32, "rope_parameters": {"rope_type": "default", "rope_theta": 500000,
                                                                   "partial_rotary_factor": 0.5,
                                                                   "mrope_section": [3, 3, 2]}},
    "theta-absent": {"head_dim": 128, "rope_parameters": {"rope_type": "default", "mrope_section": [4, 3, 3]}},
    "all-absent": {"head_dim": 96},  # θ, factor and mrope_section all fall back to transformers' defaults
    "factor-1-flat-keys": {"head_dim": 16, "partial_rotary_factor": 1.0, "rope_theta": 1000.0},
}


def both(tmp_path, text):
    """The same config.json read by our Config and by transformers' Qwen3_5TextConfig."""
    raw = {"model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": 100, **text}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return Config.load(tmp_path), Qwen3_5TextConfig(**{k: v for k, v in raw.items() if k != "model_type"})


@pytest.fixture(scope="module")
def synthetic_pair(synthetic):
    return Config.load(synthetic), AutoConfig.from_pretrained(synthetic).text_config


def positions(B, T, seed, three_axes):
    g = torch.Generator().manual_seed(seed)
    p = torch.randint(0, 5000, (B, T), generator=g)
    if three_axes:  # distinct T/H/W positions, as for image tokens: every frequency's source axis matters
        p = torch.stack([p, torch.randint(0, 64, (B, T), generator=g), torch.randint(0, 64, (B, T), generator=g)])
    return p


def check_tables(cfg, hf_cfg, dtype, three_axes):
    ours, theirs = RotaryEmbedding(cfg), Qwen3_5TextRotaryEmbedding(hf_cfg)
    p = positions(2, 9, 0, three_axes)
    cos, sin = ours(p, dtype)
    hf_cos, hf_sin = theirs(torch.zeros(1, dtype=dtype), p)
    assert cos.shape == sin.shape == (2, 9, int(hf_cfg.head_dim * hf_cfg.rope_parameters["partial_rotary_factor"]))
    assert cos.dtype == sin.dtype == dtype
    # Same fp32 operations in the same order (angle = p · inv_freq, cos, sin, pick, cast): bit-exact, fp32 and bf16.
    assert torch.equal(cos, hf_cos) and torch.equal(sin, hf_sin)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("three_axes", [False, True])
def test_tables_equal_transformers_on_synthetic(synthetic_pair, dtype, three_axes):
    check_tables(*synthetic_pair, dtype, three_axes)


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("three_axes", [False, True])
def test_tables_equal_transformers_on_small_configs(tmp_path, name, three_axes):
    cfg, hf_cfg = both(tmp_path, SMALL[name])
    check_tables(cfg, hf_cfg, torch.bfloat16, three_axes)
    check_tables(cfg, hf_cfg, torch.float32, three_axes)


def test_theta_absent_is_10000_as_in_transformers(tmp_path):
    """As in transformers: without rope_theta, θ = 10000 (the published configs say 1e7)."""
    cfg, hf_cfg = both(tmp_path, SMALL["theta-absent"])
    assert cfg.rope_theta == hf_cfg.rope_parameters["rope_theta"] == 10000.0
    R = RotaryEmbedding(cfg).R
    torch.testing.assert_close(RotaryEmbedding(cfg).inv_freq[1], torch.tensor(10000.0 ** (-2 / R)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["synthetic", "real-0.8B-rope", "head_dim-32-factor-0.5", "factor-1-flat-keys"])
def test_apply_equals_transformers(tmp_path, synthetic_pair, name, dtype):
    cfg, hf_cfg = synthetic_pair if name == "synthetic" else both(tmp_path, SMALL[name])
    cos, sin = RotaryEmbedding(cfg)(positions(2, 7, 1, False), dtype)
    g = torch.Generator().manual_seed(2)
    q = (torch.randn(2, 4, 7, cfg.head_dim, generator=g) * 2).to(dtype)
    k = (torch.randn(2, 2, 7, cfg.head_dim, generator=g) * 2).to(dtype)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    got_q, got_k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    assert got_q.shape == q.shape and got_k.dtype == dtype
    # Same elementwise ops in the same order as transformers: bit-exact in fp32 and bf16.
    assert torch.equal(got_q, hf_q) and torch.equal(got_k, hf_k)
    R = cos.shape[-1]
    assert torch.equal(got_q[..., R:], q[..., R:]) and not torch.equal(got_q[..., :R], q[..., :R])


def test_text_mrope_is_plain_rope_exactly():
    """M-RoPE with T = H = W equals ordinary RoPE (every frequency from the one position), to the last bit."""
    cfg = Config(head_dim=256, partial_rotary_factor=0.25, rope_theta=1e7, mrope_section=[11, 11, 10])
    rope = RotaryEmbedding(cfg)
    p = torch.arange(0, 40000, 1000).reshape(2, -1)
    angle = p[..., None].float() * rope.inv_freq  # plain RoPE: no axes at all
    plain = torch.cat((angle, angle), dim=-1)
    cos, sin = rope(p, torch.float32)
    assert torch.equal(cos, plain.cos()) and torch.equal(sin, plain.sin())
    assert torch.equal(rope(p.expand(3, -1, -1), torch.float32)[0], cos)  # (3, B, T) with equal rows, the same
    # ...and with distinct axes the table really changes (so the check above can fail)
    moved = torch.stack([p, p + 1, p])
    assert not torch.equal(rope(moved, torch.float32)[0], cos)


def test_interleave_map_of_the_real_model():
    """By hand, interleaved: H takes j = 1, 4, …, 31; W takes j = 2, 5, …, 29; T takes j = 0, 3, …, 30."""
    axis = mrope_axes(32, [11, 11, 10])
    assert [j for j in range(32) if axis[j] == 1] == list(range(1, 32, 3))
    assert [j for j in range(32) if axis[j] == 2] == list(range(2, 30, 3))
    assert [j for j in range(32) if axis[j] == 0] == list(range(0, 31, 3))


def test_angles_by_hand():
    """R = 4, θ = 100: inv_freq = (1, 0.1); position 2 turns the pairs by 2 and 0.2 radians."""
    rope = RotaryEmbedding(Config(head_dim=8, partial_rotary_factor=0.5, rope_theta=100.0))
    torch.testing.assert_close(rope.inv_freq, torch.tensor([1.0, 0.1]))
    cos, sin = rope(torch.tensor([[2]]), torch.float32)
    torch.testing.assert_close(cos[0, 0], torch.tensor([math.cos(2), math.cos(0.2)] * 2))
    # x = e_0 (first dim of the first pair) at position 2 goes to (cos 2, 0, sin 2, 0) in the rotated half
    x = torch.zeros(1, 1, 1, 8)
    x[..., 0] = 1.0
    torch.testing.assert_close(apply_rope(x, cos, sin)[0, 0, 0, :4], torch.tensor([math.cos(2), 0, math.sin(2), 0]))


def test_rotation_preserves_length():
    rope = RotaryEmbedding(Config(head_dim=256, rope_theta=1e7))
    x = torch.randn(2, 8, 50, 256, generator=torch.Generator().manual_seed(3))
    cos, sin = rope(torch.arange(0, 5000, 100).expand(2, -1), torch.float32)
    y = apply_rope(x, cos, sin)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-6, atol=0)
    assert not torch.allclose(y, x)


def test_score_depends_only_on_distance():
    """q at position m, k at n: q·k is the same for every (m, n) with the same m − n, up to fp32 rounding."""
    rope = RotaryEmbedding(Config(head_dim=256, rope_theta=1e7))
    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(1, 1, 1, 256, generator=g), torch.randn(1, 1, 1, 256, generator=g)

    def score(m, n):
        cq, sq = rope(torch.tensor([[m]]), torch.float32)
        ck, sk = rope(torch.tensor([[n]]), torch.float32)
        return (apply_rope(q, cq, sq) * apply_rope(k, ck, sk)).sum().item()

    scale = (q.norm() * k.norm()).item()
    for d in (0, 1, 5, 37):
        scores = [score(m + d, m) for m in (0, 3, 100, 999)]
        assert max(scores) - min(scores) <= 1e-5 * scale, (d, scores)
    assert abs(score(5, 0) - score(0, 5)) > 1e-3 * scale  # a distance, with a sign: it can fail


def test_built_on_the_meta_device_still_works():
    """A model built under torch.device("meta") (no memory) still gets real frequencies, as transformers'."""
    cfg = Config(head_dim=256, rope_theta=1e7)
    with torch.device("meta"):
        rope = RotaryEmbedding(cfg)
    assert torch.equal(rope.inv_freq, RotaryEmbedding(cfg).inv_freq)
    assert torch.equal(rope(torch.arange(5)[None], torch.float32)[0], RotaryEmbedding(cfg)(torch.arange(5)[None],
                                                                                         torch.float32)[0])


def test_model_to_bf16_keeps_fp32_frequencies():
    rope = RotaryEmbedding(Config(head_dim=64, rope_theta=1e7))
    before = rope(torch.arange(100)[None], torch.float32)
    rope.to(torch.bfloat16)
    assert torch.equal(rope(torch.arange(100)[None], torch.float32)[0], before[0])


def test_bad_positions_shape_is_a_clear_error():
    with pytest.raises(ValueError, match=r"positions must be \(B, T\) or \(3, B, T\), got shape \(2, 2, 5\)"):
        RotaryEmbedding(Config())(torch.zeros(2, 2, 5, dtype=torch.long), torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_pair_formula_is_the_same_bits(dtype):
    """Problem 206 grades bf16 rotations exactly. The pair formula written out, (x1 cos − x2 sin, x2 cos + x1 sin),
    is the same products and sums as x·cos + rotate_half(x)·sin, so it gives the same bits: exactness is fair."""
    rope = RotaryEmbedding(Config(head_dim=256, rope_theta=1e7))
    x = (torch.randn(2, 8, 33, 256, generator=torch.Generator().manual_seed(5)) * 3).to(dtype)
    cos, sin = rope(torch.randint(0, 30000, (2, 33), generator=torch.Generator().manual_seed(6)), dtype)
    c, s = cos[:, None, :, :32], sin[:, None, :, :32]
    x1, x2 = x[..., :32], x[..., 32:64]
    by_pairs = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s, x[..., 64:]), dim=-1)
    assert torch.equal(by_pairs, apply_rope(x, cos, sin))
