"""qwen/csrc/deltastep.cpp (through qwen/kernel.py's delta_decode and qwen/kernels.py's fused_remember): one token
through a DeltaNet layer's memory in C++, against the teaching modules computed in float64.

The oracle is qwen/deltanet.py's own steps in float64: causal_conv for the conv and the window it leaves, the
layer's split_heads and gates, recurrent_delta_rule for the output and the new state. fp32 against that float64:
within 1e-5 of each tensor's largest entry (fp32's relative tolerance), over several tokens in a row, so an error
in the state shows in every later output. The conv window is copied, never summed: it must be exact.

Planted and caught (each in a copy of deltastep.cpp named by KERNEL_UNDER_TEST, tests/helpers.py's
kernel_under_test, which every test here then runs): value head h reading
key head h mod Hk instead of h / (H/Hk); β left out of the correction; the decay applied after Sᵀk; the window
not moved on; q not divided by √dk; the conv's silu replaced by sigmoid.
"""
import copy

import pytest
import torch

from qwen import deltanet, kernel
from qwen.config import Config
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.fast import FastDeltaNet, load_fast
from qwen.kernels import FusedGatedRMSNorm, FusedRMSNorm, fused_remember
from qwen.model import load_model
from qwen.norm import GatedRMSNorm, RMSNorm

pytestmark = pytest.mark.usefixtures("one_thread", "under_test")
# (Hk, Hv, dk, dv, conv kernel): equal heads; value heads sharing a key head (the 2B and up); dk != dv; K = 2
SHAPES = [(2, 2, 16, 16, 4), (2, 6, 16, 8, 4), (1, 3, 8, 24, 2)]


def layer_of(Hk, Hv, dk, dv, K, seed):
    cfg = Config(hidden_size=32, linear_num_key_heads=Hk, linear_num_value_heads=Hv, linear_key_head_dim=dk,
                 linear_value_head_dim=dv, linear_conv_kernel_dim=K, num_hidden_layers=1,
                 layer_types=["linear_attention"])
    torch.manual_seed(seed)
    m = GatedDeltaNet(cfg)
    with torch.no_grad():
        m.conv1d.weight.normal_()
        m.A_log.uniform_(-1, 1)
        m.dt_bias.normal_()
    return m


def inputs(m, B, T, seed):
    """Projections' outputs for T tokens (qkv, b, a) and a cache as a prompt would leave it, all fp32."""
    g = torch.Generator().manual_seed(seed)
    C = 2 * m.Hk * m.dk + m.Hv * m.dv
    cache = DeltaNetCache()
    cache.conv = torch.randn(B, C, m.conv1d.weight.shape[-1] - 1, generator=g)
    cache.state = torch.randn(B, m.Hv, m.dk, m.dv, generator=g) * 0.3
    return (torch.randn(B, T, C, generator=g), torch.randn(B, T, m.Hv, generator=g) * 2,
            torch.randn(B, T, m.Hv, generator=g) * 2, cache)


@torch.no_grad()
def float64_remember(m, qkv, b, a, cache):
    """The teaching steps in float64: conv, heads, gates, then recurrent_delta_rule. Returns o, conv window, state."""
    m64 = copy.deepcopy(m).double()
    u, conv = deltanet.causal_conv(qkv.double(), m64.conv1d.weight, cache.conv.double())
    q, k, v = m64.split_heads(u)
    q, k = q.double(), k.double()  # split_heads normalises in fp32: its float() is the identity on float64
    beta, g = m64.gates(b.double(), a.double())
    o, state = deltanet.recurrent_delta_rule(q, k, v, g.double(), beta, cache.state.double())
    return o, conv, state


def assert_close64(got, want, what):
    err, scale = float((got.double() - want).abs().max()), float(want.abs().max())
    assert err <= 1e-5 * scale, f"{what}: max |fp32 − float64| = {err:.3g} > 1e-5 × {scale:.3g}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "Hk{}-Hv{}-dk{}-dv{}-K{}".format(*s))
@pytest.mark.parametrize("B", [1, 2])
def test_fused_step_is_the_teaching_rule_in_float64(shape, B):
    m = layer_of(*shape, seed=sum(shape) + B)
    qkv, b, a, cache = inputs(m, B, 5, seed=B)
    want_o, want_conv, want_state = float64_remember(m, qkv, b, a, cache)
    with torch.no_grad():
        o = fused_remember(m, qkv, b, a, cache)  # the cache's window and state move on in place
    assert o.shape == want_o.shape and o.dtype == torch.float32
    assert_close64(o, want_o, "o")
    assert_close64(cache.state, want_state, "state")
    assert torch.equal(cache.conv.double(), want_conv), "the conv window is copied: it must be exact"


def test_the_fast_model_fuses_only_chapter_13s_model(folders):
    """load_fast: the fp32 models in llama.cpp's formats take the C++ step and norms (qwen/csrc/norms.cpp), each norm
    holding the weight it held, under its name; every other model keeps torch's."""
    folder = next(iter(folders.values()))
    for dtype, quant, want in ((torch.float32, "q8_0", True), (torch.float32, "q4_0", True),
                               (torch.bfloat16, "q8_0", False), (torch.float32, "int8", False),
                               (torch.float32, None, False)):
        model = load_fast(folder, dtype, quant=quant, quiet=True)
        layers = [m for m in model.modules() if isinstance(m, FastDeltaNet)]
        assert layers and all(m.fused == want for m in layers), (dtype, quant)
        norms = {name: m for name, m in model.named_modules() if isinstance(m, (RMSNorm, GatedRMSNorm))}
        fused = {name for name, m in norms.items() if isinstance(m, (FusedRMSNorm, FusedGatedRMSNorm))}
        assert norms and fused == (set(norms) if want else set()), (dtype, quant)
        if want:
            plain, ours = load_model(folder, torch.float32).state_dict(), model.state_dict()
            assert all(torch.equal(ours[f"{name}.weight"], plain[f"{name}.weight"]) for name in norms)


def test_bad_input_is_refused_in_words():
    m = layer_of(2, 2, 16, 16, 4, seed=0)
    qkv, b, a, cache = inputs(m, 1, 1, seed=0)
    w = m.conv1d.weight[:, 0].detach()
    args = dict(qkv=qkv[:, 0], conv_w=w, conv=cache.conv, b=b[:, 0], a=a[:, 0], A_log=m.A_log.detach(),
                dt_bias=m.dt_bias.detach(), state=cache.state, Hk=2)
    cases = [
        (dict(Hk=3), "qkv has 96 channels; 3 key heads of 16 and 2 value heads of 16 need"),
        (dict(qkv=qkv[:, 0, :-1]), "qkv has 95 channels"),
        (dict(conv=cache.conv[..., :2].contiguous()), "the conv's window must be (B, C, K−1)"),
        (dict(b=b[:, 0, :1].contiguous()), "b, a (B, H), A_log and dt_bias (H) must match S's heads"),
        (dict(state=cache.state.double()), "S must be a contiguous 4-D fp32 tensor on the CPU"),
        (dict(conv=cache.conv.transpose(1, 2)), "conv must be a contiguous 3-D fp32 tensor"),
    ]
    for change, message in cases:
        with pytest.raises(RuntimeError) as caught:
            kernel.delta_decode(**{**args, **change})
        assert message in str(caught.value), f"{message!r} not in {str(caught.value).splitlines()[0]!r}"
