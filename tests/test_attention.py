"""qwen/attention.py against transformers' Qwen3_5Attention (eager: the same operations in the same order), on the
synthetic checkpoint and on small configs that cover what it does not; and the KV cache against the prompt
processed at once.

Both sides get their RoPE tables from their own code (ours: qwen/rope.py, from our Config; theirs: the
rotary module of transformers, from its config), built from one config dict, so a config key read differently by
either side shows up here too.
"""
import copy
import json

import pytest
import torch
from transformers import DynamicCache, Qwen3_5TextConfig
from transformers.masking_utils import create_causal_mask
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5Attention, Qwen3_5TextRotaryEmbedding

from qwen.attention import GatedAttention, KVCache, attention, causal_mask
from qwen.config import Config
from qwen.rope import RotaryEmbedding
from qwen.weights import Weights, fill

# Small text configs (one full-attention layer). Each covers something the synthetic checkpoint (H 4, Hkv 2,
# D 64, R 16, θ 1e7, eps 1e-6) does not.
CONFIGS = {
    "gqa1_theta_absent": dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
                              rms_norm_eps=1e-5, rope_parameters=dict(rope_type="default", partial_rotary_factor=0.5)),
    "gqa3_d16": dict(hidden_size=40, num_attention_heads=6, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                     rope_parameters=dict(rope_type="default", rope_theta=1e6, partial_rotary_factor=0.25,
                                          mrope_section=[1, 1, 0])),
    "gqa4_full_rotary": dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=2, head_dim=48,
                             rms_norm_eps=1e-4, rope_parameters=dict(rope_type="default", rope_theta=500.0,
                                                                     partial_rotary_factor=1.0)),
}


def pair(text, dtype, tmp_path, seed=0):
    """(ours, theirs, our rotary, their rotary, hf config) for one text config; every weight random, norms too."""
    text = dict(text, model_type="qwen3_5_text", num_hidden_layers=1, layer_types=["full_attention"],
                vocab_size=16, intermediate_size=8)
    (tmp_path / "config.json").write_text(json.dumps(text))
    cfg = Config.load(tmp_path)
    hf_cfg = Qwen3_5TextConfig(**{k: v for k, v in text.items() if k != "model_type"})
    hf_cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    theirs = Qwen3_5Attention(hf_cfg, layer_idx=0)
    with torch.no_grad():
        for p in theirs.parameters():  # norm weights too: (1 + w) must matter
            p.copy_(torch.randn_like(p) * (0.3 if p.dim() == 1 else p.shape[1] ** -0.5))
    ours = fill(GatedAttention(cfg), theirs.state_dict())
    rotaries = RotaryEmbedding(cfg), Qwen3_5TextRotaryEmbedding(hf_cfg)
    return ours.to(dtype).eval(), theirs.to(dtype).eval(), *rotaries, hf_cfg


def theirs_forward(theirs, rotary, hf_cfg, x, positions, mask=None, cache=None):
    """transformers' attention with its own RoPE tables and its own 4-D mask (from create_causal_mask)."""
    cos, sin = rotary(x, positions)
    full = create_causal_mask(config=hf_cfg, inputs_embeds=x, attention_mask=mask, cache=cache, position_ids=positions)
    return theirs(x, (cos, sin), full, cache=cache)[0]


def ours_forward(ours, rotary, x, positions, mask=None, cache=None):
    cos, sin = rotary(positions, x.dtype)
    return ours(x, cos, sin, cache=cache, mask=None if mask is None else mask.bool())


def inputs(B, T, d, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, d, generator=g).to(dtype), torch.arange(T).expand(B, T)


def left_padded(B, T, pads):
    """(B, T) 1/0 mask with pads[b] padding tokens on the left, and the positions generate() gives them."""
    mask = torch.ones(B, T, dtype=torch.long)
    for b, n in enumerate(pads):
        mask[b, :n] = 0
    return mask, (mask.cumsum(-1) - 1).clamp_min(0)


def fp32_close(got, want):
    diff = (got - want).abs().max().item()
    print(f"fp32 max |diff| = {diff:.2e} (output scale {want.abs().max():.2f})")
    assert diff <= 1e-5 * max(1.0, want.abs().max().item())


