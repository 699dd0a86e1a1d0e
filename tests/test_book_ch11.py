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
    # a rollback costs 0.2 when some guess was rejected: at alpha 0.5, k 2 with probability 1 − 0.25, so
    # 1.75 tokens for 1 + 2 × 0.3 + 0.75 × 0.2 = 1.75 decode steps
    assert ch11.speedup(0.5, 2, 1.0, 0.3, 0.2) == pytest.approx(1.0, rel=1e-12)
    assert ch11.speedup(1.0, 2, 1.0, 0.3, 5.0) == pytest.approx(3 / 1.6)  # all kept: no rollback to pay
    assert ch11.speedup(0.0, 2, 1.0, 0.3, 0.2) == pytest.approx(1 / 1.8)  # all rejected: every step pays it


def roots_in_unit(coefficients):
    """The real roots in (0, 1) of a polynomial (highest power first), by numpy."""
    import numpy as np
    return [float(z.real) for z in np.roots(coefficients) if abs(z.imag) < 1e-12 and 0 < z.real < 1]


def break_even_by_hand(k, r, rho):
    """c = 1: (1 − α^(k+1)) / (1 − α) = 1 + k·r + (1 − α^k)·ρ, i.e. α + … + α^k + ρ·α^k = k·r + ρ: for k = 1
    α = (r + ρ) / (1 + ρ); k = 2 the quadratic formula; otherwise the polynomial's one root in (0, 1)."""
    if k == 1:
        return (r + rho) / (1 + rho)
    if k == 2:
        return (-1 + math.sqrt(1 + 4 * (1 + rho) * (2 * r + rho))) / (2 * (1 + rho))
    [root] = roots_in_unit([1 + rho] + [1] * (k - 1) + [-(k * r + rho)])
    return root


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("rho", [0.0, 0.03, 0.25])
def test_break_even_solves_the_closed_form(k, rho):
    assert ch11.break_even(k, 1.0, 0.365, rho) == pytest.approx(break_even_by_hand(k, 0.365, rho), abs=1e-12)
    assert ch11.break_even(4, 1.0, 1.1) == 1.0  # never pays: 5 tokens at most, for 5.4 decode steps


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
    """A curve for every k asked for and every k a point was measured at (3 here), each point in its k's colour and
    labelled with its name and k (two coinciding points of one name share a label); the right panel's solid curves
    count the rollback, the dashed ones the other rollback cost."""
    measured = [(0.5, 1.9, 3, "random"), (0.0, 1.0, 1, "head"), (0.0, 1.0, 2, "head"), (1.0, 4.8, 4, "right")]
    fig = ch11.speedup_figure((1, 4), 1.2, 0.3, measured, rollback_cost=0.1, compared=0.25)
    left, right = fig.axes[:2]
    assert [line.get_label() for line in left.lines] == ["k = 1", "k = 2", "k = 3", "k = 4"]
    for line, k in zip(left.lines, (1, 2, 3, 4)):
        for a, y in zip(line.get_xdata(), line.get_ydata()):
            assert y == pytest.approx(enumerated(float(a), k), rel=1e-9)
    solid = [line for line in right.lines if line.get_linestyle() == "-" and len(line.get_xdata()) == 101]
    dashed = [line for line in right.lines if line.get_linestyle() == "--" and len(line.get_xdata()) == 101]
    for lines, rho in ((solid, 0.1), (dashed, 0.25)):
        assert len(lines) == 4
        for line, k in zip(lines, (1, 2, 3, 4)):
            a, y = line.get_xdata()[50], line.get_ydata()[50]
            assert a == pytest.approx(0.5) and y == pytest.approx(enumerated(0.5, k) / (1.2 + k * 0.3 + (1 - 0.5 ** k)
                                                                                         * rho))
    colour = {k: line.get_color() for line, k in zip(left.lines, (1, 2, 3, 4))}
    points = [(c.get_offsets().tolist()[0], matplotlib.colors.to_hex(c.get_facecolor()[0])) for c in left.collections]
    assert points == [([a, t], matplotlib.colors.to_hex(colour[k])) for a, t, k, _ in measured]
    assert sorted(t.get_text() for t in left.texts) == ["head, k = 1, 2", "random, k = 3", "right, k = 4"]
    close(fig)


