"""Speed of our chunked delta rule against transformers' own pure-torch kernel, measured in the same run, as ratios.

Run: python bench/bench_deltanet.py [--device cpu|cuda|mps] [--threads N] [--lengths 512 2048 8192]
(needs the dev extras: transformers). A ratio below 1 means ours is faster. `torch_chunk_gated_delta_rule` is what
transformers runs on a CPU, and on any machine without the flash-linear-attention package. Both get the same raw
q, k, v, g, β and do the same work: l2-normalise q and k, scale q, run the chunked kernel, return the final state.
Shapes (qwen/sizes.py): the 0.8B and 2B models' linear attention (16 key heads, 16 value heads, dk = dv = 128, fp32
kernel), and the 4B/9B models' (32 value heads sharing 16 key heads). Calls alternate, ours then theirs, so a noisy
shared machine slows both alike; the median of each is reported, wall clock and (on CPU) this process's CPU time
(every timing waits for the device: qwen/measure.py).
"""
import argparse
import statistics
from functools import partial

import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule
from transformers.utils import logging

from qwen.course import pick_device
from qwen.deltanet import chunked_delta_rule
from qwen.family import SIZES
from qwen.measure import timed
from qwen.norm import l2norm

logging.set_verbosity_error()  # transformers says, once per call, that flash-linear-attention is not installed


def inputs(T, Hk, Hv, dk, dv, device, seed=0):
    """What the layer hands its kernel: raw q, k (B, T, Hk, dk); v (B, T, Hv, dv); g ≤ 0 and β in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, T, Hk, dk, generator=gen), torch.randn(1, T, Hk, dk, generator=gen)
    v = torch.randn(1, T, Hv, dv, generator=gen)
    g, beta = -2 * torch.rand(1, T, Hv, generator=gen), torch.rand(1, T, Hv, generator=gen)
    return [x.to(device) for x in (q, k, v, g, beta)]


def ours(q, k, v, g, beta):
    return chunked_delta_rule(l2norm(q) * q.shape[-1] ** -0.5, l2norm(k), v, g, beta)


def theirs(q, k, v, g, beta):
    return torch_chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True, output_final_state=True)


def compare(T, size, device, repeats):
    """Ours against theirs on one size's DeltaNet heads (a qwen.family.Size), T tokens."""
    Hk, Hv = size.linear_num_key_heads, size.linear_num_value_heads
    args = inputs(T, Hk, Hv, size.linear_key_head_dim, size.linear_value_head_dim, device)
    (o1, s1), (o2, s2) = ours(*args), theirs(*args)  # also the warm-up
    diff = max((o1 - o2).abs().max().item(), (s1 - s2).abs().max().item())
    runs = {ours: [], theirs: []}
    for _ in range(repeats):
        for fn in runs:
            runs[fn].append(timed(partial(fn, *args), device))
    (a_wall, a_cpu), (b_wall, b_cpu) = ([statistics.median(col) for col in zip(*runs[fn], strict=True)]
                                        for fn in (ours, theirs))
    cpu = f"   CPU time: ratio {a_cpu / b_cpu:.2f}" if device.type == "cpu" else ""
    print(f"T={T:5d}  heads {Hk:2d} k / {Hv:2d} v   ours {a_wall * 1e3:8.1f} ms   transformers {b_wall * 1e3:8.1f} ms  "
          f"ratio {a_wall / b_wall:.2f}{cpu}   (max |diff| {diff:.1e})")


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device")
parser.add_argument("--threads", type=int, help="torch threads on CPU (default: torch's choice)")
parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048, 8192])
opts = parser.parse_args()
device = torch.device(opts.device or pick_device())
if opts.threads:
    torch.set_num_threads(opts.threads)
print(f"device {device}, {torch.get_num_threads()} threads; median of alternating calls")
with torch.no_grad():
    for T in opts.lengths:
        compare(T, SIZES["0.8B"], device, repeats=5 if T <= 2048 else 3)
    compare(min(opts.lengths[-1], 2048), SIZES["4B"], device, repeats=3)
