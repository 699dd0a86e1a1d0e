"""Peak resident memory of load_model and load_fast on a checkpoint with the real 0.8B shapes (random bf16 weights).

Builds the checkpoint in a temporary folder (one model.safetensors, tied head, like the real 0.8B's text part),
then loads it in a fresh process per loader and compares the peak RSS increase with the weight file's size. The
fast model joins projections at load time (qwen/fast.py): those joined weights are its own memory, the others stay
mapped from the file, so both loaders should come out near 1x the file in bf16. Where the CPU packs the dtype's
weights for oneDNN (qwen/products.py: fp32 always, bf16 on x86 with AVX-512 or AVX-NE-CONVERT) the fast model also
holds a packed copy of every matrix: about 1x the file more.
Run: python bench/load_memory.py [--dtype bf16|fp32] [--loader model fast]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from qwen.sizes import REAL_TEXT_CONFIG, tensor_shapes

CHILD = """
import sys, time, torch
from qwen.fast import load_fast
from qwen.model import load_model
def mb(field):  # VmRSS: resident now; VmHWM: the peak so far (of this program: ru_maxrss would count its parent's)
    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(field)) / 1024
before = mb('VmRSS')
t = time.perf_counter()
model = (load_fast if sys.argv[3] == "fast" else load_model)(sys.argv[1], dtype=sys.argv[2])
seconds = time.perf_counter() - t
peak, after = mb('VmHWM'), mb('VmRSS')
with torch.no_grad():
    model(torch.tensor([[1, 2, 3, 4]]))  # touches every weight
used = mb('VmHWM')
print(before, peak, after, used, seconds, sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20)
"""


def build(folder):
    """Random tensors with every text-model name and shape of the 0.8B (qwen/sizes.py), written as one bf16
    safetensors file."""
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_5", "text_config": REAL_TEXT_CONFIG,
                                                    "tie_word_embeddings": True}))
    shapes = tensor_shapes(REAL_TEXT_CONFIG)
    g = torch.Generator().manual_seed(0)
    tensors = {"model.language_model." + n: torch.randn(s, generator=g).to(torch.bfloat16) for n, s in shapes.items()}
    save_file(tensors, folder / "model.safetensors")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    parser.add_argument("--loader", nargs="+", default=["model", "fast"], choices=["model", "fast"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        size = (Path(tmp) / "model.safetensors").stat().st_size / 2**20
        runs = {loader: subprocess.run([sys.executable, "-c", CHILD, tmp, args.dtype, loader], capture_output=True,
                                       text=True, check=True).stdout.split() for loader in args.loader}
    print(f"weight file {size:,.0f} MiB (bf16)")
    for loader, out in runs.items():
        before, peak, after, used, seconds, weights = map(float, out)
        print(f"load_{loader}, {args.dtype}: {weights:,.0f} MiB of parameters; RSS before load {before:,.0f} MiB, peak "
              f"during load {peak:,.0f} MiB, after {after:,.0f} MiB (bf16 tensors stay mapped from the file until "
              f"used); load took {seconds:.1f} s")
        print(f"  peak after a 4-token forward (every weight read) {used:,.0f} MiB: increase {used - before:,.0f} MiB "
              f"= {(used - before) / size:.2f} x the weight file")


if __name__ == "__main__":
    main()
