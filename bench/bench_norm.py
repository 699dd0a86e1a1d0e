"""Speed of qwen/norm.py against transformers' Qwen3.5 norms, measured in the same run, printed as ratios.

Run: python bench/bench_norm.py [--device cpu|cuda|mps]   (needs the dev extras: transformers)
A ratio above 1 means ours is slower. Shapes are the 0.8B model's (qwen/sizes.py): d = 1024 for RMSNorm, 16 value
heads of dv = 128 for the gated norm. Calls alternate, ours then theirs, and the medians are reported (every timing
waits for the device: qwen/measure.py). Readability comes first in qwen/; this shows what, if anything, it costs.
"""
import argparse
from functools import partial

import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm, Qwen3_5RMSNormGated

from qwen.course import pick_device
from qwen.family import SIZES
from qwen.measure import medians
from qwen.norm import GatedRMSNorm, RMSNorm

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device")
device = torch.device(parser.parse_args().device or pick_device())
size = SIZES["0.8B"]
d, Hv, dv = size.hidden_size, size.linear_num_value_heads, size.linear_value_head_dim
torch.manual_seed(0)
with torch.no_grad():
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(4, 512, d, device=device, dtype=dtype)
        ours, theirs = RMSNorm(d).to(device, dtype), Qwen3_5RMSNorm(d).to(device, dtype)
        a, b = medians([partial(ours, x), partial(theirs, x)], device, repeats=30, warmup=3)
        print(f"RMSNorm      {str(dtype):15s} ours {a * 1e3:7.3f} ms  transformers {b * 1e3:7.3f} ms  "
              f"ratio {a / b:.2f}")
        h, z = (torch.randn(4, 512, Hv, dv, device=device, dtype=dtype) for _ in "hz")
        ours, theirs = GatedRMSNorm(dv).to(device, dtype), Qwen3_5RMSNormGated(dv).to(device, dtype)
        a, b = medians([partial(ours, h, z), partial(theirs, h, z)], device, repeats=30, warmup=3)
        print(f"GatedRMSNorm {str(dtype):15s} ours {a * 1e3:7.3f} ms  transformers {b * 1e3:7.3f} ms  "
              f"ratio {a / b:.2f}")