# ---------------------------------------------------------------- small configs

@pytest.mark.parametrize("name", CONFIGS)
@torch.no_grad()
def test_fp32_equals_transformers(name, tmp_path):
    ours, theirs, rot, hf_rot, hf_cfg = pair(CONFIGS[name], torch.float32, tmp_path)
    x, pos = inputs(2, 11, CONFIGS[name]["hidden_size"], torch.float32)
    fp32_close(ours_forward(ours, rot, x, pos), theirs_forward(theirs, hf_rot, hf_cfg, x, pos))


@pytest.mark.parametrize("name", CONFIGS)
@torch.no_grad()
def test_bf16_bit_exact_with_padding(name, tmp_path):
    """Same operations in the same order as transformers' eager path: equal bit for bit in bf16, every position
    (the padding queries too: both give them a uniform softmax over the finfo.min row)."""
    ours, theirs, rot, hf_rot, hf_cfg = pair(CONFIGS[name], torch.bfloat16, tmp_path)
    x, _ = inputs(2, 9, CONFIGS[name]["hidden_size"], torch.bfloat16)
    mask, pos = left_padded(2, 9, [3, 0])
    got, want = ours_forward(ours, rot, x, pos, mask), theirs_forward(theirs, hf_rot, hf_cfg, x, pos, mask)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want), f"max |diff| {(got.float() - want.float()).abs().max():.3e}"


@torch.no_grad()
def test_fp32_padding_mask(tmp_path):
    """Left padding, batch 2: equal to transformers; and a padded row equals the same row unpadded."""
    ours, theirs, rot, hf_rot, hf_cfg = pair(CONFIGS["gqa3_d16"], torch.float32, tmp_path)
    x, _ = inputs(2, 8, 40, torch.float32)
    mask, pos = left_padded(2, 8, [3, 0])
    got = ours_forward(ours, rot, x, pos, mask)
    fp32_close(got, theirs_forward(theirs, hf_rot, hf_cfg, x, pos, mask))
    alone = ours_forward(ours, rot, x[:1, 3:], torch.arange(5)[None])  # row 0 without its 3 pads
    fp32_close(got[:1, 3:], alone)


# ---------------------------------------------------------------- the synthetic checkpoint

@pytest.fixture(scope="module")
def synthetic_layer(synthetic, hf_model):
    """Layer 3 (the first full-attention layer) of the synthetic checkpoint: ours and transformers'."""
    cfg = Config.load(synthetic)
    i = cfg.layer_types.index("full_attention")
    ours = fill(GatedAttention(cfg), Weights(synthetic), f"layers.{i}.self_attn.").eval()
    theirs = copy.deepcopy(hf_model.model.layers[i].self_attn)
    theirs.config = copy.deepcopy(hf_model.config)
    theirs.config._attn_implementation = "eager"  # the shared fixture runs SDPA: one bf16 rounding apart
    return cfg, ours, theirs, hf_model.model.rotary_emb, theirs.config


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@torch.no_grad()
def test_synthetic_checkpoint(synthetic_layer, dtype):
    cfg, ours, theirs, hf_rot, hf_cfg = synthetic_layer
    ours, theirs = copy.deepcopy(ours).to(dtype), copy.deepcopy(theirs).to(dtype)  # bf16 file: fp32 -> bf16 exact
    x, _ = inputs(2, 13, cfg.hidden_size, dtype, seed=3)
    mask, pos = left_padded(2, 13, [0, 4])
    got = ours_forward(ours, RotaryEmbedding(cfg), x, pos, mask)
    want = theirs_forward(theirs, hf_rot, hf_cfg, x, pos, mask)
    if dtype == torch.float32:
        fp32_close(got, want)
    else:
        assert torch.equal(got, want), f"max |diff| {(got.float() - want.float()).abs().max():.3e}"


# ---------------------------------------------------------------- the parts, by hand

