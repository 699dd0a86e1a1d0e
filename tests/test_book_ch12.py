"""Chapter 12: the byte counts of book/ch12.py against the real 0.8B's config multiplied out by hand, its figures
draw what they are given, and the chapter script prints what hand arithmetic, the gguf package and the checkpoint's
file (read by the safetensors library) say.

The expected numbers are computed from their definitions (the real 0.8B's shapes by hand, 752,393,024 parameters as
transformers counts them, gguf's reference quantizer), never read back from the chapter's output."""
import re

import matplotlib
import pytest
import torch

from book import ch12
from qwen.sizes import real_config, tensor_shapes

matplotlib.use("Agg")

d, V, I, D, C = 1024, 248320, 3584, 256, 6144  # the real 0.8B: width, vocabulary, MLP, head dim, conv channels
N_REAL = 752_393_024  # its text parameters, as transformers counts them (tests/test_chapters.py, ch01)
FP32 = 18 * (16 + 128)  # A_log and the DeltaNet norm of each DeltaNet layer, stored in fp32
KV_1024 = 6 * 1024 * 2 * 2 * D * 2  # 6 full-attention layers, K and V, 2 heads of 256, bf16
STATE = 18 * (16 * 128 * 128 * 4 + 3 * C * 2)  # 18 DeltaNet layers: an fp32 state and 3 conv inputs in bf16
BY_CLASS = {"embedding/head": V * d,
            "attention": 6 * (2 * 8 * D * d + 2 * 2 * D * d + d * 8 * D),  # q (with its gate), k, v, o
            "DeltaNet projections": 18 * (C * d + 16 * 128 * d + d * 16 * 128),  # in_proj_qkv, in_proj_z, out_proj
            "in_proj_a/b": 18 * 2 * 16 * d, "MLP": 24 * 3 * d * I}
KEPT = 18 * (2 * d + C * 4 + 16 + 16 + 128) + 6 * (2 * d + 2 * D) + d  # norms, conv, dt_bias, A_log; final norm


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_the_classes_add_up_to_the_real_model():
    counts = dict.fromkeys((*ch12.CLASSES, None), 0)
    for name, shape in tensor_shapes(real_config()).items():
        counts[ch12.tensor_class(name)] += torch.Size(shape).numel()
    assert {c: n for c, n in counts.items() if c} == BY_CLASS and counts[None] == KEPT
    assert sum(BY_CLASS.values()) + KEPT == N_REAL
    assert ch12.tensor_class("layers.0.linear_attn.A_log") is None and ch12.tensor_class("lm_head.weight") == \
        "embedding/head" and ch12.tensor_class("layers.0.linear_attn.conv1d.weight") is None


@pytest.mark.parametrize("fmt, bits", [("fp32", 32), ("bf16", 16), ("Q8_0", 8.5), ("int4", 4.5),
                                       ("int4+zero", 5.0), ("Q4_0", 4.5)])
def test_step_bytes_by_hand(fmt, bits):
    got = ch12.step_bytes(real_config(), fmt, 1024)
    assert got["KV cache"] == KV_1024 and got["DeltaNet state"] == 2 * STATE  # the state is read and written back
    assert got["kept"] == 2 * (KEPT - FP32) + 4 * FP32
    for c, n in BY_CLASS.items():
        head = fmt == "Q4_0" and c == "embedding/head"  # llama-quantize keeps a Q4_0 file's output tensor in Q6_K
        assert got[c] == pytest.approx(n * (210 * 8 / 256 if head else bits) / 8, rel=1e-12)


def test_q6_k_bits_are_ggufs_block_size():
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    values, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType.Q6_K]
    assert ch12.bits("Q4_0", d, head=True) == 8 * nbytes / values and ch12.bits("Q4_0", d) == 4.5


