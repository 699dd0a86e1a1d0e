"""qwen/products.py: the packed product against F.linear and float64 (fp32 within the classical bound on a sum's
rounding, bf16 within one bf16 step), which kernel a product takes (one bf16 row: chapter 13's bf16 dot where it is
built), the packed copy kept in step with its weight, and the fallback to F.linear
where oneDNN is absent, giving the fast path the answers it gives with packing switched off. The fast path with
packed weights against transformers and the teaching model: tests/test_fast.py."""
import pytest
import torch
import torch.nn.functional as F

from helpers import bf16_steps, fp32_tol, ids_for
from qwen import kernel
from qwen.fast import load_fast
from qwen.products import PackedLinear, can_pack, numerics, pack, pack_all, packed_bytes, packed_product

CPU = torch.device("cpu")
SHAPES = [(1, 1024, 3584), (5, 1024, 1024), (64, 256, 4000)]  # (rows, d_in, d_out): decode, a verify pass, a prompt


def operands(rows, d_in, d_out, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, d_in, generator=g).to(dtype), torch.randn(d_out, d_in, generator=g).to(dtype)


@pytest.mark.parametrize("rows, d_in, d_out", SHAPES)
def test_packed_fp32_product_within_the_rounding_bound(rows, d_in, d_out):
    """fp32: each output of the packed product lies within γ = d_in·u/(1 − d_in·u) (u = 2⁻²⁴) of Σ|x_i w_i| from
    the exact (float64) product: the bound on any order of summing d_in fp32 products (Higham, Accuracy and
    Stability of Numerical Algorithms, 3.1). The kernel sums in its own order, so it need not equal F.linear's bits
    (it does not here); F.linear is held to the same bound as a check of the check. A transposed or shifted packing
    is off by about the outputs' size."""
    if not can_pack(CPU, torch.float32):
        pytest.skip("this torch has no oneDNN packed linear on the CPU")
    x, W = operands(rows, d_in, d_out, torch.float32)
    exact = x.double() @ W.double().T
    u = 2.0 ** -24
    bound = d_in * u / (1 - d_in * u) * (x.double().abs() @ W.double().abs().T)
    got = packed_product(x, pack(W))
    assert got.dtype == torch.float32 and got.shape == (rows, d_out)
    ratio = ((got.double() - exact).abs() / bound).max().item()
    print(f"packed fp32 ({rows}x{d_in} by {d_out}x{d_in}): worst error {ratio:.3f} of the bound; "
          f"bit-identical to F.linear: {torch.equal(got, F.linear(x, W))}")
    assert ratio <= 1
    assert ((F.linear(x, W).double() - exact).abs() <= bound).all()


@pytest.mark.parametrize("rows, d_in, d_out", SHAPES)
def test_packed_bf16_product_within_one_step_of_linear(rows, d_in, d_out):
    """bf16: oneDNN and F.linear both multiply bf16 numbers exactly into fp32, sum in fp32 and round once, so two
    results differ only where their sums' orders round to neighbouring bf16 numbers: at most one bf16 step of each
    row's largest output. (Reported bit-identical on a CPU with AVX-512 BF16 instructions; this check is what holds
    on any such CPU.) Only where oneDNN multiplies bf16 on this CPU (`can_pack`): without AVX-512 or AVX-NE-CONVERT
    it refuses to pack bf16, and the fast path keeps F.linear."""
    if not can_pack(CPU, torch.bfloat16):
        pytest.skip("oneDNN does not multiply bf16 on this CPU (needs AVX-512 or AVX-NE-CONVERT): F.linear is used")
    x, W = operands(rows, d_in, d_out, torch.bfloat16)
    got, want = packed_product(x, pack(W)), F.linear(x, W)
    print(f"packed bf16: bit-identical to F.linear: {torch.equal(got, want)}")
    assert got.dtype == torch.bfloat16 and bf16_steps(got.float(), want.float()).max().item() <= 1


