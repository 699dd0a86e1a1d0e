"""Chapter 9: its figure functions (book/ch09.py) draw what they claim, the cache arithmetic (book/sizes.py) equals
the tensors a real cache holds and a hand count for the real 0.8B, and the chapter script runs and says what is
synthetic."""
import re

import matplotlib
import pytest
import torch

import book
from book import ch09, sizes
from qwen.model import load_model
from qwen.weights import Config

matplotlib.use("Agg")
pytestmark = pytest.mark.usefixtures("one_thread")


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def held_bytes(cache):
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in vars(layer).values()
               if isinstance(t, torch.Tensor))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cache_bytes_equal_a_real_cache(synthetic, dtype):
    model = load_model(synthetic, dtype=dtype)
    cfg = Config.load(synthetic)
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.arange(1, 40)[None], cache=cache)
        kv, state = sizes.cache_bytes(cfg, 39, torch.finfo(dtype).bits // 8)
        assert held_bytes(cache) == kv + state
        model(torch.tensor([[5]]), cache=cache)  # one more token: only the KV part grows
        assert held_bytes(cache) == sum(sizes.cache_bytes(cfg, 40, torch.finfo(dtype).bits // 8))


def test_cache_bytes_of_the_real_model_by_hand():
    kv, state = sizes.cache_bytes(book.real.config(), 32_000)
    assert kv == 6 * 2 * 2 * 32_000 * 256 * 2  # 6 full layers, K and V, Hkv = 2, D = 256, bf16
    assert state == 18 * (16 * 128 * 128 * 4 + (2 * 16 * 128 + 16 * 128) * 3 * 2)  # fp32 state + K-1 conv columns


def test_sampling_figure():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1000, generator=g) * 3
    fig = ch09.sampling_rules(logits, str, temperature=0.7, top_k=20, top_p=0.8, show=25)
    titles = [ax.get_title() for ax in fig.axes]
    assert "1,000 tokens left" in titles[0] and "1,000 tokens left" in titles[1] and "20 tokens left" in titles[2]
    heights = [bar.get_height() for bar in fig.axes[0].patches]
    want = logits.softmax(-1).sort(descending=True).values[:25]
    torch.testing.assert_close(torch.tensor(heights, dtype=torch.float32), want, rtol=1e-5, atol=1e-7)
    sharp = torch.tensor([bar.get_height() for bar in fig.axes[1].patches], dtype=torch.float32)
    torch.testing.assert_close(sharp, (logits / 0.7).softmax(-1).sort(descending=True).values[:25], rtol=1e-5,
                               atol=1e-7)
    kept = int(re.search(r"([\d,]+) tokens left", titles[3]).group(1).replace(",", ""))
    p = (logits / 0.7).topk(20).values.softmax(-1)  # hand top-p: smallest prefix whose mass reaches 0.8
    assert kept == int((p.cumsum(-1) - p < 0.8).sum())
    close(fig)


def test_prefill_decode_and_cache_figures():
    fig = ch09.prefill_vs_decode(0.64, 64, 1.6, 16, 0.05)
    assert [round(b.get_height(), 6) for b in fig.axes[0].patches] == [10.0, 100.0, 50.0]  # ms per token
    close(fig)
    real = book.real.config()
    fig = ch09.cache_growth([("real", real)], max_tokens=32_000)
    kv_line, state_line = fig.axes[0].lines
    assert kv_line.get_ydata()[-1] == pytest.approx(375.0)  # MiB at 32,000 tokens, as counted above
    assert state_line.get_ydata()[0] == pytest.approx(18 * (16 * 128 * 128 * 4 + 6144 * 3 * 2) / 2 ** 20)
    close(fig)


def test_chapter_runs_and_says_synthetic(chapter_outputs):
    code, out, err = chapter_outputs("ch09_generate.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    assert "greedy  (synthetic weights: random tokens)" in out and "seed 1 again gives the same tokens: True" in out
    held, kv, state = map(float, re.search(r"cache holds ([\d.]+) KiB; by the formula ([\d.]+) KiB of keys and "
                                           r"values \+ ([\d.]+) KiB", out).groups())
    assert held == pytest.approx(kv + state, abs=0.11)
    assert "32,000 tokens: KV    375.0 MiB (bf16) + DeltaNet state 18.6 MiB" in out
    assert "[<|im_start|>] system" in out and "[<think>]" in out  # special tokens marked