def test_one_decode_step_makes_the_live_models_products():
    # per layer, as qwen/fast.py joins them: attention q (with its gate) | k | v, then o; DeltaNet
    # in_proj_qkv | z | b | a, then out_proj; the MLP's gate | up, then down; and the tied head once
    want = [((2 * 8 * D + 2 * 2 * D, d), 6), ((d, 8 * D), 6), ((C + 16 * 128 + 16 + 16, d), 18), ((d, 16 * 128), 18),
            ((2 * I, d), 24), ((d, I), 24), ((V, d), 1)]
    merged = {}
    for shape, n in want:
        merged[shape] = merged.get(shape, 0) + n
    got = ch12.step_products(real_config())
    assert dict(got) == merged and sum(got.values()) == 97
    assert sum(n * o * i for (o, i), n in got.items()) == sum(BY_CLASS.values())
    assert ch12.product_bytes(got, "bf16") == 2 * sum(BY_CLASS.values())
    assert ch12.product_bytes(got, "int8") == pytest.approx(sum(n * o * (i + 2) for (o, i), n in got.items()))
    assert ch12.product_bytes(got, "int4+zero") == pytest.approx(sum(BY_CLASS.values()) * 5 / 8)


def test_time_step_sums_each_product_by_its_count(monkeypatch):
    timed = []
    monkeypatch.setattr(ch12.measure, "best", lambda f, device, repeats: timed.append(f()) or 0.25)
    got = ch12.time_step({(64, 32): 3, (16, 64): 2}, (None, "int8", "int4"), torch.device("cpu"), repeats=1)
    assert got == {None: 1.25, "int8": 1.25, "int4": 1.25} and len(timed) == 6
    assert [tuple(t.shape) for t in timed] == [(1, 1, 64)] * 3 + [(1, 1, 16)] * 3


@pytest.mark.parametrize("scheme", [None, "int8", "int4"])
def test_live_product_is_the_live_models_product(scheme):
    from qwen.quantlinear import QuantLinear, codes, dequantize
    torch.manual_seed(0)
    w = torch.randn(64, 128, dtype=torch.bfloat16)
    x = torch.randn(1, 1, 128, dtype=torch.bfloat16)
    m = ch12.live_product(w, scheme)
    assert isinstance(m, QuantLinear) == (scheme is not None)
    exact = torch.nn.functional.linear(x.float(), w.float() if scheme is None else
                                       dequantize(*codes(w, scheme, dtype=torch.bfloat16)))
    # one bf16 rounding of the product, and fp32 sums in another order: within 2 bf16 steps of the largest output
    assert (m(x).float() - exact).abs().max() <= 2 * 2 ** -8 * exact.abs().max()


def test_int8_pays_one_bf16_scale_per_row():
    got = ch12.step_bytes(real_config(), "int8", 0)
    assert got["MLP"] == pytest.approx(24 * (2 * I * (d + 2) + d * (I + 2)), rel=1e-12)  # down_proj's rows are I long
    assert got["embedding/head"] == pytest.approx(V * (d + 2), rel=1e-12)
    assert got["KV cache"] == 0


def test_bound_figure_draws_the_bytes_and_the_rates():
    rows = {"a": {p: 1e6 * (i + 1) for i, p in enumerate(ch12.PARTS)}, "b": {p: 2e6 for p in ch12.PARTS}}
    fig = ch12.bound_figure(rows, 36e6, title="t")
    left, right = fig.axes[:2]
    tops = {}
    for bar in left.patches:
        x = round(bar.get_x() + bar.get_width() / 2)
        tops[x] = max(tops.get(x, 0), bar.get_y() + bar.get_height())
    assert tops == {0: pytest.approx(36.0), 1: pytest.approx(16.0)}  # MB: 1 + 2 + … + 8, and 8 × 2
    assert [b.get_height() for b in right.patches] == [pytest.approx(1.0), pytest.approx(36 / 16)]  # 36 MB/s ÷ MB
    assert fig._suptitle.get_text() == "t"
    close(fig)


def test_bits_figure_and_class_figure():
    curves = {"int4": [(6.0, 0.1, 8), (5.0, 0.2, 16)], "int4+zero": [(8.0, 0.05, 8), (6.0, 0.1, 16)]}
    fig = ch12.bits_figure(curves, {"Q8_0": (8.5, 0.01)}, title="x (synthetic weights)")
    ax = fig.axes[0]
    lines = [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines]
    assert lines == [([6.0, 5.0], [0.1, 0.2]), ([8.0, 6.0], [0.05, 0.1]), ([8.5], [0.01])]
    assert [t.get_text() for t in ax.texts] == ["g=8", "g=16", "g=8", "g=16"]
    assert "synthetic weights" in ax.get_title()
    close(fig)
    errors = {"int8": {"MLP": 0.01, "attention": 0.02}, "int4": {"MLP": 0.1, "attention": 0.2}}
    fig = ch12.class_figure(errors)
    assert [b.get_height() for b in fig.axes[0].patches] == [0.02, 0.01, 0.2, 0.1]  # CLASSES' order: attention first
    close(fig)


