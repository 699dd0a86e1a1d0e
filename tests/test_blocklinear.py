"""qwen/blocklinear.py and load_fast(quant="q8_0" | "q4_0"): the live model in llama.cpp's formats.

The oracle is the gguf package: the bytes each layer holds against gguf.quants.quantize of the weight, the
activation's rounding against gguf's Q8_0 round trip, each product against the float64 dot of gguf's dequantized
values (within the fp32 rounding of a K-term sum), the embedding's rows against gguf's dequantized rows exactly.
The whole live model is held against its teaching twin (qwen/quantized.py's fake_quantize: the blocks' values, each
projection's input rounded to Q8_0), prompt and cached decode, with a yardstick: a code of the rounded activation
may land one step apart (FLIPS below says why and how far). Where no kernel can be built every product takes the
dequantized path, which computes the same model (proven here too, with CXX pointing nowhere in a child process).

Planted and caught: round_input rounding half to even (torch.round) with the stored fp16 d (the rounding test, and
one twin comparison); the q4_0 head held in Q4_0 instead of Q8_0 (the head test); the embedding reading row id − 1
(the embedding tests and the whole-model ones); the dequantized path multiplying the unrounded input (the 96-row
products, the dequantized path's tests, the run without a compiler).
"""
import os
import subprocess
import sys

import gguf
import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import fp32_tol, ids_for
from hf_checkpoint import CONFIGS
from qwen import kernel
from qwen.blocklinear import PACKED_ROWS, BlockLinear, group, round_input, ungroup
from qwen.fast import load_fast
from qwen.measure import next_token_kl
from qwen.model import load_model
from qwen.quantized import describe, fake_quantize, products
from qwen.quantlinear import QuantEmbedding, QuantLinear

TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}
TIED = "Hv=Hk, GQA 1, tied"
PROMPT, STEPS = 40, 6
pytestmark = pytest.mark.usefixtures("one_thread")
built = pytest.mark.skipif(kernel.load(quiet=True) is None, reason=f"no C++ kernel here: {kernel.why_not()}")


def gguf_values(a, fmt):
    """a (n, K) fp32 quantized to fmt by the gguf package and read back, in float64."""
    q = gguf.quants.quantize(a.numpy(), TYPES[fmt])
    return torch.from_numpy(gguf.quants.dequantize(q, TYPES[fmt]).astype(np.float64)).reshape(a.shape)


def layer(fmt, N=70, K=256, seed=0, packing=True):
    g = torch.Generator().manual_seed(seed)
    linear = nn.Linear(K, N, bias=False)
    linear.weight.data = torch.randn(N, K, generator=g)
    return BlockLinear(linear, fmt, packing), linear.weight.data


@pytest.mark.parametrize("fmt", TYPES)
def test_blocks_are_the_gguf_files_bytes(fmt):
    m, w = layer(fmt)
    want = gguf.quants.quantize(w.numpy(), TYPES[fmt])  # (N, K/32 · bytes) uint8
    assert m.blocks.dtype == torch.uint8 and np.array_equal(m.file_bytes().numpy(), want)
    rows = torch.tensor([69, 0, 8, 8, 63, 7])  # the last (padded) group, the first row, one row twice
    assert np.array_equal(m.file_rows(rows).numpy(), want[rows.numpy()])
    assert np.array_equal(m.file_rows(slice(9, 30)).numpy(), want[9:30])
    assert m.grouped == (kernel.load(quiet=True) is not None and kernel.groups_rows())


