"""qwen/quantized.py and qwen.measure's KL: the packed products against the exact product of the dequantized weight
(fp64, the codes from qwen/quant.py, which tests/test_quant.py proves against the gguf package and by hand), the
embedding rows against those codes exactly, the quantized live model against the teaching path of the same numbers
(fake_quantize of qwen.model.load_model) in bf16 and fp32, prompt and teacher-forced cached decode, the dequantized
fallback against the packed path, cache continuation against the full pass, and the quality cost (KL and top-1
against the unquantized bf16 model) on the small checkpoints. next_token_kl against torch.distributions and a
hand computation.

The bf16 bounds are multiples of a yardstick measured in the same run: how far the UNQUANTIZED bf16 fast model
lies from the same reference. The random layers amplify one bf16 step anywhere into many steps of the logits (see
tests/test_fast.py), so a fixed count of steps would say more about the checkpoint than about the code."""
import pytest
import torch
import torch.nn as nn

import qwen.quantized
from helpers import bf16_steps, fp32_tol, ids_for
from qwen.fast import load_fast
from qwen.measure import next_token_kl, top1_agreement
from qwen.model import load_model
from qwen.quant import quantize_int4, quantize_int4_zero, quantize_int8
from qwen.quantized import QuantEmbedding, QuantLinear, fake_quantize, has_kernel, quantize_model
from qwen.weights import load_weights

SCHEMES = {"int8": ("int8", False), "int4": ("int4", False), "int4 symmetric": ("int4", True)}
TIED, UNTIED = "Hv=Hk, GQA 1, tied", "Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"
PROMPT, STEPS = 70, 10
kernel = pytest.mark.skipif(not has_kernel("int4", torch.device("cpu"), torch.bfloat16),
                            reason="this torch has no packed int4 CPU kernel")


def exact_weight(w, scheme, symmetric, dtype):
    """The weight the codes stand for, in fp64, straight from qwen/quant.py: scales (and zero points m + 8·s, the
    kernels' form) rounded to `dtype` as the model stores them."""
    if scheme == "int8":
        q, s = quantize_int8(w)
        return q.double() * s.to(dtype).double()[:, None]
    if symmetric:
        q, s = quantize_int4(w)
        q, z = q + 8, torch.zeros_like(s)
    else:
        q, s, m = quantize_int4_zero(w)
        z = m + 8 * s
    N, G = s.shape
    return ((q.double() - 8).reshape(N, G, -1) * s.to(dtype).double()[..., None]
            + z.to(dtype).double()[..., None]).flatten(1)


# ---------------------------------------------------------------- one product

@kernel
@pytest.mark.parametrize("T", [1, 5])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_packed_product_equals_exact_product(monkeypatch, scheme, T):
    """bf16: the packed kernel's result is the exact product x·Wᵀ of the dequantized weight rounded once (within
    half a bf16 step of each row's largest output, measured 0.50); the dequantized path rounds the weight to bf16
    first (within one step, measured 0.82). fp32 activations (the kernel forced: the model never sends them there)
    within 1e-5 of the outputs' scale. 392 outputs: not a multiple of 16, so int4's padding rows are exercised."""
    name, symmetric = SCHEMES[scheme]
    g = torch.Generator().manual_seed(0)
    linear = nn.Linear(128, 392, bias=False)
    linear.weight.data = torch.randn(392, 128, generator=g).bfloat16()
    layer = QuantLinear(linear, name, symmetric=symmetric, rows=True)
    assert layer.kernel
    W = exact_weight(linear.weight, name, symmetric, torch.bfloat16)
    x = torch.randn(T, 128, generator=g).bfloat16()
    want = x.double() @ W.T
    got, fallback = layer.packed_product(x), layer.dequantized_product(x)
    assert got.dtype == torch.bfloat16 and got.shape == (T, 392)
    assert bf16_steps(got.double(), want).max() <= 0.51 and bf16_steps(fallback.double(), want).max() <= 1
    monkeypatch.setattr(qwen.quantized, "KERNEL_DTYPES", (torch.bfloat16, torch.float32))
    linear.weight.data = linear.weight.data.float()
    layer = QuantLinear(linear, name, symmetric=symmetric)
    W = exact_weight(linear.weight, name, symmetric, torch.float32)
    got, want = layer.packed_product(x.float()), x.double() @ W.T
    assert layer.kernel and ((got.double() - want).abs().max() <= 1e-5 * want.abs().max())


