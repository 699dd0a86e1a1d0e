"""qwen/deltanet.py against transformers' Qwen3_5GatedDeltaNet and its two kernels (the oracles), against hand
computations of the delta rule, and the identity recurrent ≡ chunked (which share no code)."""
import pytest
import torch
from transformers import AutoConfig, DynamicCache, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import (
    Qwen3_5GatedDeltaNet,
    causal_conv1d_fn,
    causal_conv1d_update,
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

from qwen.config import Config
from qwen.deltanet import DeltaNetCache, GatedDeltaNet, causal_conv, chunked_delta_rule, recurrent_delta_rule
from qwen.norm import l2norm
from qwen.weights import Weights, fill


def kernel_inputs(B, T, Hk, H, dk, dv, dtype=torch.float64, seed=0, decay=3.0, state=True):
    """Inputs as the layer makes them: unit q and k (q scaled by dk^-½), β in (0, 1), g ≤ 0. A few tokens decay
    hard (g down to −40): across a 64-token chunk e^(G_i − G_j) then spans far beyond fp32, so any exp taken
    before the causal mask overflows."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)
    q, k = l2norm(rnd(B, T, Hk, dk)) * dk ** -0.5, l2norm(rnd(B, T, Hk, dk))
    g = -decay * torch.rand(B, T, H, generator=gen, dtype=torch.float64)
    g[:, ::17] = -40.0
    beta = torch.rand(B, T, H, generator=gen, dtype=torch.float64)
    S = rnd(B, H, dk, dv) if state else None
    cast = [x.to(dtype) for x in (q, k, rnd(B, T, H, dv), g, beta)]
    return (*cast, S if S is None else S.to(dtype if dtype == torch.float64 else torch.float32))


def scale_tol(want, rel):
    return rel * max(1.0, want.abs().max().item())


# ---------------------------------------------------------------- the delta rule by hand

def test_one_token_by_hand():
    """From S = 0: S = β k vᵀ, so o = β (q·k) v, and the state is that outer product."""
    q, k = torch.tensor([0.6, 0.8]), torch.tensor([1.0, 0.0])
    v, beta = torch.tensor([2.0, -1.0, 0.5]), 0.25
    args = (q.view(1, 1, 1, 2), k.view(1, 1, 1, 2), v.view(1, 1, 1, 3), torch.tensor([[[-0.7]]]),
            torch.tensor([[[beta]]]))
    for rule in (recurrent_delta_rule, chunked_delta_rule):
        out, S = rule(*args)
        torch.testing.assert_close(out.view(3), beta * 0.6 * v)
        torch.testing.assert_close(S.view(2, 3), beta * torch.outer(k, v))


def test_exact_recall_with_orthonormal_keys():
    """β = 1, no decay, orthonormal keys: each write replaces exactly its own slot, so reading with key i gives v_i
    even after every key has been overwritten once with a new value (the old value is subtracted, not added)."""
    dk, n = 8, 5
    keys = torch.linalg.qr(torch.randn(dk, dk, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))[0][:n]
    old, new = torch.randn(n, 3, dtype=torch.float64), torch.randn(n, 3, dtype=torch.float64)
    k = torch.cat([keys, keys]).view(1, 2 * n, 1, dk)
    v = torch.cat([old, new]).view(1, 2 * n, 1, 3)
    ones, zeros = torch.ones(1, 2 * n, 1, dtype=torch.float64), torch.zeros(1, 2 * n, 1, dtype=torch.float64)
    for rule in (recurrent_delta_rule, chunked_delta_rule):
        _, S = rule(k, k, v, zeros, ones)
        torch.testing.assert_close(keys @ S[0, 0], new, rtol=0, atol=1e-12)


def test_decay_by_hand():
    """A single write, then tokens that write nothing (β = 0): the read decays by e^(g_2 + … + g_t)."""
    T = 70  # crosses a chunk boundary
    k = torch.zeros(1, T, 1, 2, dtype=torch.float64)
    k[0, 0, 0, 0] = 1.0
    q = k[:, :1].expand(1, T, 1, 2)
    v = torch.ones(1, T, 1, 1, dtype=torch.float64)
    g = -0.1 * torch.ones(1, T, 1, dtype=torch.float64)
    beta = torch.zeros(1, T, 1, dtype=torch.float64)
    beta[0, 0] = 1.0
    for rule in (recurrent_delta_rule, chunked_delta_rule):
        out, _ = rule(q, k, v, g, beta)
        torch.testing.assert_close(out.view(T), torch.exp(-0.1 * torch.arange(T, dtype=torch.float64)),
                                   rtol=1e-12, atol=0)


# ---------------------------------------------------------------- recurrent ≡ chunked

@pytest.mark.parametrize("T", [1, 3, 63, 64, 65, 200])
@pytest.mark.parametrize("Hk,H", [(2, 2), (2, 4), (1, 3)])
def test_chunked_equals_recurrent_float64(T, Hk, H):
    args = kernel_inputs(2, T, Hk, H, 8, 12, seed=T)
    (o1, s1), (o2, s2) = recurrent_delta_rule(*args), chunked_delta_rule(*args)
    assert o2.dtype == s2.dtype == torch.float64
    print(f"T={T} float64 max |diff| out {(o1 - o2).abs().max():.1e}, state {(s1 - s2).abs().max():.1e}")
    torch.testing.assert_close(o2, o1, rtol=0, atol=1e-12)
    torch.testing.assert_close(s2, s1, rtol=0, atol=1e-12)


@pytest.mark.parametrize("T", [1, 3, 63, 64, 65, 200])
def test_chunked_equals_recurrent_fp32(T):
    args = kernel_inputs(2, T, 2, 4, 16, 8, dtype=torch.float32, seed=T)
    (o1, s1), (o2, s2) = recurrent_delta_rule(*args), chunked_delta_rule(*args)
    assert o2.dtype == s2.dtype == torch.float32
    print(f"T={T} fp32 max |diff| out {(o1 - o2).abs().max():.1e}, state {(s1 - s2).abs().max():.1e}")
    torch.testing.assert_close(o2, o1, rtol=0, atol=scale_tol(o1, 1e-5))
    torch.testing.assert_close(s2, s1, rtol=0, atol=scale_tol(s1, 1e-5))


@pytest.mark.parametrize("chunk_size", [16, 64])
def test_state_carried_across_splits(chunk_size):
    """2 + 68 + 60 tokens, each call starting from the last one's state, equals one pass over all 130."""
    q, k, v, g, beta, S0 = kernel_inputs(1, 130, 2, 4, 8, 8, seed=5)
    want, S_want = recurrent_delta_rule(q, k, v, g, beta, S0)
    for rule in (recurrent_delta_rule, lambda *a: chunked_delta_rule(*a, chunk_size=chunk_size)):
        S, outs = S0, []
        for a, b in [(0, 2), (2, 70), (70, 130)]:
            out, S = rule(q[:, a:b], k[:, a:b], v[:, a:b], g[:, a:b], beta[:, a:b], S)
            outs.append(out)
        torch.testing.assert_close(torch.cat(outs, 1), want, rtol=0, atol=1e-12)
        torch.testing.assert_close(S, S_want, rtol=0, atol=1e-12)


def test_grouped_heads_are_consecutive():
    """Passing Hk key heads equals passing them repeated with repeat_interleave (value head h reads ⌊h/r⌋)."""
    q, k, v, g, beta, S = kernel_inputs(2, 70, 2, 6, 8, 4, seed=3)
    full = [x.repeat_interleave(3, dim=2) for x in (q, k)]
    for rule in (recurrent_delta_rule, chunked_delta_rule):
        torch.testing.assert_close(rule(q, k, v, g, beta, S)[0], rule(*full, v, g, beta, S)[0], rtol=0, atol=1e-13)
    tiled = [x.repeat(1, 1, 3, 1) for x in (q, k)]  # the wrong grouping gives a different answer
    assert (chunked_delta_rule(*tiled, v, g, beta, S)[0] - chunked_delta_rule(q, k, v, g, beta, S)[0]).abs().max() > 0.1


# ---------------------------------------------------------------- kernels against transformers' kernels

@pytest.mark.parametrize("T", [1, 65, 200])
@pytest.mark.parametrize("Hk,H", [(2, 2), (2, 6)])
def test_kernels_match_transformers(T, Hk, H):
    """transformers scales q by dk^-½ itself, so it gets q unscaled; it repeats key heads itself too."""
    q, k, v, g, beta, S = kernel_inputs(2, T, Hk, H, 16, 8, dtype=torch.float32, seed=T + H)
    dk = q.shape[-1]
    for ours, theirs in ((recurrent_delta_rule, torch_recurrent_gated_delta_rule),
                         (chunked_delta_rule, torch_chunk_gated_delta_rule)):
        o1, s1 = ours(q, k, v, g, beta, S)
        o2, s2 = theirs(q * dk ** 0.5, k, v, g, beta, initial_state=S, output_final_state=True)
        print(f"{ours.__name__} vs transformers max |diff| {(o1 - o2).abs().max():.1e}")
        torch.testing.assert_close(o1, o2, rtol=0, atol=scale_tol(o2, 1e-5))
        torch.testing.assert_close(s1, s2, rtol=0, atol=scale_tol(s2, 1e-5))


def test_bf16_inputs_computed_in_fp32():
    """bf16 in: the kernels upcast, keep an fp32 state, and round only the output, so they equal the fp32 kernel
    on the same (bf16) numbers to within one bf16 rounding of the output."""
    q, k, v, g, beta, S = kernel_inputs(1, 80, 2, 2, 16, 16, dtype=torch.bfloat16, seed=9)
    g = g.float()  # the layer computes g in fp32
    want, S_want = recurrent_delta_rule(*(x.float() for x in (q, k, v, g, beta)), S)
    for rule in (recurrent_delta_rule, chunked_delta_rule):
        out, S_out = rule(q, k, v, g, beta, S)
        assert out.dtype == torch.bfloat16 and S_out.dtype == torch.float32
        torch.testing.assert_close(out.float(), want, rtol=2 ** -8, atol=1e-5)
        torch.testing.assert_close(S_out, S_want, rtol=0, atol=scale_tol(S_want, 1e-5))


def test_bad_shapes_get_one_clear_line():
    q, k, v, g, beta, S = kernel_inputs(1, 5, 2, 3, 4, 4, seed=0)
    with pytest.raises(ValueError, match="not a multiple"):
        chunked_delta_rule(q, k, v, g, beta)
    q, k, v, g, beta, S = kernel_inputs(1, 5, 2, 4, 4, 4, seed=0)
    with pytest.raises(ValueError, match=r"beta has shape \(1, 5, 2\), expected \(1, 5, 4\)"):
        recurrent_delta_rule(q, k, v, g, beta[:, :, :2])
    with pytest.raises(ValueError, match="state has shape"):
        chunked_delta_rule(q, k, v, g, beta, S.transpose(-1, -2)[..., :3])


# ---------------------------------------------------------------- the causal conv

def test_causal_conv_by_hand():
    """One channel, taps (1, 2, 3, 4): u_t = silu(x_{t−3} + 2x_{t−2} + 3x_{t−1} + 4x_t), zeros before t = 0."""
    x = torch.tensor([1.0, 10.0, 100.0, 1000.0, 0.0]).view(1, 5, 1) / 1000
    w = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 4)
    u, state = causal_conv(x, w)
    pre = torch.tensor([4.0, 43.0, 432.0, 4321.0, 3210.0]) / 1000
    torch.testing.assert_close(u.view(5), torch.nn.functional.silu(pre))
    torch.testing.assert_close(state.view(3), x.view(5)[-3:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T", [1, 2, 9])
def test_causal_conv_matches_transformers(dtype, T):
    """Without a state against causal_conv1d_fn, with one against causal_conv1d_update (whose state holds K inputs;
    only the newest K − 1 matter). Bit for bit in bf16; in fp32 conv1d's padded path may sum in another order."""
    gen = torch.Generator().manual_seed(T)
    x, w = torch.randn(2, T, 24, generator=gen).to(dtype), torch.randn(24, 1, 4, generator=gen).to(dtype)
    past = torch.randn(2, 24, 4, generator=gen).to(dtype)
    tol = dict(rtol=0, atol=0) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-7)
    got, state = causal_conv(x, w)
    want = causal_conv1d_fn(x.transpose(1, 2), w.squeeze(1), activation="silu").transpose(1, 2)
    torch.testing.assert_close(got, want, **tol)
    got, state = causal_conv(x, w, past[:, :, 1:])
    theirs = past.clone()
    want = causal_conv1d_update(x.transpose(1, 2), theirs, w.squeeze(1), activation="silu").transpose(1, 2)
    torch.testing.assert_close(got, want, **tol)
    assert torch.equal(state, theirs[:, :, 1:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, with_state", [(1, True), (7, True), (70, False)])
def test_causal_conv_equals_conv1d(dtype, T, with_state):
    """The shifted-products sum equals F.conv1d (depthwise, fp32 accumulation, one rounding), then silu: fp32 to
    rounding order, bf16 bit for bit. The kernels differ only in speed."""
    g = torch.Generator().manual_seed(T)
    B, C, K = 2, 48, 4
    x, w = torch.randn(B, T, C, generator=g).to(dtype), torch.randn(C, 1, K, generator=g).to(dtype)
    state = torch.randn(B, C, K - 1, generator=g).to(dtype) if with_state else None
    u, new_state = causal_conv(x, w, state)
    padded = torch.cat([x.new_zeros(B, C, K - 1) if state is None else state, x.transpose(1, 2)], dim=-1)
    want = torch.nn.functional.silu(torch.nn.functional.conv1d(padded, w, groups=C)).transpose(1, 2)
    if dtype == torch.float32:
        torch.testing.assert_close(u, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    else:
        assert torch.equal(u, want)
    assert torch.equal(new_state, padded[:, :, -(K - 1):])

# ---------------------------------------------------------------- the layer against transformers

def hf_config(Hk, Hv, dk, dv, d=48):
    return Qwen3_5TextConfig(hidden_size=d, linear_num_key_heads=Hk, linear_num_value_heads=Hv,
                             linear_key_head_dim=dk, linear_value_head_dim=dv, linear_conv_kernel_dim=4,
                             num_hidden_layers=1, layer_types=["linear_attention"], vocab_size=16)


def twin_layers(hcfg, seed=0):
    """transformers' layer with every parameter random (norm weight, dt_bias, A_log included), and ours loaded
    from its state_dict by name: the load also proves our parameter names and shapes are the checkpoint's."""
    torch.manual_seed(seed)
    theirs = Qwen3_5GatedDeltaNet(hcfg, 0)
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            small = name in ("dt_bias", "A_log", "norm.weight")
            p.copy_(torch.randn_like(p) * (0.5 if small else p.shape[-1] ** -0.5) + (name == "norm.weight"))
    cfg = Config(hidden_size=hcfg.hidden_size, linear_num_key_heads=hcfg.linear_num_key_heads,
                 linear_num_value_heads=hcfg.linear_num_value_heads, linear_key_head_dim=hcfg.linear_key_head_dim,
                 linear_value_head_dim=hcfg.linear_value_head_dim, linear_conv_kernel_dim=4)
    return fill(GatedDeltaNet(cfg), dict(theirs.state_dict())), theirs


def synthetic_layers(path, dtype=torch.float32):
    """Layer 0 of the synthetic checkpoint, in ours and in transformers' class."""
    ours = fill(GatedDeltaNet(Config.load(path)), Weights(path), "layers.0.linear_attn.").to(dtype)
    theirs = Qwen3_5GatedDeltaNet(AutoConfig.from_pretrained(path).text_config, 0).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.fixture(scope="module")
def synthetic_twins(synthetic):
    return synthetic_layers(synthetic)


def inputs(B, T, d, seed=0, dtype=torch.float32):
    return torch.randn(B, T, d, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("Hk,Hv,dk,dv", [(2, 2, 16, 16), (2, 4, 8, 12), (2, 6, 12, 8), (1, 3, 16, 16)])
@torch.no_grad()
def test_layer_matches_transformers_fp32(Hk, Hv, dk, dv):
    ours, theirs = twin_layers(hf_config(Hk, Hv, dk, dv), seed=Hv + dk)
    x = inputs(2, 90, 48)
    got, want = ours(x), theirs(x)
    print(f"Hk={Hk} Hv={Hv} dk={dk} dv={dv}: max |diff| {(got - want).abs().max():.1e}")
    torch.testing.assert_close(got, want, rtol=0, atol=scale_tol(want, 1e-5))


@torch.no_grad()
def test_synthetic_layer_matches_transformers(synthetic_twins):
    ours, theirs = synthetic_twins
    x = inputs(2, 100, ours.in_proj_qkv.in_features, seed=1)
    got, want = ours(x), theirs(x)
    print(f"synthetic layer 0 fp32 max |diff| {(got - want).abs().max():.1e}")
    torch.testing.assert_close(got, want, rtol=0, atol=scale_tol(want, 1e-5))


@torch.no_grad()
def test_left_padding_mask_matches_transformers():
    """Padded positions are zeroed on the input: k = v = 0 there, so the state stays exactly 0 until the text."""
    ours, theirs = twin_layers(hf_config(2, 4, 8, 8), seed=3)
    x = inputs(2, 40, 48, seed=2)
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, :7] = 0
    got, want = ours(x, mask=mask.bool()), theirs(x, attention_mask=mask)
    torch.testing.assert_close(got, want, rtol=0, atol=scale_tol(want, 1e-5))
    alone = ours(x[1:, 7:])  # the padded row equals the unpadded text on its own
    torch.testing.assert_close(got[1:, 7:], alone, rtol=0, atol=scale_tol(alone, 1e-5))


@torch.no_grad()
def test_bf16_layer_within_bf16_rounding(synthetic):
    """What bf16 allows: both layers round q, k, v, z, β, the kernel output and the gated norm to bf16 at the same
    places (the gated norm in transformers' order, chapter 3), so they agree bit for bit except where an fp32
    intermediate computed in a different order lands on the other side of a bf16 rounding boundary. Measured on the
    synthetic layer: 2 outputs in 12,800 differ, each by one bf16 step of its own size. We allow 0.1% of outputs
    to differ, by at most one step of their own size, and require ours to be no further from the float64 answer
    than transformers."""
    ours, theirs = synthetic_layers(synthetic, torch.bfloat16)
    exact = synthetic_layers(synthetic, torch.float64)[0]
    x = inputs(2, 100, ours.in_proj_qkv.in_features, seed=4, dtype=torch.bfloat16)
    got, want, ref = ours(x), theirs(x), exact(x.double())
    diff = (got.float() - want.float()).abs()
    # one bf16 step at each output's own size (at least the smallest normal number)
    own_step = (torch.finfo(torch.bfloat16).eps * want.float().abs()).clamp_min(torch.finfo(torch.bfloat16).tiny)
    err_ours, err_theirs = (got.double() - ref).abs().mean(), (want.double() - ref).abs().mean()
    print(f"bf16: {int((diff > 0).sum())} of {diff.numel()} outputs differ from transformers, at most "
          f"{(diff / own_step).max():.2f} steps of their own size; mean error vs float64: ours {err_ours:.2e}, "
          f"theirs {err_theirs:.2e}")
    assert got.dtype == torch.bfloat16
    assert (diff > 0).float().mean() <= 1e-3
    assert (diff <= own_step).all()
    assert err_ours <= 1.05 * err_theirs


# ---------------------------------------------------------------- the cache

SPLITS = [(0, 2), (2, 70), (70, 130), (130, 131), (131, 132), (132, 133)]  # 2 < K−1 = 3, then decode steps


@torch.no_grad()
def test_cache_equals_full_forward_and_transformers(synthetic, synthetic_twins):
    """Prefill in pieces (the first shorter than the conv), then token by token: equals one full pass, and
    transformers' own cached path over the same pieces."""
    ours, theirs = synthetic_twins
    x = inputs(2, 133, ours.in_proj_qkv.in_features, seed=6)
    full = ours(x)
    cache, hf_cache = DeltaNetCache(), DynamicCache(config=AutoConfig.from_pretrained(synthetic).text_config)
    got = torch.cat([ours(x[:, a:b], cache=cache) for a, b in SPLITS], 1)
    want = torch.cat([theirs(x[:, a:b], cache=hf_cache) for a, b in SPLITS], 1)
    print(f"cached vs full {(got - full).abs().max():.1e}, vs transformers cached {(got - want).abs().max():.1e}")
    torch.testing.assert_close(got, full, rtol=0, atol=scale_tol(full, 1e-5))
    torch.testing.assert_close(got, want, rtol=0, atol=scale_tol(want, 1e-5))
    torch.testing.assert_close(cache.state, hf_cache.layers[0].recurrent_states[0], rtol=0,
                               atol=scale_tol(cache.state, 1e-5))
    assert cache.state.dtype == torch.float32


@torch.no_grad()
def test_bf16_cache_keeps_fp32_state(synthetic):
    layer = synthetic_layers(synthetic, torch.bfloat16)[0]
    cache = DeltaNetCache()
    layer(inputs(1, 5, layer.in_proj_qkv.in_features, dtype=torch.bfloat16), cache=cache)
    assert cache.state.dtype == torch.float32 and cache.conv.dtype == torch.bfloat16


@torch.no_grad()
def test_decode_step_has_fixed_size_whatever_the_prompt(synthetic_twins):
    """A KV cache grows with the prompt; this one does not. Shapes and bytes held (no timing)."""
    ours = synthetic_twins[0]
    d, C = ours.in_proj_qkv.in_features, ours.in_proj_qkv.out_features
    shapes = []
    for T in (3, 300):
        cache = DeltaNetCache()
        ours(inputs(1, T, d), cache=cache)
        for x in (cache.conv, cache.state):  # the memory held, not only the shape: a view would pin the prompt
            assert x.untyped_storage().nbytes() == x.numel() * x.element_size()
        ours(inputs(1, 1, d, seed=T), cache=cache)
        shapes.append((tuple(cache.conv.shape), tuple(cache.state.shape)))
    assert shapes[0] == shapes[1] == ((1, C, 3), (1, ours.Hv, ours.dk, ours.dv))
