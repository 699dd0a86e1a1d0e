"""qwen/fast.py: the fast path against transformers (fp32 logits at the teaching model's tolerances, left-padded
batches; fp32 and bf16 cached decode teacher-forced against transformers, teaching model and fast path alike; the
fast path with its projections packed for oneDNN where the CPU can, qwen/products.py, and with F.linear),
against identities (cached pieces equal the full forward; a state_dict or a .to() round trip changes nothing), and
its parts against the teaching kernels. Greedy generation through it is compared with transformers' generate in
test_generate.py."""
import pytest
import torch

import qwen.products
from book.diff import compare
from helpers import bf16_steps, fp32_tol, functions, ids_for, left_padding_error, mistake_file, run_in_pieces
from hf_checkpoint import CONFIGS, hf_load
from qwen.attention import attention, causal_mask
from qwen.deltanet import recurrent_delta_rule
from qwen.fast import load_fast
from qwen.kernels import delta_step, grouped_attention
from qwen.model import load_model
from qwen.products import bf16_is_native, numerics, product
from qwen.weights import Weights

TIED_GQA3 = "Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"


@pytest.mark.parametrize("widen, packing", [(False, True), (True, True), (False, False)],
                         ids=["plain", "widened", "F.linear"])
@pytest.mark.parametrize("name", CONFIGS)
def test_fp32_equals_transformers(folders, name, widen, packing):
    """Packed (where the CPU packs fp32, qwen/products.py) unless "F.linear"."""
    ids = ids_for(CONFIGS[name][0]["vocab_size"])  # (2, 150): over two DeltaNet chunks
    theirs = hf_load(folders[name])
    fast = load_fast(folders[name], torch.float32, widen=widen, packing=packing)
    with torch.no_grad():
        got, want = fast(ids), theirs(ids).logits
        last = fast(ids, cache=fast.new_cache(), last_only=True)
    err, err_last = (got - want).abs().max().item(), (last - want[:, -1:]).abs().max().item()
    print(f"fast fp32 logits max |diff| = {err:.2e}, last position only {err_last:.2e}")
    assert got.shape == want.shape and last.shape == want[:, -1:].shape
    assert max(err, err_last) <= fp32_tol(want)


# ---------------------------------------------------------------- bf16, cached, teacher-forced

PROMPT, STEPS = 70, 30  # a prompt past one DeltaNet chunk, then 30 decode steps