def test_query_and_gate_are_interleaved_per_head(tmp_path):
    """Rows h·2D .. h·2D+D of q_proj are head h's query and the next D rows its gate (not [all queries | all
    gates]); head h reads K/V head h // (H/Hkv). Zero every gate row (sigmoid(0) = 1/2) and head 1's query rows:
    head 1 then attends uniformly, so by hand its output is half the running mean of K/V head 0's values."""
    ours, _, rot, *_ = pair(CONFIGS["gqa3_d16"], torch.float64, tmp_path)
    H, Hkv, D = ours.H, ours.Hkv, ours.D
    with torch.no_grad():
        w = ours.q_proj.weight.view(H, 2, D, -1)  # (head, query | gate, D, d): the interleaved layout
        w[:, 1] = 0
        w[1, 0] = 0
    seen = {}
    ours.o_proj.register_forward_hook(lambda m, a, out: seen.setdefault("heads", a[0]))
    x, pos = inputs(1, 5, 40, torch.float64)
    with torch.no_grad():
        ours(x, *rot(pos, x.dtype))
        v = ours.v_proj(x).view(1, 5, Hkv, D)[:, :, 1 // (H // Hkv)]  # (1, T, D): head 1 reads K/V head 0
    running_mean = v.cumsum(1) / torch.arange(1, 6, dtype=x.dtype)[:, None]
    torch.testing.assert_close(seen["heads"].view(1, 5, H, D)[:, :, 1], 0.5 * running_mean)


def test_attention_by_hand():
    """Two keys, one query, D = 4: scores q·k/2 = (1, 0) -> softmax (e/(e+1), 1/(e+1)); a masked key gets 0."""
    q = torch.tensor([[[[2.0, 0, 0, 0]]]])
    k = torch.tensor([[[[1.0, 0, 0, 0], [0, 1.0, 0, 0]]]])
    v = torch.tensor([[[[1.0, 0, 0, 0], [0, 0, 0, 1.0]]]])
    e = torch.e
    want = torch.tensor([[[[e / (e + 1), 0, 0, 1 / (e + 1)]]]])
    torch.testing.assert_close(attention(q, k, v, torch.ones(1, 1, 1, 2, dtype=torch.bool)), want)
    keep_first = torch.tensor([True, False]).view(1, 1, 1, 2)
    torch.testing.assert_close(attention(q, k, v, keep_first), v[..., :1, :])


def test_causal_mask_by_hand():
    """3 new tokens after 2 cached ones: token i (position 2 + i) sees keys 0..2 + i; padding key 0 is hidden."""
    want = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3, 2)[0, 0], want)
    pad = torch.tensor([[False, True, True, True, True]])
    assert torch.equal(causal_mask(3, 2, pad)[0, 0], want & pad)
    with pytest.raises(ValueError, match=r"mask must be \(B, S\) with S = 5"):
        causal_mask(3, 2, torch.ones(1, 3, dtype=torch.bool))


def test_sdpa_equals_the_written_out_attention():
    """torch's fused F.scaled_dot_product_attention computes the same function (GQA expanded, boolean mask)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 32, generator=g) for _ in range(3))
    allowed = causal_mask(7, 0, torch.tensor([[1] * 7, [0, 0] + [1] * 5]).bool())
    got = attention(q, k, v, allowed)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    fp32_close(got[1, :, 2:], want[1, :, 2:])  # real queries: SDPA gives a query that sees no key zeros, not the mean
    fp32_close(got[0], want[0])


# ---------------------------------------------------------------- the KV cache

@pytest.mark.parametrize("pieces", [[6, 1, 1, 1, 1], [1, 4, 5], [2, 3, 1, 4]])
@torch.no_grad()
def test_cache_pieces_equal_the_prompt_at_once(tmp_path, pieces):
    """A prompt processed in pieces (prefill then token by token; a first piece shorter than the rest) equals it
    processed at once, in fp32, with and without left padding; and equals transformers' own cached run."""
    ours, theirs, rot, hf_rot, hf_cfg = pair(CONFIGS["gqa4_full_rotary"], torch.float32, tmp_path)
    T = sum(pieces)
    x, _ = inputs(2, T, 64, torch.float32, seed=5)
    mask, pos = left_padded(2, T, [0, 2])
    whole = ours_forward(ours, rot, x, pos, mask)
    cache, hf_cache, outs, hf_outs, start = KVCache(), DynamicCache(config=hf_cfg), [], [], 0
    for n in pieces:
        sl = slice(start, start + n)
        outs.append(ours_forward(ours, rot, x[:, sl], pos[:, sl], mask[:, :start + n], cache))
        hf_outs.append(theirs_forward(theirs, hf_rot, hf_cfg, x[:, sl], pos[:, sl], mask[:, :start + n], hf_cache))
        start += n
        assert cache.length == start and cache.k.shape == cache.v.shape == (2, 2, start, 48)
    real = mask.bool()  # a padding query sees no key: its (uniform) output depends on how many keys exist yet
    fp32_close(torch.cat(outs, 1)[real], whole[real])
    fp32_close(torch.cat(outs, 1), torch.cat(hf_outs, 1))  # every position, padding too
    fp32_close(cache.k, hf_cache.layers[0].keys)  # stored keys: after k_norm and RoPE, like transformers'
    fp32_close(cache.v, hf_cache.layers[0].values)