# ---------------------------------------------------------------- the embedding

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("which", ["synthetic", UNTIED])
def test_embedding_rows_equal_the_codes(folders, synthetic, which, scheme):
    """The lookup of a quantized model returns exactly the rows its codes stand for (computed from qwen/quant.py's
    codes of the checkpoint's table), and exactly the teaching model's fake-quantized rows. Tied: the head's codes
    (one copy); untied: the embedding's own, and the head's differ."""
    folder = synthetic if which == "synthetic" else folders[which]
    name, symmetric = SCHEMES[scheme]
    model = quantize_model(load_fast(folder, torch.bfloat16), name, symmetric=symmetric)
    teaching = fake_quantize(load_model(folder, torch.bfloat16), name, symmetric=symmetric)
    E = load_weights(folder)["embed_tokens.weight"].bfloat16()
    ids = ids_for(E.shape[0], shape=(2, 9))
    want = exact_weight(E, name, symmetric, torch.bfloat16).bfloat16()[ids]
    got = model.embed_tokens(ids)
    assert isinstance(model.embed_tokens, QuantEmbedding) and got.dtype == torch.bfloat16
    assert torch.equal(got, want) and torch.equal(got, teaching.embed_tokens(ids))
    assert (model.embed_tokens.table is model.lm_head) == (which == "synthetic")


# ---------------------------------------------------------------- the whole model

@torch.no_grad()
def forced(model, ids):
    """Logits (B, PROMPT + STEPS, V) in fp32: the prompt's positions, then each forced token's, one cache."""
    cache = model.new_cache()
    out = [model(ids[:, :PROMPT], cache=cache)]
    out += [model(ids[:, t:t + 1], cache=cache) for t in range(PROMPT, ids.shape[1])]
    return torch.cat(out, 1).float()


@pytest.fixture(scope="module")
def runs(folders, synthetic):
    """Per checkpoint and scheme, bf16: the packed model, its fallback (packing=False), the teaching path in bf16
    and written exactly in fp32 (a bf16 model's codes and scales in fp32 weights), each teacher-forced; the
    yardsticks: the unquantized fast and teaching models likewise."""
    out = {}
    for which in ("synthetic", TIED, UNTIED):
        folder = synthetic if which == "synthetic" else folders[which]
        ids = ids_for(load_model(folder).cfg.vocab_size, seed=3, shape=(1, PROMPT + STEPS))
        exact = lambda f=folder: load_model(f, torch.bfloat16).float()  # noqa: E731  bf16 weights, fp32 sums
        base = {"fast": forced(load_fast(folder, torch.bfloat16), ids),
                "teaching": forced(load_model(folder, torch.bfloat16), ids), "exact": forced(exact(), ids)}
        for scheme, (name, symmetric) in SCHEMES.items():
            out[which, scheme] = base, {
                "packed": forced(quantize_model(load_fast(folder, torch.bfloat16), name, symmetric=symmetric), ids),
                "fallback": forced(quantize_model(load_fast(folder, torch.bfloat16), name, symmetric=symmetric,
                                                  packing=False), ids),
                "teaching": forced(fake_quantize(load_model(folder, torch.bfloat16), name, symmetric=symmetric), ids),
                "exact": forced(fake_quantize(exact(), name, symmetric=symmetric, scale_dtype=torch.bfloat16), ids)}
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("which", ["synthetic", TIED, UNTIED])
def test_bf16_quantized_equals_teaching_path(runs, which, scheme):
    """bf16, prompt and teacher-forced cached decode. The packed model against the teaching path of its exact
    numbers (fp32 arithmetic): no further than RATIO times the unquantized bf16 fast model lies from its own exact
    teaching path (the same roundings of activations; the kernels add none to the weights). The fallback against
    the bf16 teaching model, which holds the same bf16 weights: as far as the unquantized fast path lies from the
    teaching one, times RATIO. The packed path against the fallback: the two yardsticks added, times RATIO."""
    base, q = runs[which, scheme]
    yard_exact = bf16_steps(base["fast"], base["exact"]).max().item()
    yard_teach = bf16_steps(base["fast"], base["teaching"]).max().item()
    packed = bf16_steps(q["packed"], q["exact"]).max().item()
    fallback = bf16_steps(q["fallback"], q["teaching"]).max().item()
    between = bf16_steps(q["packed"], q["fallback"]).max().item()
    print(f"{which}, {scheme}: packed vs exact teaching {packed:.1f} bf16 steps (unquantized {yard_exact:.1f}); "
          f"fallback vs bf16 teaching {fallback:.1f} ({yard_teach:.1f}); packed vs fallback {between:.1f}")
    assert packed <= RATIO * max(yard_exact, 1)
    assert fallback <= RATIO * max(yard_teach, 1)
    assert between <= RATIO * max(yard_exact + yard_teach, 1)


