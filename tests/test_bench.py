"""The benchmarks still run: each script once, at the smallest sizes, on the synthetic checkpoint. Speed itself is
never asserted here (the figures are measured with bench/ on a quiet machine); what is checked is that every line
a reader compares is printed, with a number in it."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_bench_model(synthetic):
    out = run("bench/bench_model.py", "--model", str(synthetic), "--prefill", "8", "--decode", "2", "--repeats", "1",
              "--threads", "1", "--contexts", "16", "40", "--contexts-steps", "1")
    for dtype in ("fp32", "bf16"):
        ratios = r"time ratio to transformers: teaching [\d.]+, fast [\d.]+"
        assert re.search(rf"{dtype} prefill +8 tokens: .* {ratios}", out)
        assert re.search(rf"{dtype} decode 2 tokens after 32: teaching .* fast .* transformers .*fast [\d.]+\n", out)
        goal = "2" if dtype == "bf16" else "1.5"
        assert re.search(rf"{dtype} decode goals, the fast path's tokens/s: [\d.]+x transformers' \(goal >= {goal}x\), "
                         rf"\d+% of the read bound", out)
        assert re.search(rf"{dtype} decode bound [\d.]+ tok/s = [\d.]+ GB/s read .* reads [\d.]+ GB/s", out)
        assert re.search(rf"{dtype} fast path numerics: .*; prompt products (in|widened).*; projections "
                         rf"(oneDNN-packed \([\d.]+ GB of packed copies\)|F.linear)", out)
        for S in (16, 40):
            assert re.search(rf"{dtype} decode with +{S} tokens cached: teaching +[\d.]+ tok/s +fast +[\d.]+ tok/s +"
                             rf"transformers +[\d.]+ tok/s", out)  # numbers padded to a width: below 10, 2 spaces
        assert re.search(rf"{dtype} decode at 40 tokens / at 16: teaching \d+%, fast \d+%, transformers \d+%", out)


def test_bench_deltanet():
    out = run("bench/bench_deltanet.py", "--lengths", "64", "--threads", "1")
    assert len(re.findall(r"T= +64 +heads .* ratio [\d.]+ .*max \|diff\| [\d.e+-]+", out)) == 2


def test_bench_vision(synthetic):
    out = run("bench/bench_vision.py", "--model", str(synthetic), "--sizes", "320x240")
    assert re.search(r"320x240 fp32: +\d+ patches \(\d+ × \d+ grid, 1 frame\), +[\d.]+ s, "
                     r"extra peak +([\d.]+|n/a) MiB, kernel aten::_scaled_dot_product_flash_attention_for_cpu\n", out)
