"""Speed of qwen/norm.py against transformers' Qwen3.5 norms, measured in the same run, printed as ratios.

Run: python bench/bench_norm.py [--device cpu|cuda|mps]   (needs the dev extras: transformers)
A ratio above 1 means ours is slower. Shapes are the 0.8B model's: d = 1024 for RMSNorm, dv = 128 per head for the
gated norm. Readability comes first in qwen/; this shows what, if anything, it costs.
"""
import argparse
import statistics
import time

import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm, Qwen3_5RMSNormGated

from qwen.course import pick_device
from qwen.norm import GatedRMSNorm, RMSNorm


def median_time(fn, device, repeats=30):
    for _ in range(3):  # warm-up
        fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device")
device = torch.device(parser.parse_args().device or pick_device())
torch.manual_seed(0)
with torch.no_grad():
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(4, 512, 1024, device=device, dtype=dtype)
        ours, theirs = RMSNorm(1024).to(device, dtype), Qwen3_5RMSNorm(1024).to(device, dtype)
        a, b = median_time(lambda: ours(x), device), median_time(lambda: theirs(x), device)
        print(f"RMSNorm      {str(dtype):15s} ours {a * 1e3:7.3f} ms  transformers {b * 1e3:7.3f} ms  ratio {a / b:.2f}")
        h, z = torch.randn(4, 512, 16, 128, device=device, dtype=dtype), torch.randn(4, 512, 16, 128, device=device, dtype=dtype)
        ours, theirs = GatedRMSNorm(128).to(device, dtype), Qwen3_5RMSNormGated(128).to(device, dtype)
        a, b = median_time(lambda: ours(h, z), device), median_time(lambda: theirs(h, z), device)
        print(f"GatedRMSNorm {str(dtype):15s} ours {a * 1e3:7.3f} ms  transformers {b * 1e3:7.3f} ms  ratio {a / b:.2f}")