@pytest.mark.slow
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
    C = 2 * 16 * 128 + 16 * 128  # conv channels [q | k | v]
    for k in (1, 2, 4):  # per token: the conv's inputs and b, a (16 each), bf16
        assert f"k = {k}: + kept projections {18 * (k + 1) * (C + 32) * 2 / 2 ** 20:.2f} MiB; a state per verified " \
               f"position instead: {(k + 1) * 18 * state / 2 ** 20:.1f} MiB" in out
    whole = d * C + d * 16 * 128 + 2 * d * 16 + C * 4 + 2 * 16 + 128 + 16 * 128 * d  # qkv, z, b, a, conv, norm, out
    memory = d * C + 2 * d * 16 + C * 4 + 2 * 16  # what the state reads: qkv, b, a, the conv, dt_bias, A_log
    rho_whole, rho = 18 * whole / 752_393_024, 18 * (C * 4 * 2 + 2 * state) / (2 * 752_393_024)
    assert whole == 10_543_264  # the layer's own count, as chapter 1 lists it
    assert f"each mixer again, whole: 18 × {whole:,} weights: ρ ≈ {rho_whole:.2f}" in out
    assert f"its memory alone (no in_proj_z, norm, out_proj): 18 × {memory:,} weights: ρ ≈ " \
           f"{18 * memory / 752_393_024:.2f}" in out
    assert f"18 × {C * 4:,} conv weights and 18 × 2 × {state:,} B of states: ρ ≈ {rho:.3f}" in out
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
    for k in (1, 2, 4):  # the break-even roots by hand; the speed-ups with the course's ρ
        even = [break_even_by_hand(k, r, cost) for cost in (0.0, rho_whole, rho)]
        at = (1 - 0.8 ** (k + 1)) / 0.2 / (1 + k * r + (1 - 0.8 ** k) * rho)
        assert f"c = 1, k = {k}: pays from α ≈ {even[0]:.2f} (ρ = 0), {even[1]:.2f} (ρ = {rho_whole:.2f}), " \
               f"{even[2]:.2f} (ρ = {rho:.3f}) on; at α = 0.8: {at:.2f}x (at most {(k + 1) / (1 + k * r):.2f}x at " \
               f"α = 1)" in out
    decode, replay, again, one, by_bytes = re.search(
        r"one decode step (\S+) ms, .* keeps 2 of them (\S+) ms \(ρ here: (\S+) ms / (\S+) ms; by bytes at the 0.8B's "
        r"shapes (\S+)\)", out).groups()
    assert (replay, one) == (again, decode) and float(replay) > 0 and by_bytes == f"{rho:.3f}"
    assert "closed form 1.88 (apart by chance); identical: True" in out  # (1 − 0.5⁴) / 0.5 = 1.875
    assert "closed form 2.95 (apart by chance); identical: True" in out  # (1 − 0.8⁴) / 0.2 = 2.952
    for n in (219, 220, 221):
        assert f"» exercise {n} (" in out


def test_the_prose_says_the_derived_numbers():
    """The numbers the chapter's text and qwen/speculative.py's docstring state (no code prints them there), from
    the real 0.8B's config by hand: the snapshot's size, ρ both ways, the break-even at k = 1 and the speed-ups at
    α = 0.8; and the sentences the second reading found wrong stay gone."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = re.sub(r"\n#\s*", " ", (root / "chapters/ch11_mtp.py").read_text())  # markdown joined into lines
    doc = re.sub(r"\s+", " ", (root / "qwen/speculative.py").read_text())
    chat = re.sub(r"\s+", " ", (root / "app/chat.py").read_text())
    d, C, state, n = 1024, 6144, 16 * 128 * 128 * 4 + 3 * 6144 * 2, 752_393_024
    mtp, V = 20_452_864, 248320
    r = (mtp + V * d) / n
    rho, rho_whole = 18 * (C * 4 * 2 + 2 * state) / (2 * n), 18 * 10_543_264 / n
    assert f"{18 * state / 2 ** 20:.1f} MiB for the real 0.8B whatever $k$" in text
    assert f"({18 * state / 2 ** 20:.1f} MiB in the 0.8B, whatever k)" in doc
    assert f"$\\rho \\approx {rho:.2f}$ of a decode step, where re-running each mixer whole reads a quarter of the " \
           f"model ($\\rho \\approx {rho_whole:.2f}$)" in text
    assert rho_whole == pytest.approx(0.25, abs=0.005)  # "a quarter"
    assert f"the byte count's {rho:.3f}" in text
    even = break_even_by_hand(1, r, rho)
    assert f"more than about {round(10 * even):d} times in 10 at $k = 1$" in text
    at = [(1 - 0.8 ** (k + 1)) / 0.2 / (1 + k * r + (1 - 0.8 ** k) * rho) for k in (1, 2, 4)]
    assert f"({min(at):.1f}x to {max(at):.1f}x at $\\alpha = 0.8$)" in text
    assert "give the same logits up to rounding" in text
    for wrong in ("α must be high", "needs a distribution that does not change", "18 MiB"):
        assert wrong not in text and wrong not in doc and wrong not in chat