@pytest.mark.parametrize("fmt", TYPES)
def test_the_eight_row_layout_byte_by_byte(fmt):
    """group, held to its description one byte at a time: group g's block b holds rows 8g..8g+7's fp16 d, then
    chunk c holds bytes 4c..4c+3 of each row's codes, row after row; the last group padded with zero rows.
    ungroup gives the file's rows back."""
    size = {"q8_0": 34, "q4_0": 18}[fmt]
    N, nb = 13, 3
    blocks = torch.randint(0, 256, (N, nb * size), dtype=torch.uint8, generator=torch.Generator().manual_seed(5))
    grouped = group(blocks, fmt)
    assert grouped.shape == (2, nb * 8 * size)
    for g in range(2):
        for b in range(nb):
            at = b * 8 * size
            for r in range(8):
                n = 8 * g + r
                src = blocks[n, b * size:(b + 1) * size].tolist() if n < N else [0] * size
                assert grouped[g, at + 2 * r:at + 2 * r + 2].tolist() == src[:2]
                for c in range((size - 2) // 4):
                    start = at + 16 + 32 * c + 4 * r
                    assert grouped[g, start:start + 4].tolist() == src[2 + 4 * c:6 + 4 * c], (g, b, r, c)
    back = ungroup(grouped, fmt)
    assert torch.equal(back[:N], blocks) and not back[N:].any()


def test_round_input_is_ggufs_q8_0_round_trip():
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(1)) * 3
    x[0, :32] = torch.arange(32) - 15.5  # max 15.5: ties x·(127/15.5) land on halves for some entries
    x[1, :32] = 0  # an all-zero block
    x[2, :32] = torch.tensor([127.0, 2.5, -2.5, 0.5, -0.5] + [1.0] * 27)  # d = 1: exact ties, away from zero
    assert torch.equal(round_input(x).double(), gguf_values(x, "q8_0"))


def product_bound(x, w):
    """γ_K · Σ_k |x_k w_k| per output, with γ_K = K·2⁻²⁴/(1 − K·2⁻²⁴): the fp32 rounding of any order of a K-term sum
    of exact products (the kernel's block sums are exact integers; each scale product d_w·d_x is exact in fp32)."""
    K = x.shape[1]
    gamma = K * 2.0 ** -24 / (1 - K * 2.0 ** -24)
    return gamma * (x.abs() @ w.abs().T)


@built
@pytest.mark.parametrize("rows", [1, 3, PACKED_ROWS])  # PACKED_ROWS: the dequantized path
@pytest.mark.parametrize("fmt", TYPES)
def test_product_is_the_float64_dot_of_the_rounded_numbers(fmt, rows):
    m, w = layer(fmt)
    x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = m(x).double()
    xv, wv = gguf_values(x, "q8_0"), gguf_values(w, fmt)
    assert m.packs(rows) == (rows < PACKED_ROWS)
    assert ((y - xv @ wv.T).abs() <= product_bound(xv, wv)).all()


@pytest.mark.parametrize("fmt", TYPES)
def test_the_dequantized_path_is_the_same_product(fmt):
    m, w = layer(fmt, packing=False)
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        y = m(x).double()
    xv, wv = gguf_values(x, "q8_0"), gguf_values(w, fmt)
    assert not m.kernel and ((y - xv @ wv.T).abs() <= product_bound(xv, wv)).all()


@pytest.mark.parametrize("fmt", TYPES)
def test_embedding_rows_are_ggufs_rows(folders, fmt):
    model = load_fast(folders[TIED], torch.float32, quant=fmt, quiet=True)
    assert isinstance(model.embed_tokens, QuantEmbedding)
    ids = torch.tensor([[0, 5, 511, 5]])
    table = model.embed_tokens.table
    head_fmt = table.scheme
    w = load_model(folders[TIED], torch.float32).embed_tokens.weight.detach()
    with torch.no_grad():
        got = model.embed_tokens(ids)[0].double()
    assert torch.equal(got, gguf_values(w, head_fmt)[ids[0]])


@pytest.mark.parametrize("fmt", TYPES)
def test_the_head_and_what_describe_says(folders, fmt):
    """q8_0: every projection and the head in Q8_0. q4_0: the head in Q8_0 (llama.cpp's file keeps it in Q6_K, which
    has no kernel here), said in the one line describe gives."""
    model = load_fast(folders[TIED], torch.float32, quant=fmt, quiet=True)
    assert model.lm_head.scheme == "q8_0"
    line = describe(model)
    assert fmt.upper() in line and ("Q6_K" in line) == (fmt == "q4_0")
    for m in products(model):
        assert isinstance(m, BlockLinear) or (isinstance(m, QuantLinear) and m.in_features % 32), m


def forced(model, ids):
    """Logits (1, PROMPT + STEPS, V) in fp32: the prompt, then each forced token with one cache."""
    cache = model.new_cache()
    with torch.no_grad():
        out = [model(ids[:, :PROMPT], cache=cache)]
        out += [model(ids[:, t:t + 1], cache=cache) for t in range(PROMPT, ids.shape[1])]
    return torch.cat(out, 1).float()