@torch.no_grad()
def test_cache_is_read_not_recomputed(tmp_path):
    """A continuation projects only its new tokens, and its result comes from what the cache holds: swap the
    cached prompt for another one's keys and values and the output changes to that prompt's continuation."""
    ours, _, rot, *_ = pair(CONFIGS["gqa3_d16"], torch.float32, tmp_path)
    x, pos = inputs(1, 8, 40, torch.float32)
    other, _ = inputs(1, 8, 40, torch.float32, seed=9)
    rows = []
    for proj in (ours.q_proj, ours.k_proj, ours.v_proj):
        proj.register_forward_hook(lambda m, a, out: rows.append(a[0].shape[1]))
    cache, cache_other = KVCache(), KVCache()
    ours_forward(ours, rot, x[:, :7], pos[:, :7], cache=cache)
    ours_forward(ours, rot, other[:, :7], pos[:, :7], cache=cache_other)
    rows.clear()
    step = ours_forward(ours, rot, x[:, 7:], pos[:, 7:], cache=cache)
    assert rows == [1, 1, 1], "the continuation must project only the new token"
    fp32_close(step, ours_forward(ours, rot, x, pos)[:, 7:])
    swapped = ours_forward(ours, rot, x[:, 7:], pos[:, 7:], cache=cache_other)
    mixed = torch.cat((other[:, :7], x[:, 7:]), 1)
    fp32_close(swapped, ours_forward(ours, rot, mixed, pos)[:, 7:])
    assert (swapped - step).abs().max() > 1e-3


def test_empty_cache():
    cache = KVCache()
    assert cache.length == 0 and cache.k is None and cache.v is None
    k = torch.zeros(1, 2, 3, 4)
    out_k, out_v = cache.update(k, k + 1)
    assert cache.length == 3 and torch.equal(out_k, k) and torch.equal(out_v, k + 1)


def test_cache_appends_in_place():
    """Appending writes into the buffers it already has: a step after the prefill moves no stored row (the data
    pointer stays), the buffers grow only when full (by a quarter, at least CHUNK rows), and what is returned is
    every row appended, in order (compared with torch.cat, the layout it replaces)."""
    g = torch.Generator().manual_seed(0)
    cache, everything, moves = KVCache(), None, 0
    for T in [300] + [1] * 300 + [7]:
        k = torch.randn(1, 2, T, 4, generator=g)
        before = None if cache.keys is None else cache.keys.data_ptr()
        out_k, out_v = cache.update(k, 2 * k)
        moves += before is not None and cache.keys.data_ptr() != before
        everything = k if everything is None else torch.cat((everything, k), dim=2)
        assert torch.equal(out_k, everything) and torch.equal(out_v, 2 * everything)
        assert out_k.data_ptr() == cache.keys.data_ptr()  # a view of the buffer, not a copy
    # 300 rows fit in 300 + 256; row 557 moves them into 557 + 256 = 813 rows, which hold the rest
    assert cache.length == 607 and moves == 1 and cache.keys.shape[2] == 813
