"""Chapter 11: the speed-up's closed form (book/ch11.py) against an exact enumeration and a simulation, its figures
draw what they claim, and the chapter script prints what the real config and hand arithmetic say.

The expected numbers here are computed from their definitions (an expectation summed over outcomes, the real 0.8B's
config from qwen/sizes.py multiplied out by hand), never read back from the chapter's output."""
import math
import random
import re

import matplotlib
import pytest
import torch

from book import ch11

matplotlib.use("Agg")


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def enumerated(alpha, k):
    """E[tokens per forward] summed over its outcomes: n guesses kept (n < k: then the first wrong one, probability
    alpha^n (1 − alpha); n = k: alpha^k), each giving n + 1 tokens."""
    return sum((n + 1) * alpha ** n * (1 - alpha) for n in range(k)) + (k + 1) * alpha ** k


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_tokens_per_step_is_the_expectation(k):
    for alpha in (0.0, 0.3, 0.5, 0.8, 0.99, 1.0):
        assert ch11.tokens_per_step(alpha, k) == pytest.approx(enumerated(alpha, k), rel=1e-12)


def test_tokens_per_step_matches_a_simulation():
    """20,000 simulated forwards at alpha = 0.7, k = 3: the mean within 4 standard errors of the formula."""
    rng, alpha, k, n = random.Random(0), 0.7, 3, 20_000
    made = []
    for _ in range(n):
        kept = 0
        while kept < k and rng.random() < alpha:
            kept += 1
        made.append(kept + 1)
    mean = sum(made) / n
    sd = (sum((m - mean) ** 2 for m in made) / (n - 1)) ** 0.5
    assert abs(mean - ch11.tokens_per_step(alpha, k)) < 4 * sd / n ** 0.5


def test_speedup_by_hand():
    # alpha 0.8, k 2: 1 + 0.8 + 0.64 = 2.44 tokens, for 1.1 + 2 × 0.37 = 1.84 decode steps
    assert ch11.speedup(0.8, 2, 1.1, 0.37) == pytest.approx(2.44 / 1.84, rel=1e-12)
    assert ch11.speedup(1.0, 4, 1.0, 0.0) == 5.0  # a free, always-right draft: k + 1 per forward
    assert ch11.speedup(0.0, 3, 1.0, 0.25) == pytest.approx(1 / 1.75)  # never right: only the cost


def test_loop_figure_colours_each_guess():
    steps = [dict(fed=1, drafts=[2, 3, 4], accepted=2, main=5), dict(fed=5, drafts=[6, 7, 8], accepted=0, main=9),
             dict(fed=9, drafts=[10, 11, 12], accepted=3, main=13)]
    fig = ch11.loop_figure(steps, title="t (synthetic weights)")
    ax = fig.axes[0]
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours.count(ch11.ACCEPTED.lower()) == 2 + 0 + 3
    assert colours.count(ch11.REJECTED.lower()) == 2  # the first wrong guess of the steps that had one
    assert colours.count(ch11.UNREAD.lower()) == 0 + 2 + 0  # after step 2's rejection at d1
    assert colours.count(matplotlib.colors.to_hex(ch11.MAIN)) == 3  # one main-model token per forward
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("+")] == ["+3", "+1", "+4"]
    assert "bonus" in texts and "replaces d3" in texts and "replaces d1" in texts
    assert "synthetic weights" in ax.get_title()
    close(fig)


def test_rollback_figure_prints_the_values():
    states = {"a": torch.tensor([[0.125, -1.0], [0.5, 0.0]]), "b": torch.zeros(2, 2)}
    fig = ch11.rollback_figure(states)
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
    assert [t.get_text() for t in fig.axes[0].texts] == ["+0.125", "-1.000", "+0.500", "+0.000"]
    close(fig)


def test_speedup_figure_draws_the_closed_form():
    fig = ch11.speedup_figure((1, 4), 1.2, 0.3, [(0.5, 1.9, "measured")])
    left, right = fig.axes[:2]
    for line, k in zip(left.lines, (1, 4)):
        for a, y in zip(line.get_xdata(), line.get_ydata()):
            assert y == pytest.approx(enumerated(float(a), k), rel=1e-9)
    for line, k in zip(right.lines, (1, 4)):
        a, y = line.get_xdata()[50], line.get_ydata()[50]
        assert a == pytest.approx(0.5) and y == pytest.approx(enumerated(0.5, k) / (1.2 + k * 0.3))
    assert left.collections[0].get_offsets().tolist() == [[0.5, 1.9]]
    close(fig)