# The live model against its twin may lie FLIPS times as far (max over positions) as the twin lies from itself with
# unrounded activations (the rounding the twin models), and its KL FLIPS times the twin's KL from that. Measured
# (prompt 40 and 6 cached steps, the three small checkpoints): up to 0.11 for q8_0 and 0.2 for q4_0, 1e-5 where no
# code moves: an input of a product, one fp32 rounding away in the live model (its sums run in another order), lands
# on the other side of a half-step of the Q8_0 grid, and that one code moves by one step. Such a move may change the
# top-1 token where the twin's lead is as small as the move: measured once in the 276 positions (q4_0, a lead of 0.005
# against a difference of 0.056), so top-1 may differ at one position in 20.
FLIPS = 0.25


@pytest.mark.parametrize("fmt", TYPES)
@pytest.mark.parametrize("which", CONFIGS)
def test_live_model_equals_its_teaching_twin(folders, which, fmt):
    """fp32, prompt and cached decode: the live model (the kernel where built) against the teaching model of the
    same numbers, with the activations rounded as the kernel rounds them, and top-1 agreement but where a code's move
    meets a near tie."""
    ids = ids_for(512, seed=3, shape=(1, PROMPT + STEPS))
    twin = fake_quantize(load_model(folders[which], torch.float32), fmt)
    want = forced(twin, ids)
    for m in twin.modules():
        m._forward_pre_hooks.clear()  # the same weights, the activations unrounded: the yardstick
    plain = forced(twin, ids)
    got = forced(load_fast(folders[which], torch.float32, quant=fmt, quiet=True), ids)
    yard, kl_yard = (plain - want).abs().max(), next_token_kl(want, plain).mean()
    assert yard > 100 * fp32_tol(want)  # the rounding of the activations is seen: the twin rounds them
    assert (got - want).abs().max() <= max(FLIPS * yard, fp32_tol(want))
    assert next_token_kl(want, got).mean() <= FLIPS * kl_yard
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.95


def test_without_a_compiler_every_product_is_dequantized_and_said(folders):
    """CXX pointing nowhere (the kernel never built in that process): one line says why, and the model is the same."""
    code = ("import torch, sys; from qwen.fast import load_fast; from qwen.quantized import products; "
            f"m = load_fast({str(folders[TIED])!r}, torch.float32, quant='q8_0'); "
            "assert not any(p.kernel for p in products(m)); "
            "ids = torch.arange(20)[None] * 7; torch.save(m(ids).float(), sys.argv[1])")
    out = folders[TIED] / "no_compiler_logits.pt"
    env = {**os.environ, "CXX": "/nonexistent/c++", "QWEN_LANG": "en"}
    r = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no C++ compiler was found" in r.stdout and "dequantizes a block" in r.stdout
    got = torch.load(out, weights_only=True)
    with torch.no_grad():
        want = fake_quantize(load_model(folders[TIED], torch.float32), "q8_0")(torch.arange(20)[None] * 7).float()
    assert (got - want).abs().max() <= fp32_tol(want)


def mapping_flags(address):
    """The VmFlags of the mapping that holds `address` in /proc/self/smaps (Linux), or None where there is none."""
    lines = iter(open("/proc/self/smaps").read().splitlines())
    for line in lines:
        span = line.split()[0]
        if "-" not in span or not all(c in "0123456789abcdef-" for c in span):
            continue
        start, end = (int(v, 16) for v in span.split("-"))
        if start <= address < end:
            flags = next(x for x in lines if x.startswith("VmFlags:"))
            return flags.split()[1:]
    return None


@built
@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="the page advice is Linux's")
def test_blocks_live_on_2mib_pages():
    """qwen/csrc/pages.cpp: the kernel's blocks are a copy of the same bytes that starts on a 2 MiB boundary, in a
    mapping Linux was asked to back with 2 MiB pages before it was written (VmFlags "hg": whether the system grants
    them depends on its setting and its free memory; the advice is ours). Planted and caught: the madvise left out."""
    want = torch.randint(0, 256, (3 << 20,), dtype=torch.uint8)
    got = kernel.on_huge_pages(want)
    assert torch.equal(got, want) and got.data_ptr() != want.data_ptr()
    assert got.data_ptr() % (2 << 20) == 0 and "hg" in mapping_flags(got.data_ptr())
    layer = BlockLinear(nn.Linear(512, 1024, bias=False).requires_grad_(False), "q8_0")
    assert layer.kernel and layer.blocks.data_ptr() % (2 << 20) == 0 and "hg" in mapping_flags(layer.blocks.data_ptr())
