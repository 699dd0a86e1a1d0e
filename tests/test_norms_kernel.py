"""qwen/csrc/norms.cpp (through qwen/kernel.py's rms_norm and gated_rms_norm, and qwen/kernels.py's fused norms):
RMSNorm and the gated RMSNorm in one C++ call, against qwen/norm.py's teaching modules computed in float64.

fp32 against float64: within 1e-5 of each output's largest entry (fp32's relative tolerance), on rows of the
0.8B's widths (1024 for the residual stream, 256 for a head, 128 for a DeltaNet value head) and odd ones, with
entries over four orders of magnitude. Where the norm is not the kernel's (bf16, or the kernel not asked for) the
fused module is the teaching one, bit for bit.

Planted and caught (each in a copy of norms.cpp named by KERNEL_UNDER_TEST, tests/helpers.py's kernel_under_test,
which every test here then runs): the weight used as w instead of 1 + w; eps added outside the root; the mean
taken over D − 1; silu(z) replaced by sigmoid(z).
"""
import copy

import pytest
import torch

from qwen import kernel
from qwen.kernels import FusedGatedRMSNorm, FusedRMSNorm
from qwen.norm import GatedRMSNorm, RMSNorm

pytestmark = pytest.mark.usefixtures("one_thread", "under_test")
SHAPES = [(1, 1024), (8, 256), (3, 128), (2, 5, 96), (1, 37)]  # (..., D)


def spread(shape, seed):
    """Entries over four orders of magnitude, both signs: the sum of squares is dominated by a few."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 10 ** (4 * torch.rand(shape, generator=g) - 2)


def fused_twin(module, twin):
    """`module`'s fused twin holding the same weight, as qwen.kernels.fuse makes it."""
    new = twin(len(module.weight), module.eps)
    new.weight = module.weight
    return new


def assert_close64(got, want):
    err, scale = float((got.double() - want).abs().max()), float(want.abs().max())
    assert err <= 1e-5 * scale, f"max |fp32 − float64| = {err:.3g} > 1e-5 × {scale:.3g}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_is_the_teaching_norm_in_float64(shape):
    teaching = RMSNorm(shape[-1])
    with torch.no_grad():
        teaching.weight.copy_(spread(shape[-1:], seed=1))  # zero-centred: the scale is 1 + w
    x = spread(shape, seed=len(shape) + shape[-1])
    with torch.no_grad():
        want = copy.deepcopy(teaching).double()(x.double())
        got = fused_twin(teaching, FusedRMSNorm)(x)
    assert got.shape == x.shape and got.dtype == torch.float32
    assert_close64(got, want)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gated_rms_norm_is_the_teaching_norm_in_float64(shape):
    teaching = GatedRMSNorm(shape[-1])
    with torch.no_grad():
        teaching.weight.copy_(1 + spread(shape[-1:], seed=2))  # plain weight: the scale is w
    x, z = spread(shape, seed=3), torch.randn(shape, generator=torch.Generator().manual_seed(4)) * 4
    with torch.no_grad():
        want = copy.deepcopy(teaching).double()(x.double(), z.double())
        got = fused_twin(teaching, FusedGatedRMSNorm)(x, z)
    assert got.shape == x.shape and got.dtype == torch.float32
    assert_close64(got, want)


def test_not_fp32_on_the_cpu_is_the_teaching_norm():
    """bf16 rows take the teaching forward: the bf16 model keeps transformers' roundings."""
    teaching, gated = RMSNorm(64), GatedRMSNorm(64)
    with torch.no_grad():
        teaching.weight.normal_()
    x, z = spread((2, 64), seed=5).bfloat16(), torch.randn(2, 64).bfloat16()
    with torch.no_grad():
        assert torch.equal(fused_twin(teaching, FusedRMSNorm)(x), teaching(x))
        assert torch.equal(fused_twin(gated, FusedGatedRMSNorm)(x, z), gated(x, z))


def test_bad_input_is_refused_in_words():
    x, w = torch.randn(2, 64), torch.randn(64)
    cases = [
        (lambda: kernel.built().rms_norm(x.double(), w, 1e-6, 1.0), "x must be a contiguous 2-D fp32 tensor"),
        (lambda: kernel.built().rms_norm(x, w[:63], 1e-6, 1.0), "w must be a contiguous fp32 vector of x's width 64"),
        (lambda: kernel.built().gated_rms_norm(x, x[:1], w, 1e-6), "the gate z must have x's shape"),
        (lambda: kernel.built().gated_rms_norm(x, x.t(), w, 1e-6), "z must be a contiguous 2-D fp32 tensor"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError) as caught:
            call()
        assert message in str(caught.value), f"{message!r} not in {str(caught.value).splitlines()[0]!r}"