RATIO = 3


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_fp32_quantized_equals_teaching_path(folders, scheme):
    """fp32 (the dequantized path: the kernels are for bf16): prompt and cached decode within the fp32 tolerance of
    the teaching model of the same numbers; the cache continuation within it of the full pass."""
    folder = folders[TIED]
    ids = ids_for(512, seed=3, shape=(2, PROMPT + STEPS))
    model = load_fast(folder, torch.float32, quant=scheme)
    want = forced(fake_quantize(load_model(folder, torch.float32), scheme), ids)
    got = forced(model, ids)
    with torch.no_grad():
        full = model(ids).float()
    assert not any(m.kernel for m in model.modules() if isinstance(m, QuantLinear))
    assert (got - want).abs().max() <= fp32_tol(want) and (got - full).abs().max() <= fp32_tol(full)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_bf16_cache_continuation_equals_full_pass(folders, scheme):
    """bf16 packed: prompt then steps against one pass over all tokens, within RATIO times the unquantized fast
    model's own distance between the two (its DeltaNet steps and chunked rule round differently)."""
    folder = folders[UNTIED]
    ids = ids_for(512, seed=4, shape=(1, PROMPT + STEPS))
    with torch.no_grad():
        dist = []
        for model in (load_fast(folder, torch.bfloat16), load_fast(folder, torch.bfloat16, quant=scheme)):
            dist.append(bf16_steps(forced(model, ids), model(ids).float()).max().item())
    print(f"{scheme}: cached vs full {dist[1]:.1f} bf16 steps (unquantized {dist[0]:.1f})")
    assert dist[1] <= RATIO * max(dist[0], 1)


# ---------------------------------------------------------------- quality

KL_RATIO = {"int8": 10, "int4": 500, "int4 symmetric": 1000}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_quality_against_bf16(folders, scheme):
    """Teacher-forced, against the unquantized bf16 fast model on the small checkpoints: the mean KL per position,
    as a multiple of the yardstick KL(fp32 ‖ bf16), the cost of bf16 itself (measured: int8 3.0-8.6 times it,
    int4 200-420 times, symmetric int4 280-660 times; the yardstick is 2e-4 to 1.2e-3 on these random
    checkpoints, whose weights are stored in fp32)."""
    name, symmetric = SCHEMES[scheme]
    lines, bad = [], []
    for which, folder in folders.items():
        ids = ids_for(512, seed=3, shape=(2, PROMPT + STEPS))
        ref, f32 = forced(load_fast(folder, torch.bfloat16), ids), forced(load_fast(folder, torch.float32), ids)
        got = forced(quantize_model(load_fast(folder, torch.bfloat16), name, symmetric=symmetric), ids)
        kl, yard = next_token_kl(ref, got), next_token_kl(f32, ref).mean().item()
        lines.append(f"{which}: KL mean {kl.mean():.2e} max {kl.max():.2e} (bf16 vs fp32 {yard:.2e}), top-1 "
                     f"{top1_agreement(ref, got):.1%}")
        bad += [which] if kl.mean() > KL_RATIO[scheme] * yard else []
    print("\n".join(lines))
    assert not bad, "\n".join(lines)


# ---------------------------------------------------------------- the measure

def test_next_token_kl_by_hand_and_identities():
    """p = softmax(0, ln 3) = (1/4, 3/4), q uniform: KL = 1/4·ln(1/2) + 3/4·ln(3/2); random logits against
    torch.distributions; KL(p ‖ p) = 0, KL ≥ 0, not symmetric; top-1 agreement counted by hand."""
    kl = next_token_kl(torch.tensor([0.0, torch.log(torch.tensor(3.0))]), torch.zeros(2))
    assert kl.shape == () and abs(kl.item() - (0.25 * torch.log(torch.tensor(0.5)) + 0.75 * torch.log(
        torch.tensor(1.5))).item()) < 1e-7
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 7, 11, generator=g, dtype=torch.float64), torch.randn(4, 7, 11, generator=g,
                                                                                dtype=torch.float64) * 3
    C = torch.distributions.Categorical
    torch.testing.assert_close(next_token_kl(a, b), torch.distributions.kl_divergence(C(logits=a), C(logits=b)))
    assert next_token_kl(a, b).shape == (4, 7) and (next_token_kl(a, b) > 0).all()
    assert (next_token_kl(a, a) == 0).all() and not torch.allclose(next_token_kl(a, b), next_token_kl(b, a))
    assert next_token_kl(a.bfloat16(), b.bfloat16()).dtype == torch.float64
    ref, other = torch.tensor([[1.0, 0], [0, 1], [1, 0]]), torch.tensor([[1.0, 0], [1, 0], [0, 1]])
    assert top1_agreement(ref, other) == pytest.approx(1 / 3)


# ---------------------------------------------------------------- loading

def test_load_fast_quantizes_every_projection_and_the_head(synthetic):
    """load_fast(quant=...) leaves no nn.Linear in the layers or the head; norms, A_log, dt_bias and the conv stay
    parameters in the model dtype; a scheme it does not know is one clear error."""
    model = load_fast(synthetic, torch.bfloat16, quant="int4")
    assert not [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert isinstance(model.lm_head, QuantLinear) and model.lm_head.kernel == has_kernel("int4", torch.device("cpu"),
                                                                                          torch.bfloat16)
    layer = model.layers[0].linear_attn
    assert layer.in_proj.sizes == [256, 128, 4, 4] and len(layer.in_proj(torch.zeros(1, 1, 64).bfloat16())) == 4
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert {n.rsplit(".", 1)[-1] for n, _ in model.named_parameters()} == {"weight", "A_log", "dt_bias"}
    with pytest.raises(ValueError, match="int8"):
        load_fast(synthetic, torch.bfloat16, quant="int3")