def test_capability_not_timing(monkeypatch):
    """Packing is a capability: never on a GPU or MPS, never without oneDNN or its ops, bf16 only where oneDNN
    multiplies it (its own check), fp16 never."""
    assert not can_pack(torch.device("cuda"), torch.float32) and not can_pack(torch.device("mps"), torch.float32)
    assert not can_pack(CPU, torch.float16)
    assert can_pack(CPU, torch.bfloat16) == (can_pack(CPU, torch.float32)
                                             and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert not can_pack(CPU, torch.float32) and not can_pack(CPU, torch.bfloat16)


@torch.no_grad()
def test_one_bf16_row_takes_the_hand_dot_and_more_rows_onednn(monkeypatch):
    """A bf16 product of one row reads the weight itself with chapter 13's bf16 dot where it is built (`hand_rows`:
    the same bits as kernel.bf16_rows, a row's own; its bound to float64 is in tests/test_kernel.py); two rows and
    more read the packed copy (oneDNN's bits); fp32 always the packed copy. Without the kernel's bf16 dot one row
    takes oneDNN too."""
    if not can_pack(CPU, torch.bfloat16):
        pytest.skip("oneDNN does not multiply bf16 on this CPU: the layer keeps F.linear, as tested above")
    x, W = operands(3, 1024, 512, torch.bfloat16, seed=5)
    layer = PackedLinear(1024, 512).requires_grad_(False).to(torch.bfloat16)
    layer.weight.copy_(W)
    pack_all(layer)
    if kernel.bf16_rows_run():
        assert torch.equal(layer(x[:1]), kernel.bf16_rows(x[:1], W)) and layer.reads(x[:1]) is layer.weight
    assert torch.equal(layer(x[:2]), packed_product(x[:2], pack(W))) and layer.reads(x[:2]).is_mkldnn
    assert torch.equal(layer(x[None, :2]), packed_product(x[None, :2], pack(W)))  # (1, 2, d): two rows
    monkeypatch.setattr(kernel, "bf16_rows_run", lambda: False)
    assert torch.equal(layer(x[:1]), packed_product(x[:1], pack(W)))
    fp32 = PackedLinear(1024, 512).requires_grad_(False)
    fp32.weight.copy_(W.float())
    pack_all(fp32)
    assert fp32.reads(x[:1].float()).is_mkldnn


@torch.no_grad()
def test_packed_copy_follows_its_weight():
    """The packed copy is remade when its weight changes, so a product never reads a stale copy: an edit in place,
    a loaded state_dict, a .to() to another dtype (to F.linear where that dtype does not pack). Each product equals
    the packed product of a fresh pack of the new weight (bits), and is never the old weight's. A weight that
    requires grad, under autograd, takes F.linear (the oneDNN op has no backward)."""
    if not can_pack(CPU, torch.float32):
        pytest.skip("this torch has no oneDNN packed linear on the CPU")
    x, W = operands(3, 64, 96, torch.float32)
    layer = PackedLinear(64, 96).requires_grad_(False)
    layer.weight.copy_(W)
    pack_all(layer)
    first = layer._packed
    assert first is not None and torch.equal(layer(x), packed_product(x, pack(W)))
    assert layer._packed is first  # packed once, not per call
    layer.weight.mul_(2)
    assert torch.equal(layer(x), packed_product(x, pack(2 * W)))
    layer.load_state_dict({"weight": -W})
    assert torch.equal(layer(x), packed_product(x, pack(-W)))
    layer.to(torch.bfloat16)
    want = packed_product(x.bfloat16(), pack(-W.bfloat16())) if can_pack(CPU, torch.bfloat16) else \
        F.linear(x.bfloat16(), -W.bfloat16())
    assert torch.equal(layer(x.bfloat16()), want)
    trained = PackedLinear(64, 96)
    pack_all(trained)
    with torch.enable_grad():
        trained(x).sum().backward()
    assert torch.equal(trained.weight.grad, x.sum(0).expand(96, -1))  # d Σ(x Wᵀ) / dW: each row Σ_t x_t


@pytest.fixture(scope="module")
def plain_logits(synthetic):
    """The fast path with packing switched off (F.linear everywhere), fp32 and bf16: prompt, then cached steps."""
    ids = ids_for(248320, seed=5, shape=(1, 40))
    return ids, {dtype: steps(load_fast(synthetic, dtype, packing=False), ids) for dtype in (torch.float32,
                                                                                             torch.bfloat16)}


@torch.no_grad()
def steps(model, ids, prompt=30):
    """Logits of the prompt's positions, then of each later token decoded with a cache."""
    cache = model.new_cache()
    return torch.cat([model(ids[:, :prompt], cache=cache)] +
                     [model(ids[:, t:t + 1], cache=cache) for t in range(prompt, ids.shape[1])], 1)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fallback_without_onednn(monkeypatch, synthetic, plain_logits, dtype):
    """With oneDNN reported absent, load_fast packs nothing (no copy held, the numerics line says F.linear) and
    gives exactly the logits of the fast path with packing switched off. Where this CPU packs the dtype, the packed
    model holds one copy of every projection's weight and of the tied head's (the embedding table), and in fp32
    its logits lie within fp32 rounding of those."""
    ids, plain = plain_logits
    packed = load_fast(synthetic, dtype)
    weights = sum(p.numel() * p.element_size() for p in packed.parameters())  # the tied table counted once
    if can_pack(CPU, dtype):  # every projection and the head: all matrices but the conv, the table counted once
        matrices = sum(m.weight.numel() * m.weight.element_size() for m in packed.modules()
                       if isinstance(m, PackedLinear))
        assert packed_bytes(packed) == matrices and 0 < matrices < weights
        assert "oneDNN-packed" in numerics(packed)
        hand = dtype == torch.bfloat16 and kernel.bf16_rows_run()  # one bf16 row: chapter 13's dot, said so
        assert ("one-row products (decode): chapter 13's bf16 dot" in numerics(packed)) == hand
        if dtype == torch.float32:  # bf16: held to transformers' bits in test_fast.py
            assert (steps(packed, ids) - plain[dtype]).abs().max().item() <= fp32_tol(plain[dtype])
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    fallback = load_fast(synthetic, dtype)
    assert packed_bytes(fallback) == 0 and "projections F.linear" in numerics(fallback)
    assert all(m._packed is None for m in fallback.modules() if isinstance(m, PackedLinear))
    assert torch.equal(steps(fallback, ids), plain[dtype])