def test_decode_figure_puts_the_measured_rate_beside_its_bound():
    fig = ch12.decode_figure({"bf16": 4.0, "int8": 8.0}, {"bf16": 2.0, "int8": 2.0})
    ax = fig.axes[0]
    assert [b.get_height() for b in ax.patches] == [4.0, 8.0, 2.0, 2.0]
    assert "2.0\n(25%)" in [t.get_text() for t in ax.texts] and "2.0\n(50%)" in [t.get_text() for t in ax.texts]
    close(fig)


def test_output_figure():
    fig = ch12.output_figure({"bf16": 1e-3, "int8": 2e-3}, {"bf16": 0.5, "int8": 0.25})
    ax, bx = fig.axes[:2]
    assert [b.get_height() for b in ax.patches] == [1e-3, 2e-3]
    assert [b.get_height() for b in bx.patches] == [50.0, 25.0]
    assert [t.get_text() for t in bx.texts] == ["50.0%", "25.0%"]
    close(fig)


@pytest.mark.slow
def test_chapter_prints_the_real_numbers(chapter_outputs, synthetic):
    code, out, err = chapter_outputs("ch12_quant.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    weights = 2 * N_REAL + 2 * FP32
    step = weights + KV_1024 + 2 * STATE  # the DeltaNet state read and written back
    assert f"real Qwen3.5-0.8B, bf16: one decode step at 1,024 tokens moves {step / 1e6:,.1f} MB" in out
    assert re.search(rf"embedding/head\s+{2 * V * d / 1e6:.1f} MB\s+{2 * V * d / step:.1%}", out)
    for n in (1024, 262144):  # the caches, and a KV cache of 24 full-attention layers, by hand
        kv = 6 * n * 2 * 2 * D * 2
        assert f"real Qwen3.5-0.8B at {n:,} tokens: its caches {(kv + STATE) / 1e6:,.1f} MB; every layer full " \
               f"attention, the KV cache alone would be {4 * kv / 1e6:,.1f} MB" in out
    kept = 2 * (KEPT - FP32) + 4 * FP32
    for label, bits, head in (("int4     ", 4.5, 4.5), ("int4+zero", 5.0, 5.0), ("Q4_0 file", 4.5, 6.5625)):
        wb = (sum(BY_CLASS.values()) - V * d) * bits / 8 + V * d * head / 8 + kept
        extra = f" (the head {head:.3f})" if head != bits else ""
        assert f"real Qwen3.5-0.8B, {label}: {bits:6.3f} bits per weight{extra}, weights {wb / 1e6:7.1f} MB" in out
    assert f"real Qwen3.5-0.8B: 133 tensors stay as they are (norms, conv kernels, A_log, dt_bias): {KEPT:,} " \
           f"numbers, {KEPT / N_REAL:.3%}" in out
    # one block of layer 0's gate_proj, as the gguf package stores it
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize
    from safetensors import safe_open

    from qwen.hub import part_files
    name = "model.language_model.layers.0.mlp.gate_proj.weight"
    [w] = [safe_open(f, "pt").get_tensor(name) for f in part_files(synthetic) if name in safe_open(f, "pt").keys()]
    block = w[:1, :32].float().numpy()
    for fmt, size in (("Q8_0", 34), ("Q4_0", 18)):
        b = quantize(block, GGMLQuantizationType[fmt]).tobytes()
        assert f"{fmt}, {size} bytes: {b[:2].hex(' ')} | {b[2:].hex(' ')}" in out
    assert out.count("equal to from_gguf_bytes: True") == 2
    # int8 per channel by hand on the whole tensor: round(w / s) · s with s = max|row| / 127
    x = w.float()
    s = x.abs().amax(1, keepdim=True) / 127
    err8 = float((x - torch.round(x / s) * s).norm() / x.norm())
    assert f"int8     : {8 + 16 / x.shape[1]:.3f} bits per weight (one scale per row of {x.shape[1]}), relative " \
           f"error {err8:.2e} over the whole tensor\n" \
        in out  # a number computed from the weights: not tagged synthetic (the banner says the weights are random)
    assert np.isfinite(err8)
    for label in ("bf16", "int8", "int4", "int4+zero"):
        kl, median, p99, top, top1 = re.search(
            rf"  {re.escape(label)}\s*: KL mean (\S+), median (\S+), 99% (\S+), max (\S+) nats; top-1 agreement "
            rf"(\S+)%", out).groups()
        assert 0 <= float(median) <= float(p99) <= float(top) and float(kl) <= float(top) and 0 <= float(top1) <= 100
    # the decode, timed: 97 products at the real shapes, their bytes by hand, the share consistent with the rates
    for label, nbytes in (("bf16", 2 * sum(BY_CLASS.values())), ("int8", None),
                          ("int4+zero", sum(BY_CLASS.values()) * 5 / 8)):
        mb, rate, bound, share = re.search(
            rf"real Qwen3.5-0.8B's shapes, {re.escape(label)}\s*: 97 products reading\s+(\S+) MB take\s+\d+ ms,\s+"
            rf"(\S+) tokens/s; the bound\s+(\S+) tokens/s: (\d+)% of it", out).groups()
        if nbytes:
            assert mb == f"{nbytes / 1e6:.1f}"
        assert abs(float(rate) / float(bound) * 100 - int(share)) <= 1 + 100 * 0.006 / float(bound)
    # Q4_0's clipping by its geometry: a value opposite the block's signed extreme x_max, beyond 15/16 of |x_max|;
    # the worst error, in steps of the stored d, from the gguf package's own blocks
    from gguf.quants import dequantize
    rows = w.float().numpy().reshape(-1, 32)
    x_max = np.take_along_axis(rows, np.abs(rows).argmax(1)[:, None], 1)  # (n, 1), signed
    clipped = ((np.sign(rows) == -np.sign(x_max)) & (np.abs(rows) > 15 / 16 * np.abs(x_max))).any(1)
    raw = quantize(rows, GGMLQuantizationType.Q4_0).view(np.uint8).reshape(-1, 18)
    step = np.abs(raw[:, :2].copy().view(np.float16).astype(np.float32))  # (n, 1)
    off = np.abs(rows - dequantize(raw, GGMLQuantizationType.Q4_0).reshape(-1, 32)) / step
    assert f"Q4_0: {clipped.mean():.1%} of the {len(rows):,} blocks clip a value on their short side; the worst " \
           f"error is {off.max():.2f} step" in out
    assert "perplexity of the text (synthetic weights" in out  # on random weights it means something else
    assert out.count("(synthetic weights)") == 0 and out.count("(random weights: the tokens mean nothing)") == 3
    held = {k: float(v) for k, v in re.findall(r"^(bf16|int8|int4) *: the model holds +([\d.]+) MB", out, re.M)}
    assert held.keys() == {"bf16", "int8", "int4"} and held["int8"] < held["bf16"] and held["int4"] < held["bf16"]
    for n in (222, 223, 224):
        assert f"» exercise {n} (" in out


@pytest.mark.slow
def test_chapter_runs_where_int4_groups_do_not_fit(tmp_path, monkeypatch):
    """The chapter on a checkpoint whose DeltaNet value width is 3 · 48 = 144 (4 layers: 3 DeltaNet, 1 full
    attention): it exits 0, and as out_proj's 144 inputs are not a multiple of int4's group of 32, its own int4 rows
    and the live model keep those tensors in int8 per output channel, and both say so. (A hidden width of 96 runs in
    tests/test_any_checkpoint.py's live model: every width there is a multiple of 32.)"""
    widths, misfit = dict(linear_num_key_heads=1, linear_num_value_heads=3, linear_value_head_dim=48), 144
    from helpers import run_chapter
    from qwen import synthetic
    monkeypatch.setattr(synthetic, "TEXT", dict(synthetic.TEXT, **widths))
    folder = tmp_path / "widths"
    synthetic.generate(folder, layers=4)
    code, out, err = run_chapter("ch12_quant.py", "--model", str(folder))
    assert code == 0 and "Traceback" not in err, err[-3000:]
    said = [line for line in out.splitlines() if "not a multiple of the group 32" in line]
    assert said[0] == f"input widths [{misfit}] are not a multiple of the group 32: those tensors stay int8 per " \
                      f"output channel in the int4 rows, as the live model keeps them"
    assert len(said) == 2 and f"layers.*.linear_attn.out_proj ({misfit} inputs, 3 layers)" in said[1]