def test_chapter_prints_the_real_numbers(chapter_outputs):
    """Everything ch11 prints that does not depend on the random weights, from the real 0.8B's config by hand."""
    code, out, err = chapter_outputs("ch11_mtp.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    d, V, I, D = 1024, 248320, 3584, 256
    layer = 2 * 8 * D * d + 2 * 2 * D * d + d * 8 * D + 2 * D + 3 * d * I + 2 * d  # q (with gate), k, v, o, norms
    mtp = 2 * d * d + 3 * d + layer  # fc (d, 2d), the three norms, one full-attention layer
    assert f"real Qwen3.5-0.8B: {mtp:,} parameters in mtp.*, {mtp / 752_393_024:.1%}" in out
    assert "15 tensors" in out and "the same names as real Qwen3.5-0.8B's: True; the shapes its config predicts: " \
        "True" in out
    assert "mtp.fc.weight" in out and "(1024, 2048)" in out
    assert "the steps by hand vs qwen.mtp.step: max |diff| = 0.0e+00" in out
    shift, double = map(float, re.search(r"positions t \+ 1 instead of t: max \|diff\| = (\S+) \(logits up to \S+\); "
                                         r"positions 2t: (\S+)", out).groups())
    scale = float(re.search(r"\(logits up to (\S+)\)", out).group(1))
    assert shift <= 1e-5 * scale and double > 100 * 1e-5 * scale  # RoPE sees distances: the first is rounding
    kv = 2 * 2 * D * 2  # K and V, Hkv = 2 heads of D, bf16
    assert f"the MTP layer keeps {kv:,} B per token in bf16; the main model's 6 full-attention layers {6 * kv:,} B: " \
           f"the block adds 1/6" in out
    assert out.count("identical to plain greedy: True") == 7 and "identical to plain greedy: False" not in out
    for k in (1, 2, 4):  # 16 tokens, the first from the prefill: 15 in ceil(15 / (k + 1)) forwards
        assert f"always right k = {k}: identical to plain greedy: True; accepted" in out
        assert f"{15 / math.ceil(15 / (k + 1)):.2f} tokens per main-model forward\n" in out
    accepted = [int(a) for a in re.findall(r"MTP head     k = \d: identical to plain greedy: True; accepted (\d+)",
                                           out)]
    assert len(accepted) == 3 and max(accepted) <= 2  # random weights: about 1 in V guesses right
    assert "the conv window is the inputs of d_1, d_2, d_3 only: True" in out
    far, near = map(float, re.search(r"\|verify − plain\| = (\S+); \|replayed − plain\| = (\S+),", out).groups())
    assert far > 1e-2 and near < 1e-6
    state = 16 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 16 * 128) * 2  # fp32 state + 3 conv inputs in bf16, per layer
    assert f"the snapshot, 18 layers × {state:,} B = {18 * state / 2 ** 20:.1f} MiB" in out
    for k in (1, 2, 4):
        assert f"k = {k}: + kept inputs {18 * (k + 1) * d * 2 / 2 ** 20:.2f} MiB; a state per verified position " \
               f"instead: {(k + 1) * 18 * state / 2 ** 20:.1f} MiB" in out
    assert f"{18 * 10_543_264:,} weights, {18 * 10_543_264 / 752_393_024:.0%} of the model's" in out
    before = float(re.search(r"before the rollback, the DeltaNet states .* by (\d+)% of their scale", out)[1]) / 100
    after = dict(re.findall(r"(k|v|conv|state) ([\d.e+-]+)", out.split("after Rollback.keep(2): ")[1].split("\n")[0]))
    both = dict(re.findall(r"(k|v|conv|state) ([\d.e+-]+)",
                           out.split("in one plain forward, against one at a time: ")[1].split("\n")[0]))
    # fp32 rounding through 24 layers (measured: up to 4.3e-5 after the rollback, 1.6e-5 for a plain pass that reads
    # the two tokens at once); a state that kept the rejected tokens is off by its own size
    assert before > 0.1 and max(float(v) for v in after.values()) < 1e-4 and max(map(float, both.values())) < 1e-4
    # the acceptance rule: exact distributions for the chapter's p and q, by hand
    assert "equal to p: True" in out
    assert "'keep only when p ≥ q': [0.9, 0.0, 0.0, 0.1, 0.0]" in out  # q kept at p ≥ q, the rest to token 0
    assert "from p': [0.3, 0.28, 0.21, 0.14, 0.07]" in out  # min(p, q) + 0.4 p
    r = (mtp + V * d) / 752_393_024
    assert f"r ≈ {r:.2f} by bytes read" in out
    assert f"c = 1, k = 1: pays from α ≈ {math.ceil(100 * r) / 100:.2f} on" in out  # (1 + α) / (1 + r) ≥ 1
    root = (-1 + math.sqrt(1 + 8 * r)) / 2  # 1 + α + α² = 1 + 2r
    assert f"c = 1, k = 2: pays from α ≈ {math.ceil(100 * root) / 100:.2f} on" in out
    assert f"at α = 0.8: {(1 + 0.8) / (1 + r):.2f}x (at most {2 / (1 + r):.2f}x at α = 1)" in out
    assert "closed form 1.88 (apart by chance); identical: True" in out  # (1 − 0.5⁴) / 0.5 = 1.875
    assert "closed form 2.95 (apart by chance); identical: True" in out  # (1 − 0.8⁴) / 0.2 = 2.952
    for n in (219, 220, 221):
        assert f"» exercise {n} (" in out