@torch.no_grad()
def hf_steps(model, ids):
    """transformers' logits (B, 1 + STEPS, V) in fp32: the prompt's last position, then each forced token's."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config.text_config)
    out = [model(input_ids=ids[:, :PROMPT], past_key_values=cache, use_cache=True).logits[:, -1]]
    for t in range(PROMPT, ids.shape[1]):
        out.append(model(input_ids=ids[:, t:t + 1], past_key_values=cache, use_cache=True).logits[:, -1])
    return torch.stack(out, 1).float()


@torch.no_grad()
def our_steps(model, ids):
    """The same for our model, driven as generate drives it (last_only, one cache)."""
    cache = model.new_cache()
    out = [model(ids[:, :PROMPT], cache=cache, last_only=True)[:, -1]]
    for t in range(PROMPT, ids.shape[1]):
        out.append(model(ids[:, t:t + 1], cache=cache, last_only=True)[:, -1])
    return torch.stack(out, 1).float()


@pytest.mark.parametrize("name", [*CONFIGS, pytest.param("synthetic", marks=pytest.mark.slow)])
def test_fp32_cached_decode_equals_transformers(folders, synthetic, name):
    """fp32 decode with a cache, teacher-forced: the packed fast path's logits at every step (one-row products, the
    packed kernel's own case) within fp32 rounding of transformers' eager cached decode and of the teaching model's:
    fp32_tol on the small configs. The synthetic checkpoint's 24 random layers amplify any change in the order of
    sums (tests/test_model.py holds the teaching model's logits there to 1e-2 of their scale): measured, the teaching
    model lies 1.3e-4 of the scale from transformers, the packed fast path 3.2e-4 (its products sum in oneDNN's
    order), so there the bound is 1e-3 of the scale. A packed copy that missed its weight (a wrong transpose, a
    stale copy after an edit) is off by about the logits' scale."""
    folder = synthetic if name == "synthetic" else folders[name]
    theirs, teaching, fast = hf_load(folder), load_model(folder, torch.float32), load_fast(folder, torch.float32)
    ids = ids_for(theirs.config.text_config.vocab_size, seed=4, shape=(2, PROMPT + STEPS))
    got, want, taught = our_steps(fast, ids), hf_steps(theirs, ids), our_steps(teaching, ids)
    print(f"{name}: packed fast fp32 decode max |diff| {(got - want).abs().max().item():.2e} to transformers, "
          f"{(got - taught).abs().max().item():.2e} to the teaching model ({numerics(fast)})")
    tol = 1e-3 * want.abs().max().item() if name == "synthetic" else fp32_tol(want)
    assert (got - want).abs().max().item() <= tol and (got - taught).abs().max().item() <= tol


@pytest.fixture(scope="module")
def bf16_oracles(folders, synthetic):
    """Per checkpoint, made the first time a test asks (the synthetic one only in the full tier): the forced tokens,
    transformers' sdpa logits (the oracle), its eager logits (the yardstick)."""
    from transformers import Qwen3_5ForConditionalGeneration

    out = {}

    def oracle(name):
        if name not in out:
            folder = {**folders, "synthetic": synthetic}[name]
            sdpa = Qwen3_5ForConditionalGeneration.from_pretrained(folder, dtype=torch.bfloat16,
                                                                   attn_implementation="sdpa").eval()
            ids = ids_for(sdpa.config.text_config.vocab_size, seed=3, shape=(2, PROMPT + STEPS))
            out[name] = folder, ids, hf_steps(sdpa, ids), hf_steps(hf_load(folder, torch.bfloat16), ids)
        return out[name]
    return oracle


# Bounds in bf16 steps: (small configs, synthetic checkpoint), the synthetic one's as a multiple of how far
# transformers' eager path lies from its sdpa path on this CPU; the measured worst cases in the docstring below.
BF16_STEPS = {"teaching": (8, 2.0), "fast": (1, 0.0), "fast, widened": (4, 1.5), "fast, F.linear": (1, 0.0),
              "fast, one row": (4, 2.0)}
WIDENED = 2.5  # the widened path on the small configs: at most this multiple of eager's distance where it exceeds 4
CHANCE = 0.15  # the teaching model on the synthetic checkpoint, the widened path everywhere: see the docstring


@pytest.mark.parametrize("who", [w if w in ("fast", "fast, one row") else pytest.param(w, marks=pytest.mark.slow)
                                 for w in BF16_STEPS])
@pytest.mark.parametrize("name", [*CONFIGS, pytest.param("synthetic", marks=pytest.mark.slow)])
def test_bf16_cached_decode_equals_transformers_sdpa(bf16_oracles, name, who):
    """bf16 decode with a cache, teacher-forced on the same tokens: every step's top-1 agrees with transformers' sdpa
    cached decode at least as often as transformers' own eager path does, and every step's logits lie within
    BF16_STEPS bf16 steps of sdpa's.
    The fast path rounds as sdpa's path does (the same products, torch's fused attention, the DeltaNet step summed in
    transformers' order): bit-exact here on every checkpoint (0 steps), so a rounding changed in its decode step or
    its decode attention fails this test. Planted, one line of qwen/fast.py each: the step's β(v − Sᵀk) rounded to
    bf16 fails all four checkpoints (7-165 steps); its read Sᵀq as an einsum fails the synthetic one (98 steps; 0
    on the small configs); the T = 1 attention in fp32 fails three (2-61 steps), q scaled by 1/√D in bf16 before it
    two (2 and 9); q scaled as q · dk^-½ instead of the step's q / √dk (the last fp32 bit differs for 4 values in 10,
    which the step's bf16 output almost always absorbs) fails the synthetic one on an Intel CPU with AMX (49 steps, from
    one flipped output in layer 5 at the 8th step; 0 on the small configs, and on the AMD CPUs measured before).
    Widened products sum in another order: 2 and 18 steps measured on a CPU with AVX-512 bf16 instructions, 3.5 and
    61 on an AVX2 CPU, 8.2 and 41 on one with AMX, where eager lies 4.0 steps from sdpa on that config and the widened
    path agrees on one top-1 token fewer than eager (95.2% against 96.8%): so it is held to 4 steps or WIDENED times
    eager's distance, the larger, on the small configs, 1.5 times eager's on the synthetic one, and to eager's
    agreement less CHANCE.
    The teaching model writes attention out as the eager path does, and its chunked rule rounds differently from
    transformers' (both within fp32 rounding): on the small configs it lies exactly as far from sdpa as eager does
    (1-7 steps). The synthetic checkpoint's 24 random layers amplify one bf16 step anywhere into tens of steps in the
    logits, by an amount that depends on the CPU's bf16 kernels (eager lies 73 steps from sdpa on the AVX-512 CPU, 72
    on the AVX2 one, and agrees on 73-81% of top-1 tokens across token seeds). So there the bounds are multiples of
    eager's distance measured in the same run: the teaching model, one more rounding of the same sums, is held to
    eager's agreement less CHANCE (measured 71-73% against eager's 81 and 73%; 82% against 76% on AVX2) and twice
    eager's distance (69 and 115 steps measured); the widened fast path to 1.5 times it; the fast path to 0 steps.
    A wrong convention agrees on almost no token.
    "fast" reads oneDNN-packed weights where the CPU multiplies bf16 with them (qwen/products.py: AVX-512 or
    AVX-NE-CONVERT), plain F.linear elsewhere; "fast, F.linear" never packs: both are held to sdpa's bits. "fast,
    one row" is the fast path on the batch's first sequence alone: its decode products have one row, which chapter
    13's bf16 dot multiplies where the CPU has AVX-512 bf16 (qwen/csrc/bf16rows.cpp, held to one rounding of an
    fp32 sum in tests/test_kernel.py), summed in another order than oneDNN's: measured 0, 1 and 0 steps on the small
    configs, 86 on the synthetic one (eager 57.5: 1.5 times), agreeing on 80.6% of top-1 tokens (eager 74.2%). It
    is held to the widened path's 4 steps on the small configs, and on the synthetic one as the teaching model is:
    twice eager's distance, eager's agreement less CHANCE."""
    folder, ids, want, eager = bf16_oracles(name)
    if who == "fast, one row":
        ids, want, eager = ids[:1], want[:1], eager[:1]
    model = load_model(folder, dtype=torch.bfloat16) if who == "teaching" else \
        load_fast(folder, dtype=torch.bfloat16, widen=who == "fast, widened", packing=who != "fast, F.linear")
    got = our_steps(model, ids)
    agree, yardstick = ((x.argmax(-1) == want.argmax(-1)).float().mean().item() for x in (got, eager))
    steps, eager_steps = bf16_steps(got, want).max().item(), bf16_steps(eager, want).max().item()
    print(f"{name}, {who}: top-1 agreement with sdpa {agree:.1%} (eager {yardstick:.1%}); logits within {steps:.1f} "
          f"bf16 steps (eager {eager_steps:.1f})")
    widened = who == "fast, widened"  # its products sum in another order than sdpa's: near-ties may swap
    other_order = widened or who in ("teaching", "fast, one row") and name == "synthetic"
    assert agree >= yardstick - (CHANCE if other_order else 0)
    small, synthetic = BF16_STEPS[who]
    assert steps <= (synthetic * eager_steps if name == "synthetic" else max(small, WIDENED * eager_steps) if widened
                     else small)


# ---------------------------------------------------------------- identities and ownership

@pytest.mark.parametrize("pieces", [[130] + [1] * 20, [2, 68, 3, 60, 1, 16]], ids=["prefill then steps", "uneven"])
def test_cached_pieces_equal_full_forward(folders, pieces):
    """Identity: the in-place decode step and the fused attention over a cache give the full forward's logits."""
    fast = load_fast(folders[TIED_GQA3], torch.float32, widen=False)
    ids = ids_for(512, seed=1)
    with torch.no_grad():
        full, pieced = fast(ids), run_in_pieces(fast, ids, pieces)
    assert (pieced - full).abs().max().item() <= fp32_tol(full)


def test_left_padding_equals_transformers(folders):
    folder = folders["Hv=Hk, GQA 1, tied"]
    err, tol = left_padding_error(load_fast(folder, torch.float32, widen=False), hf_load(folder))
    assert err <= tol


@torch.no_grad()
def test_fast_owns_its_weights(folders):
    """load_fast and load_model on the same checkpoint (fp32, as stored: neither converts, so each tensor is read
    straight from the file) give two models that share no storage: an edit of one, in place, never moves the other's
    logits. The joined projections equal the checkpoint's rows stacked; a state_dict round trip and .to(bf16) give
    what loading gives."""
    folder = folders[TIED_GQA3]
    model, fast = load_model(folder), load_fast(folder, widen=False)
    assert {p.dtype for p in fast.parameters()} == {torch.float32}
    ids = ids_for(512, shape=(1, 40))
    want, got = model(ids), fast(ids)
    storage = lambda m: {p.untyped_storage().data_ptr() for p in m.parameters()}  # noqa: E731
    assert not storage(model) & storage(fast)
    W = Weights(folder)
    layer = fast.layers[0]
    rows = [W[f"layers.0.linear_attn.{n}.weight"] for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")]
    assert torch.equal(layer.linear_attn.in_proj.weight, torch.cat(rows))
    assert torch.equal(layer.mlp.gate_up_proj.weight, torch.cat([W["layers.0.mlp.gate_proj.weight"],
                                                                 W["layers.0.mlp.up_proj.weight"]]))
    full = fast.cfg.layer_types.index("full_attention")
    assert torch.equal(fast.layers[full].self_attn.qkv_proj.weight,
                       torch.cat([W[f"layers.{full}.self_attn.{n}_proj.weight"] for n in "qkv"]))

    again = load_fast(folder, torch.float32, widen=False)
    again.load_state_dict({k: v.clone() for k, v in fast.state_dict().items()})
    assert torch.equal(again(ids), got)
    half, loaded = load_fast(folder, torch.float32, widen=False).to(torch.bfloat16), \
        load_fast(folder, torch.bfloat16, widen=False)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    assert half.state_dict().keys() == loaded.state_dict().keys()
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in half.state_dict().items())
    assert torch.equal(half(ids), loaded(ids))

    model.norm.weight.add_(1)  # an experiment on the teaching model, in place
    model.layers[0].mlp.up_proj.weight.zero_()
    moved = model(ids)
    assert torch.equal(fast(ids), got) and not torch.equal(moved, want)
    fast.embed_tokens.weight.mul_(2)  # and one on the fast model
    fast.layers[full].self_attn.qkv_proj.weight.zero_()
    assert torch.equal(model(ids), moved) and not torch.equal(fast(ids), got)


@pytest.mark.slow
def test_hooks_and_diff_see_inside(synthetic):
    """book.diff hooks every module of the fast model by its teaching name and finds each within fp32 tolerance of
    transformers; a forward hook on one DeltaNet mixer fires once per call."""
    fast = load_fast(synthetic, torch.float32, widen=False)
    assert compare(synthetic, torch.float32, ours=fast) is None
    calls = []
    fast.layers[0].linear_attn.register_forward_hook(lambda m, args, out: calls.append(out.shape))
    with torch.no_grad():
        fast(ids_for(248320, shape=(1, 5)))
    assert calls == [(1, 5, 64)]


def test_widening_is_a_capability_not_a_timing(monkeypatch, synthetic):
    """The default follows the CPU's flags: widened without bf16 instructions, not with them; fp32 never. The
    numerics line says which."""
    monkeypatch.setattr(qwen.products, "cpu_flags", lambda: {"avx2", "fma"})
    assert not bf16_is_native(torch.device("cpu"), torch.bfloat16)
    slow = load_fast(synthetic, torch.bfloat16)
    assert slow.widen and "widened to fp32" in numerics(slow)
    monkeypatch.setattr(qwen.products, "cpu_flags", lambda: {"avx2", "avx512_bf16"})
    assert not load_fast(synthetic, torch.bfloat16).widen
    assert not load_fast(synthetic, torch.float32).widen


def test_widened_product_never_widens_a_whole_weight(monkeypatch):
    """A widened product multiplies BLOCK elements of the weight at a time (the 0.8B's head is 1 GB in fp32) and
    equals the fp32 product rounded once per element."""
    seen = []
    linear = torch.nn.functional.linear

    def recording(x, w):
        seen.append(w.numel())
        return linear(x, w)
    monkeypatch.setattr(qwen.products, "BLOCK", 64 * 100)
    monkeypatch.setattr(qwen.products.F, "linear", recording)
    g = torch.Generator().manual_seed(0)
    x, W = torch.randn(1, 20, 64, generator=g).bfloat16(), torch.randn(1000, 64, generator=g).bfloat16()
    got = product(x, W, widen=True)
    assert max(seen) <= 64 * 100 and len(seen) == 10
    assert torch.equal(got, linear(x.float(), W.float()).bfloat16())


@pytest.mark.parametrize("H, Hk", [(4, 4), (6, 2)])
def test_delta_step_equals_recurrent_rule(H, Hk):
    """The in-place step, token after token, against recurrent_delta_rule in float64: outputs and final state."""
    g = torch.Generator().manual_seed(0)
    B, T, dk, dv = 2, 7, 16, 24
    q, k = (torch.nn.functional.normalize(torch.randn(B, T, Hk, dk, generator=g), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, dv, generator=g)
    gate, beta = -torch.rand(B, T, H, generator=g), torch.rand(B, T, H, generator=g)
    S0 = torch.randn(B, H, dk, dv, generator=g)
    want, S_want = recurrent_delta_rule(*(x.double() for x in (q, k, v, gate, beta)), S0.double())
    S = S0.clone()
    got = torch.cat([delta_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], gate[:, t:t + 1], beta[:, t:t + 1], S)
                     for t in range(T)], dim=1)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5)
    torch.testing.assert_close(S.double(), S_want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("T", [1, 5], ids=["decode", "verify 5"])
def test_grouped_attention_at_long_context(T):
    """The decode attention (query heads stacked per K/V head) against the teaching kernel in float64, at the 0.8B's
    head shapes (8 query heads on 2 K/V heads, D = 256) and 1024 cached keys, longer than the decode tests reach:
    bf16 within one bf16 step of each row's largest output (measured 0.63 and 0.93: the result's own rounding plus
    the kernel's bf16 probabilities), fp32 within 1e-6 of it. A query head reading another group's K/V head, or a
    mask row given to the wrong query, is off by about the outputs' size."""
    g = torch.Generator().manual_seed(0)
    S, (B, H, Hkv, D) = 1024, (1, 8, 2, 256)
    q, k, v = torch.randn(B, H, T, D, generator=g), *(torch.randn(B, Hkv, S, D, generator=g) for _ in "kv")
    allowed = causal_mask(T, S - T)
    for dtype in (torch.bfloat16, torch.float32):
        q, k, v = (x.to(dtype) for x in (q, k, v))  # the oracle reads the same (rounded) inputs
        want = attention(q.double(), k.double().repeat_interleave(4, 1), v.double().repeat_interleave(4, 1), allowed)
        step = 2.0 ** (torch.floor(torch.log2(want.abs().amax(-1, keepdim=True))) - 7)  # a bf16 step per row
        got = grouped_attention(q, k, v, None if T == 1 else allowed)
        assert got.dtype == dtype and got.shape == want.shape
        assert ((got.double() - want).abs() <= (step if dtype == torch.bfloat16 else 1e-6 * want.abs().amax())).all()


@torch.no_grad()
def test_plug_in_reaches_the_fast_path(folders):
    """practice/plugin.py swaps the course's functions for a learner's (here 211's delta rule and 204's norms): the
    fast path calls them too. The course's own functions change nothing; a broken delta rule changes the logits."""
    from practice.plugin import swapped, swaps
    from qwen.norm import l2norm

    fast = load_fast(folders[TIED_GQA3], torch.float32, widen=False)
    ids = ids_for(512, shape=(1, 70))
    want = fast(ids)
    with swapped(swaps(211, {"recurrent_delta_rule": recurrent_delta_rule}, fast.cfg)):
        same = fast(ids)
    with swapped(swaps(211, {"recurrent_delta_rule": lambda q, k, v, g, beta, state=None: (v * 0, state)}, fast.cfg)):
        broken = fast(ids)
    norms = {"rms_norm": lambda x, w, eps: x * 0, "gated_rms_norm": lambda x, gate, w, eps: x, "l2norm": l2norm}
    with swapped(swaps(204, norms, fast.cfg)):
        zeroed = fast(ids)
    assert (same - want).abs().max().item() <= fp32_tol(want)
    assert (broken - want).abs().max().item() > 1e-2 and (zeroed - want).abs().max().item() > 1e-2


@torch.no_grad()
@pytest.mark.parametrize("number, wrong", [(207, "sigmoid_gate"), (208, "missing_sigmoid")])
def test_plug_in_reaches_the_fast_mlp_and_attention(folders, number, wrong, tmp_path):
    """207 and 208 replace a module's forward, which FastMLP and FastAttention override: the plug-in swaps theirs
    too, with the weights split out of the joined projections. The reference solution changes the fast logits by
    rounding only; a wrong one (the practice folder's) moves them."""
    from practice.judge import problems
    from practice.plugin import swapped, swaps

    prob = problems()[number]
    names = prob.meta["functions"]
    right = dict(zip(names, functions(prob.folder / "solution.py", *names)))
    bad = dict(zip(names, functions(mistake_file(number, wrong, tmp_path), *names)))
    fast = load_fast(folders[TIED_GQA3], torch.float32, widen=False)
    ids = ids_for(512, shape=(1, 70))
    want = fast(ids)
    with swapped(swaps(number, right, fast.cfg)):
        same = fast(ids)
    with swapped(swaps(number, bad, fast.cfg)):
        moved = fast(ids)
    assert (same - want).abs().max().item() <= fp32_tol(want)
    assert (moved - want).abs().max().item() > 1e-2
