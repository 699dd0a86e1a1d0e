"""Chapter 9: its figure functions (book/ch09.py) draw what they claim, the cache arithmetic (qwen/family.py) equals
the tensors a real cache holds and a hand count for the real 0.8B, and the chapter script runs and says what is
synthetic."""
import re

import matplotlib
import pytest
import torch

from book import ch09
from qwen import family, sizes
from qwen.config import Config
from qwen.model import load_model
from qwen.sampling import filter_logits
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, tensor_shapes

matplotlib.use("Agg")
pytestmark = pytest.mark.usefixtures("one_thread")


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def held_bytes(cache):
    """What the cache has written: the filled part of each KV buffer (k, v), each DeltaNet conv window and state."""
    return sum(t.numel() * t.element_size() for layer in cache.layers
               for t in ((layer.k, layer.v) if hasattr(layer, "keys") else (layer.conv, layer.state)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_bytes_equal_a_real_cache(synthetic, dtype):
    model = load_model(synthetic, dtype=dtype)
    cfg = Config.load(synthetic)
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.arange(1, 40)[None], cache=cache)
        kv, state = family.cache_bytes(cfg, 39, torch.finfo(dtype).bits // 8)
        assert held_bytes(cache) == kv + state
        model(torch.tensor([[5]]), cache=cache)  # one more token: only the KV part grows
        assert held_bytes(cache) == sum(family.cache_bytes(cfg, 40, torch.finfo(dtype).bits // 8))


def test_cache_bytes_of_the_real_model_by_hand():
    kv, state = family.cache_bytes(sizes.real_config(), 32_000)
    assert kv == 6 * 2 * 2 * 32_000 * 256 * 2  # 6 full layers, K and V, Hkv = 2, D = 256, bf16
    assert state == 18 * (16 * 128 * 128 * 4 + (2 * 16 * 128 + 16 * 128) * 3 * 2)  # fp32 state + K-1 conv columns


def test_sampling_figure():
    """The bars are the probabilities after each stage of the card's settings (log scale; a cut token keeps its
    original height as an empty outline), and the counts in the titles are hand counts."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1000, generator=g) * 3
    fig = ch09.sampling_rules(logits, str, show=25)
    axes = fig.axes
    titles = [ax.get_title() for ax in axes]
    assert all(ax.get_yscale() == "log" for ax in axes)
    assert "1,000 tokens left" in titles[0] and "20 tokens left" in titles[1] and "thinking set" in titles[2]
    assert "precise-coding set" in titles[3] and "temperature 0.6" in titles[3]
    heights = torch.tensor([bar.get_height() for bar in axes[0].patches], dtype=torch.float32)
    want = logits.softmax(-1).sort(descending=True).values[:25]
    torch.testing.assert_close(heights, want, rtol=1e-5, atol=1e-7)
    top20 = logits.topk(20).values.softmax(-1)
    kept = [bar.get_height() for bar in axes[1].patches if bar.get_facecolor()[3] > 0]
    torch.testing.assert_close(torch.tensor(kept, dtype=torch.float32), top20, rtol=1e-5, atol=1e-7)
    cut = [bar.get_height() for bar in axes[1].patches if bar.get_facecolor()[3] == 0]
    torch.testing.assert_close(torch.tensor(cut, dtype=torch.float32), want[20:], rtol=1e-5, atol=1e-7)
    for ax, T in ((axes[2], 1.0), (axes[3], 0.6)):  # hand top-p: the smallest prefix whose mass reaches 0.95
        p = (logits / T).topk(20).values.softmax(-1)
        left = int(re.search(r"([\d,]+) tokens left", ax.get_title()).group(1).replace(",", ""))
        assert left == int((p.cumsum(-1) - p < 0.95).sum())
    close(fig)


def test_rules_in_transformers_order():
    """filter_logits equals transformers' own warpers in transformers' order (temperature → top-k → top-p → min-p,
    utils.py _get_logits_processor) on random logits without ties: the same tokens kept, the same probabilities."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    g = torch.Generator().manual_seed(3)
    for T, k, p, m in ((0.7, 50, 0.9, None), (1.0, 20, 0.95, 0.0), (0.6, 20, 0.95, 0.05), (1.3, 200, 0.8, 0.1)):
        logits = torch.randn(4, 5000, generator=g) * 4
        chain = [TemperatureLogitsWarper(T), TopKLogitsWarper(k), TopPLogitsWarper(p)] + \
            ([MinPLogitsWarper(m)] if m else [])
        theirs = LogitsProcessorList(chain)(None, logits.clone())
        ours = filter_logits(logits, T, k, p, m)
        assert torch.equal(torch.isfinite(ours), torch.isfinite(theirs))
        torch.testing.assert_close(ours.softmax(-1), theirs.softmax(-1), rtol=1e-5, atol=1e-7)


def test_top_p_ties_break_differently_from_transformers():
    """What ch09 says: with two tokens of exactly equal probability at the top-p boundary, ours (a descending sort)
    keeps the first, transformers (an ascending sort) the last."""
    from transformers.generation.logits_process import TopPLogitsWarper

    logits = torch.tensor([[0.4, 0.3, 0.3]]).log()
    assert torch.isfinite(filter_logits(logits, top_p=0.6)).tolist() == [[True, True, False]]
    assert torch.isfinite(TopPLogitsWarper(0.6)(None, logits.clone())).tolist() == [[True, False, True]]


@pytest.mark.slow
def test_think_on_shrinks_the_generation_prompt(tok):
    """ch09's try-this: thinking off ends the prompt with an empty closed block, 4 tokens; thinking on with 2."""
    off, on = tok.encode("<think>\n\n</think>\n\n"), tok.encode("<think>\n")
    assert len(off) == 4 and len(on) == 2 and off[0] == on[0] == 248068 and off[2] == 248069


def test_prefill_decode_and_cache_figures():
    fig = ch09.prefill_vs_decode({"prefill": 0.01, "decode": 0.1, "bound": 0.05}, {"prefill": 0.2, "decode": 0.3})
    assert [round(b.get_height(), 6) for b in fig.axes[0].patches] == [10.0, 100.0, 50.0]  # ms per token
    assert [round(b.get_height(), 6) for b in fig.axes[1].patches] == [200.0, 300.0]
    assert "estimated" in fig.axes[1].get_title() and "measured" in fig.axes[0].get_title()
    close(fig)
    real = sizes.real_config()
    fig = ch09.cache_growth([("real", real)], max_tokens=32_000)
    kv_line, state_line = fig.axes[0].lines
    assert kv_line.get_ydata()[-1] == pytest.approx(375.0)  # MiB at 32,000 tokens, as counted above
    assert state_line.get_ydata()[0] == pytest.approx(18 * (16 * 128 * 128 * 4 + 6144 * 3 * 2) / 2 ** 20)
    close(fig)


@pytest.mark.slow
def test_chapter_runs_and_says_synthetic(chapter_outputs):
    code, out, err = chapter_outputs("ch09_generate.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    assert "greedy (random weights: the tokens mean nothing): " in out and "seed 1 again gives the same tokens: True" \
        in out
    assert "(synthetic" not in out  # said only where random weights make a number mean something else
    held, kv, state = map(float, re.search(r"cache holds ([\d.]+) KiB \(in buffers of [\d.]+ KiB, room to grow "
                                           r"without copying\); by the formula ([\d.]+) KiB of keys and "
                                           r"values \+ ([\d.]+) KiB", out).groups())
    assert held == pytest.approx(kv + state, abs=0.11)
    kv = 6 * 2 * 2 * 32_000 * 256 * 2  # by hand, as in test_cache_bytes_of_the_real_model_by_hand
    state = 18 * (16 * 128 * 128 * 4 + (2 * 16 * 128 + 16 * 128) * 3 * 2)
    assert f"32,000 tokens: KV {kv / 2 ** 20:8.1f} MiB (bf16) + DeltaNet state {state / 2 ** 20:.1f} MiB" in out
    assert "[<|im_start|>] system" in out and "[<think>]" in out  # special tokens marked
    assert re.search(r"copies 1 GB \(reads 1 GB and writes 1 GB\) in \d+ ms, and reads 1 GB in \d+ ms", out)
    assert out.count("(an estimate)") == 3


def test_readme_figure_speed_bounds_follow_from_the_rates_beside_them():
    """A README figure check, so the text stays consistent (the speeds themselves are measurements, not checked):
    in the Speed section each bound is the read rate printed beside it over the real 0.8B's weight bytes
    (752,393,024 parameters, 4 or 2 bytes), each kernel ceiling the kernel's rate over the same bytes, and each
    percentage the quotient it names. Rates are printed to 0.1 GB/s, so a bound may differ by that rounding."""
    from helpers import ROOT

    text = " ".join((ROOT / "README.md").read_text().split("## Speed")[1].split("\n## ")[0].split())
    fp32_speed, bf16_speed = map(float, re.search(r"\| decode, \d+ tokens after 32 \| [\d.]+ \(([\d.]+) tok/s\) \| "
                                                  r"[\d.]+ \(([\d.]+) tok/s\)", text).groups())
    r32, r16, b32, b16, p32, p16 = re.search(r"measured ([\d.]+) and ([\d.]+) GB/s read, a bound of ([\d.]+) tok/s in "
                                             r"fp32 and ([\d.]+) tok/s in bf16, of which the fast path reaches (\d+)% "
                                             r"and (\d+)%", text).groups()
    n = count_by_part(tensor_shapes(REAL_TEXT_CONFIG))["total"]  # 752,393,024, proven against transformers
    for rate, bound, size in ((r32, b32, 4), (r16, b16, 2)):
        assert float(bound) == pytest.approx(float(rate) * 1e9 / (size * n), abs=0.05e9 / (size * n) + 0.05)
    assert int(p32) == round(100 * fp32_speed / float(b32)) and int(p16) == round(100 * bf16_speed / float(b16))
    k32, k16, c32, c16, s32, s16, g32, g16 = re.search(
        r"reads ([\d.]+) GB/s in fp32 and ([\d.]+) GB/s in bf16, so ([\d.]+) and ([\d.]+) tok/s \((\d+)% and (\d+)% of "
        r"the bound\); the fast path gets (\d+)% and (\d+)% of those", text).groups()
    for rate, ceiling, share, bound, size in ((k32, c32, s32, b32, 4), (k16, c16, s16, b16, 2)):
        assert float(ceiling) == pytest.approx(float(rate) * 1e9 / (size * n), abs=0.05e9 / (size * n) + 0.05)
        assert int(share) == pytest.approx(100 * float(ceiling) / float(bound), abs=1)
    assert int(g32) == pytest.approx(100 * fp32_speed / float(c32), abs=1)
    assert int(g16) == pytest.approx(100 * bf16_speed / float(c16), abs=1)
